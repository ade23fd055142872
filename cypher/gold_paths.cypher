// Training: shortest paths (at most 4 hops; callers drop longer ones) from each topic to each gold answer in $pairs [{topic, answer}].
// Returns topic, answer and steps = [[relationship type, forward?, next entity id], ...] per path.
UNWIND $pairs AS pair
MATCH (t:Entity {dataset: $dataset, id: pair.topic})
MATCH (a:Entity {dataset: $dataset, id: pair.answer})
CALL (t, a) {
  MATCH p = allShortestPaths((t)-[*..4]-(a))
  WHERE all(n IN nodes(p) WHERE n:Entity)
  RETURN p LIMIT $max_paths
}
RETURN pair.topic AS topic, pair.answer AS answer,
       [i IN range(0, length(p) - 1) |
         [type(relationships(p)[i]), startNode(relationships(p)[i]) = nodes(p)[i], nodes(p)[i + 1].id]] AS steps
