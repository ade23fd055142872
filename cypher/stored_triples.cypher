// Re-ingest: returns the triples of $dataset as stored (head id, relationship type, tail id).
MATCH (h:Entity {dataset: $dataset})-[r]->(t:Entity)
WHERE t.dataset = $dataset
RETURN h.id AS head, type(r) AS relation, t.id AS tail
