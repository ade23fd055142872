// Search: both-direction neighbours of the entities $ids, at most $cap per entity.
// Returns one row per found entity: id and edges = [[relationship type, forward?, neighbour id], ...].
UNWIND $ids AS id
MATCH (e:Entity {dataset: $dataset, id: id})
CALL (e) {
  MATCH (e)-[r]-(n:Entity)
  RETURN [type(r), startNode(r) = e, n.id] AS edge
  LIMIT $cap
}
RETURN id, collect(edge) AS edges
