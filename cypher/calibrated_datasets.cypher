// Returns the datasets that have a Calibration (of model $model when given), newest first.
MATCH (c:Calibration)-[:OF]->(m:ScoringModel)
WHERE $model IS NULL OR m.id = $model
RETURN c.dataset AS dataset, max(c.created) AS created ORDER BY created DESC
