// Returns the ScoringModel with id $id, or nothing.
MATCH (m:ScoringModel {id: $id})
RETURN m
