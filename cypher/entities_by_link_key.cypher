// Named entities: the entities of $dataset whose folded name is $key (any case, accents,
// punctuation or underscores); returns id, name, by id.
MATCH (e:Entity {dataset: $dataset, link_key: $key})
RETURN e.id AS id, e.name AS name ORDER BY id
