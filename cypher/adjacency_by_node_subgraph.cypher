// Search, `--scope subgraph`: adjacency_by_node inside question $question's own subgraph
// (entities given by node id from an earlier hop of the same question, so already members;
// their neighbours must be members too). Same ONE row and cap as adjacency_by_node.
MATCH (q:Question {dataset: $dataset, id: $question})
UNWIND $nodes AS node
MATCH (e:Entity)
  WHERE id(e) = node AND e.dataset = $dataset
WITH q, collect(e) AS found
CALL (q, found) {
  CALL (q, found) {
    UNWIND found AS e
    WITH q, e WHERE 2 * COUNT { (e)--() } <= $cap
    MATCH (e)-[r]-(n:Entity)
      WHERE EXISTS { (q)-[:IN_SUBGRAPH]->(n) }
    RETURN type(r) AS type, startNode(r) = e AS forward, e, n
    UNION ALL
    UNWIND found AS e
    WITH q, e WHERE 2 * COUNT { (e)--() } > $cap
    CALL (q, e) {
      MATCH (e)-[r]-(n:Entity)
        WHERE EXISTS { (q)-[:IN_SUBGRAPH]->(n) }
      WITH type(r) AS type, startNode(r) = e AS forward, n ORDER BY n.id
      WITH type, forward, collect(n)[..$cap] AS ns
      UNWIND ns AS n
      RETURN type, forward, n
    }
    RETURN type, forward, e, n
  }
  WITH type, forward, collect(id(e) * 4294967296 + id(n)) AS edges, collect(n) AS ns
  RETURN collect([type, forward, edges, CASE WHEN $names THEN [n IN ns | n.id] END]) AS groups
}
RETURN [e IN found | id(e)] AS nodes, [e IN found | e.id] AS ids, groups
