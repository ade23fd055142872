// Hop-level calibration: the distinct relation sequences of exactly $hops steps (1 to 4) along simple paths
// from a topic in $topics to a gold answer in $answers that meet no topic after their start (the rule open expansion follows).
// Returns one row per sequence, the first $limit by steps: steps = [[relationship type, forward?], ...] and
// answers = the gold answer ids it reaches. One fixed-length branch per hop count (only the one equal to $hops runs),
// each joined in the middle so hub entities are not enumerated from both ends.
CALL () {
  MATCH (t:Entity {dataset: $dataset}), (a:Entity {dataset: $dataset})
  WHERE $hops = 1 AND t.id IN $topics AND a.id IN $answers
  MATCH p = (t)-[]-(a)
  RETURN p
UNION ALL
  MATCH (t:Entity {dataset: $dataset}), (a:Entity {dataset: $dataset})
  WHERE $hops = 2 AND t.id IN $topics AND a.id IN $answers
  MATCH p = (t)-[]-(m:Entity)-[]-(a) USING JOIN ON m
  RETURN p
UNION ALL
  MATCH (t:Entity {dataset: $dataset}), (a:Entity {dataset: $dataset})
  WHERE $hops = 3 AND t.id IN $topics AND a.id IN $answers
  MATCH p = (t)-[]-(:Entity)-[]-(m:Entity)-[]-(a) USING JOIN ON m
  RETURN p
UNION ALL
  MATCH (t:Entity {dataset: $dataset}), (a:Entity {dataset: $dataset})
  WHERE $hops = 4 AND t.id IN $topics AND a.id IN $answers
  MATCH p = (t)-[]-(:Entity)-[]-(m:Entity)-[]-(:Entity)-[]-(a) USING JOIN ON m
  RETURN p
}
WITH last(nodes(p)) AS a, relationships(p) AS rels, nodes(p) AS ns
WHERE all(i IN range(1, size(ns) - 1) WHERE NOT ns[i].id IN $topics AND NOT ns[i] IN ns[..i])
WITH a, [i IN range(0, size(rels) - 1) | [type(rels[i]), startNode(rels[i]) = ns[i]]] AS steps
RETURN steps, collect(DISTINCT a.id) AS answers
ORDER BY steps
LIMIT $limit
