// Training, `--scope subgraph`: gold_paths inside question $question's own subgraph: every
// entity on a path must be a member, (:Question)-[:IN_SUBGRAPH]->(:Entity). Shortest paths (at
// most 4 hops) from each topic to each gold answer in $pairs [{topic, answer}], at most
// $max_paths per pair, the first by (relationship types, directions, node ids).
// Returns topic, answer and steps = [[relationship type, forward?, next entity id], ...] per path.
MATCH (q:Question {dataset: $dataset, id: $question})
UNWIND $pairs AS pair
MATCH (t:Entity {dataset: $dataset, id: pair.topic})
MATCH (a:Entity {dataset: $dataset, id: pair.answer})
  WHERE EXISTS { (q)-[:IN_SUBGRAPH]->(t) } AND EXISTS { (q)-[:IN_SUBGRAPH]->(a) }
CALL (q, t, a) {
  MATCH p = allShortestPaths((t)-[*..4]-(a))
  WHERE all(n IN nodes(p) WHERE n:Entity AND EXISTS { (q)-[:IN_SUBGRAPH]->(n) })
  WITH p, relationships(p) AS rels, nodes(p) AS ns
  WITH [r IN rels | type(r)] AS types,
       [i IN range(0, size(rels) - 1) | startNode(rels[i]) = ns[i]] AS forwards,
       [n IN ns | n.id] AS ids
  ORDER BY types, forwards, ids
  LIMIT $max_paths
  RETURN [i IN range(0, size(types) - 1) | [types[i], forwards[i], ids[i + 1]]] AS steps
}
RETURN pair.topic AS topic, pair.answer AS answer, steps
