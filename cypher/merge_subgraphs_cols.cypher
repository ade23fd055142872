// Ingest: per-question subgraph membership (:Question)-[:IN_SUBGRAPH]->(:Entity) from columns:
// $ids = the distinct entity ids of the batch, per question $q its id and $e the indexes of its
// member entities in $ids (unique per question). Links only entities and questions that exist;
// one index seek per distinct entity and per question. CREATE after a check, not MERGE; the
// check is skipped for a question with no membership yet (a first run: most questions), so a
// re-run creates nothing and a first run does not pay one Expand(Into) per link. Returns nothing.
UNWIND range(0, size($ids) - 1) AS j
OPTIONAL MATCH (e:Entity {dataset: $dataset, id: $ids[j]})
WITH j, e
  ORDER BY j
WITH collect([e]) AS nodes
UNWIND range(0, size($q) - 1) AS i
MATCH (q:Question {dataset: $dataset, id: $q[i]})
WITH nodes, i, q, COUNT { (q)-[:IN_SUBGRAPH]->() } = 0 AS fresh
UNWIND $e[i] AS k
WITH q, fresh, nodes[k][0] AS e
  WHERE e IS NOT NULL AND (fresh OR NOT EXISTS { (q)-[:IN_SUBGRAPH]->(e) })
CREATE (q)-[:IN_SUBGRAPH]->(e)
