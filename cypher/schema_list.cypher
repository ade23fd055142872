// Returns the names of all constraints and indexes (for status and tests).
SHOW INDEXES YIELD name, type, state RETURN name, type, state ORDER BY name
