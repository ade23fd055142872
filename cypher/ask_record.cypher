// One Ask record: the Ask's properties, its topic ids and its answers with rank, cost and recorded path lists.
MATCH (a:Ask {id: $id})
CALL (a) {
  OPTIONAL MATCH (a)-[:TOPIC]->(t:Entity)
  RETURN collect(t.id) AS topics
}
CALL (a) {
  OPTIONAL MATCH (a)-[p:ANSWER]->(e:Entity)
  WITH e, p ORDER BY p.rank
  RETURN collect(CASE WHEN e IS NULL THEN null ELSE {
    id: e.id, rank: p.rank, cost: p.cost, path: p.path,
    nodes: p.nodes, rels: p.rels, forward: p.forward
  } END) AS answers
}
RETURN properties(a) AS ask, topics, answers
