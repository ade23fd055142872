// Returns the Calibrations (all datasets when $dataset is null), newest first, with their
// model's id, kind and hop filter; the calibration scores themselves are left out.
MATCH (c:Calibration)-[:OF]->(m:ScoringModel)
WHERE $dataset IS NULL OR c.dataset = $dataset
RETURN c.id AS id, c.dataset AS dataset, m.id AS model, coalesce(m.negatives, 'puct') AS negatives,
       m.hops_filter AS hops_filter, c.created AS created, c.split AS split, c.n AS n,
       c.alphas AS alphas, c.taus AS taus, c.delta AS delta, c.recall AS recall, c.hops AS hops,
       c.beam_width AS beam_width, c.active AS active, c.fanout_cap AS fanout_cap,
       c.hint_mode AS hint_mode, c.hint_beta AS hint_beta
ORDER BY c.created DESC
LIMIT $limit
