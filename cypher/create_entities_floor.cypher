// Benchmark floor only (bench/ingest.py): merge_entities_cols's columns written by a plain
// CREATE, no check for an existing entity. NOT idempotent: never used by ingest.
UNWIND range(0, size($ids) - 1) AS i
CREATE (:Entity {dataset: $dataset, id: $ids[i], name: $names[i]})
