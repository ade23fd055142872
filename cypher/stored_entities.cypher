// Re-ingest: returns the entities of $dataset as stored (id, name), to compare with the files.
MATCH (e:Entity {dataset: $dataset})
RETURN e.id AS id, e.name AS name
