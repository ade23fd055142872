// Ingest: (:Question)-[:ANSWER]->(:Entity) for $rows [{q, e}] whose entity exists; returns nothing.
UNWIND $rows AS row
MATCH (q:Question {dataset: $dataset, id: row.q})
MATCH (e:Entity {dataset: $dataset, id: row.e})
MERGE (q)-[:ANSWER]->(e)
