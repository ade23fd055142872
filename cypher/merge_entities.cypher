// Ingest (the previous path, kept as bench/ingest.py's v1 baseline): creates missing entities from $rows [{id, name}]; returns nothing.
UNWIND $rows AS row
MERGE (e:Entity {dataset: $dataset, id: row.id})
  ON CREATE SET e.name = row.name
