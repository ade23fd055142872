// Returns the Dataset record (or nothing) for $dataset.
MATCH (d:Dataset {name: $dataset}) RETURN d
