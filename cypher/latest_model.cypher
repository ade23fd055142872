// Returns the newest ScoringModel of $dataset, optionally of one negatives mode ("puct" = CPR,
// "random" = Abl.2), search depth $hops and question hop filter $hops_filter (0 = every hop count).
MATCH (m:ScoringModel {dataset: $dataset})
WHERE ($negatives IS NULL OR m.negatives = $negatives)
  AND ($hops IS NULL OR m.hops = $hops)
  AND ($hops_filter IS NULL OR coalesce(m.hops_filter, -1) = $hops_filter)
RETURN m ORDER BY m.created DESC LIMIT 1
