// Generated questions: name and node labels other than Entity (a type word for the question,
// where the graph has one) of the entities of $dataset among $ids.
UNWIND $ids AS id
MATCH (e:Entity {dataset: $dataset, id: id})
RETURN e.id AS id, e.name AS name, [l IN labels(e) WHERE l <> 'Entity'] AS types
