// `cpr ingest NAME --questions FILE` on a dataset already in Neo4j: marks questions $ids as
// added that way, so a later re-ingest of the dataset's own files keeps them; returns nothing.
UNWIND $ids AS id
MATCH (q:Question {dataset: $dataset, id: id})
SET q.added = true
