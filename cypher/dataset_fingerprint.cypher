// Ingest: stores the graph digest of $dataset, bumping its generation when the digest changed
// or $bump (a re-ingest replaced part of the graph or questions: counts alone may not move);
// returns the fingerprint ("g<generation>-<digest>"), or nothing when the dataset is unknown.
MATCH (d:Dataset {name: $dataset})
SET d.generation = CASE
      WHEN d.graph_digest = $digest AND NOT $bump THEN coalesce(d.generation, 1)
      ELSE coalesce(d.generation, 0) + 1
    END,
    d.graph_digest = $digest
SET d.fingerprint = 'g' + toString(d.generation) + '-' + $digest
RETURN d.fingerprint AS fingerprint
