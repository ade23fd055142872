// Returns entities of $dataset whose name equals $name (case-insensitive): id, name; at most 20, by id.
MATCH (e:Entity {dataset: $dataset})
WHERE toLower(e.name) = toLower($name)
RETURN e.id AS id, e.name AS name ORDER BY id LIMIT 20
