// Re-ingest: deletes the questions of $dataset with ids $ids (and their TOPIC, ANSWER and
// IN_SUBGRAPH links; changed ones are written again); returns nothing.
UNWIND $ids AS id
MATCH (q:Question {dataset: $dataset, id: id})
DETACH DELETE q
