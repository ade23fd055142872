// Returns the splits of $dataset with their question counts and largest hop count.
MATCH (q:Question {dataset: $dataset})
RETURN q.split AS split, count(*) AS n, max(q.hops) AS max_hops ORDER BY split
