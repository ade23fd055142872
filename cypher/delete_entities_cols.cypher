// Re-ingest: deletes the entities of $dataset with ids $ids, with their relationships; returns nothing.
UNWIND $ids AS id
MATCH (e:Entity {dataset: $dataset, id: id})
DETACH DELETE e
