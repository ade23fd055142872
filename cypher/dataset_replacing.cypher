// Re-ingest that changes a dataset: marks it incomplete and being replaced (cleared by
// dataset_finish), so that a killed run re-run bumps the fingerprint even when what is left
// to do no longer shows a change; returns nothing.
MERGE (d:Dataset {name: $dataset})
SET d.complete = false, d.replacing = true
