// Ingest: marks a dataset as being written (complete = false until dataset_finish); returns nothing.
MERGE (d:Dataset {name: $dataset})
  ON CREATE SET d.complete = false, d.started = datetime()
