// Marks the ScoringModels and Calibrations of $dataset as made on a dropped graph: their
// graph fingerprint gets the prefix 'dropped-', so none matches a later ingest of the same
// name, whatever its generation; returns how many were marked.
MATCH (n)
WHERE (n:ScoringModel OR n:Calibration) AND n.dataset = $dataset
  AND NOT coalesce(n.graph_fingerprint, '') STARTS WITH 'dropped-'
SET n.graph_fingerprint = 'dropped-' + coalesce(n.graph_fingerprint, 'unknown')
RETURN count(n) AS marked
