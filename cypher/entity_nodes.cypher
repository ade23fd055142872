// Serving: how many entities $dataset has, and their node ids when at most $limit (cpr serve
// then reads the whole graph's neighbour rows once, at start-up); nodes is null when more.
MATCH (e:Entity {dataset: $dataset})
WITH count(e) AS entities
CALL (entities) {
  MATCH (e:Entity {dataset: $dataset})
  WHERE entities <= $limit
  RETURN collect(id(e)) AS nodes
}
RETURN entities, CASE WHEN entities <= $limit THEN nodes END AS nodes
