// Returns the ids of the ScoringModels trained on $dataset, newest first, with their negatives mode.
MATCH (m:ScoringModel {dataset: $dataset})
RETURN m.id AS id, m.negatives AS negatives, m.hops_filter AS hops_filter ORDER BY m.created DESC
