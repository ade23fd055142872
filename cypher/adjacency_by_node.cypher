// Search: adjacency_by_id for entities given by node id ($nodes, from an earlier hop of the
// same question: a seek by node id is several times cheaper than by (dataset, id)). Same row
// and cap. The dataset check guards against a node id reused by a concurrent delete + create.
UNWIND $nodes AS node
MATCH (e:Entity)
  WHERE id(e) = node AND e.dataset = $dataset
WITH collect(e) AS found
CALL (found) {
  UNWIND found AS e
  CALL (e) {
    MATCH (e)-[r]-(n:Entity)
    WITH type(r) AS type, startNode(r) = e AS forward, collect(n) AS ns
    RETURN type, forward,
           CASE WHEN size(ns) <= $cap THEN ns
                ELSE COLLECT { UNWIND ns AS m RETURN m ORDER BY m.id LIMIT $cap } END AS ns
  }
  UNWIND ns AS n
  WITH type, forward, collect(id(e) * 4294967296 + id(n)) AS edges, collect(n) AS ns
  RETURN collect([type, forward, edges, CASE WHEN $names THEN [n IN ns | n.id] END]) AS groups
}
RETURN [e IN found | id(e)] AS nodes, [e IN found | e.id] AS ids, groups
