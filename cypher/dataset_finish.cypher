// Ingest: marks a dataset complete and records its counts; returns nothing.
MERGE (d:Dataset {name: $dataset})
SET d += $props, d.complete = true, d.finished = datetime()
