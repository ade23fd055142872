// Ingest (the previous path, kept as bench/ingest.py's v1 baseline): creates missing relationships of ONE validated type from $rows [{h, t}]; returns nothing.
// $$REL_TYPE$$ is replaced by the backtick-quoted type after validation (graph.cypher.rel_type).
UNWIND $rows AS row
MATCH (h:Entity {dataset: $dataset, id: row.h})
MATCH (t:Entity {dataset: $dataset, id: row.t})
MERGE (h)-[:$$REL_TYPE$$]->(t)
