// Re-ingest: deletes the relationships of $dataset given as columns $h, $r, $t (head id,
// type, tail id); returns nothing.
UNWIND range(0, size($h) - 1) AS i
MATCH (h:Entity {dataset: $dataset, id: $h[i]})-[x]->(t:Entity {dataset: $dataset, id: $t[i]})
WHERE type(x) = $r[i]
DELETE x
