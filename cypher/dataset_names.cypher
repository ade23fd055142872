// Returns the names of every Dataset in Neo4j, sorted.
MATCH (d:Dataset)
RETURN d.name AS name
ORDER BY name
