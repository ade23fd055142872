// Returns the newest Calibration of $dataset (optionally for one model) with its model id, or nothing.
MATCH (c:Calibration {dataset: $dataset})-[:OF]->(m:ScoringModel)
WHERE $model IS NULL OR m.id = $model
RETURN c, m.id AS model ORDER BY c.created DESC LIMIT 1
