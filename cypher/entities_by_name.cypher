// Returns entities of $dataset whose name equals $name (case-insensitive): id, name.
MATCH (e:Entity {dataset: $dataset})
WHERE toLower(e.name) = toLower($name)
RETURN e.id AS id, e.name AS name LIMIT 20
