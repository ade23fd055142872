// Search (the previous query, kept as bench/ask.py's v1 baseline): both-direction neighbours of the entities $ids, at most $cap per entity: the first $cap
// by (relationship type, forward?, neighbour id), so hubs keep the same edges whatever the store order.
// Returns one row per found entity: id and edges = [[relationship type, forward?, neighbour id], ...].
UNWIND $ids AS id
MATCH (e:Entity {dataset: $dataset, id: id})
CALL (e) {
  MATCH (e)-[r]-(n:Entity)
  WITH type(r) AS type, startNode(r) = e AS forward, n.id AS neighbour
  ORDER BY type, forward, neighbour
  LIMIT $cap
  RETURN [type, forward, neighbour] AS edge
}
RETURN id, collect(edge) AS edges
