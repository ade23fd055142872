// Returns the number of nodes in the database (bulk import refuses a non-empty one).
MATCH (n) RETURN count(n) AS nodes
