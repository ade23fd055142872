// Returns the newest Calibration of $dataset with its model id, or nothing: for model $model
// when given, else only calibrations of CPR models (negatives "puct"), never of an ablation.
MATCH (c:Calibration {dataset: $dataset})-[:OF]->(m:ScoringModel)
WHERE CASE WHEN $model IS NULL THEN coalesce(m.negatives, 'puct') = 'puct' ELSE m.id = $model END
  AND ($hops_filter IS NULL OR coalesce(m.hops_filter, -1) = $hops_filter)
RETURN c, m.id AS model ORDER BY c.created DESC LIMIT 1
