// Returns the newest ScoringModel of $dataset (optionally of one negatives mode / depth), or nothing.
MATCH (m:ScoringModel {dataset: $dataset})
WHERE ($negatives IS NULL OR m.negatives = $negatives) AND ($hops IS NULL OR m.hops = $hops)
RETURN m ORDER BY m.created DESC LIMIT 1
