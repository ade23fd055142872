// Benchmark floor only (bench/ingest.py): merge_triples_any's columns written by a plain
// CREATE, no check for an existing relationship. NOT idempotent: never used by ingest.
UNWIND range(0, size($ids) - 1) AS j
MATCH (e:Entity {dataset: $dataset, id: $ids[j]})
WITH j, e
  ORDER BY j
WITH collect(e) AS nodes
UNWIND range(0, size($h) - 1) AS i
WITH nodes[$h[i]] AS h, nodes[$t[i]] AS t, $types[$r[i]] AS r
CREATE (h)-[:$(r)]->(t)
