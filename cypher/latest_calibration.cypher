// Returns the newest Calibration of $dataset: its id, created time, model id, the dataset's
// current graph fingerprint, the newest created time of any of its calibrations (what
// create_ask checks a cached calibration by), and the node itself unless "id@created" is in
// $known (the caller holds it already); nothing when there is none. For model $model when
// given, else only calibrations of CPR models (negatives "puct"), never of an ablation.
MATCH (c:Calibration {dataset: $dataset})-[:OF]->(m:ScoringModel)
WHERE CASE WHEN $model IS NULL THEN coalesce(m.negatives, 'puct') = 'puct' ELSE m.id = $model END
  AND ($hops_filter IS NULL OR coalesce(m.hops_filter, -1) = $hops_filter)
WITH c, m ORDER BY c.created DESC LIMIT 1
OPTIONAL MATCH (d:Dataset {name: $dataset})
CALL () {
  MATCH (x:Calibration {dataset: $dataset})
  RETURN max(x.created) AS newest
}
RETURN c.id + '@' + c.created AS key, m.id AS model, d.fingerprint AS graph_now, newest,
       CASE WHEN c.id + '@' + c.created IN $known THEN null ELSE c END AS c
