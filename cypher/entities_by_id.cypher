// Returns id and name of the entities of $dataset among $ids.
UNWIND $ids AS id
MATCH (e:Entity {dataset: $dataset, id: id})
RETURN e.id AS id, e.name AS name
