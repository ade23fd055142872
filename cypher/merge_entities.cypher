// Ingest: creates missing entities of a dataset from $rows [{id, name}]; returns nothing.
UNWIND $rows AS row
MERGE (e:Entity {dataset: $dataset, id: row.id})
  ON CREATE SET e.name = row.name
