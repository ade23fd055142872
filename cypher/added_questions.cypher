// Re-ingest: returns the ids of the questions of $dataset added by `cpr ingest NAME --questions
// FILE` alone (kept when the dataset's files do not hold them).
MATCH (q:Question {dataset: $dataset})
WHERE q.added
RETURN q.id AS id
