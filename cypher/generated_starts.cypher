// Generated questions: the ids of every entity of $dataset with at least one relationship,
// in id order (one row, one list: the caller samples from it with its own seed, so the
// sample does not depend on the store's order).
MATCH (e:Entity {dataset: $dataset})
WHERE COUNT { (e)--() } > 0
WITH e.id AS id ORDER BY id
RETURN collect(id) AS ids
