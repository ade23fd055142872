// Ingest: one Relation node per (relation, direction) with its readable text and a Beta(1,1) prior; returns nothing.
UNWIND $rows AS row
MERGE (r:Relation {dataset: $dataset, name: row.name, direction: row.direction})
  ON CREATE SET r.text = row.text, r.alpha = 1.0, r.beta = 1.0, r.rho = 0.5
