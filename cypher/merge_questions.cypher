// Ingest: creates missing questions from $rows [{id, text, split, hops, topics, answers}]; returns nothing.
// topic_ids / answer_ids keep the gold lists even when an answer is not in the graph.
UNWIND $rows AS row
MERGE (q:Question {dataset: $dataset, id: row.id})
  ON CREATE SET q.text = row.text, q.split = row.split, q.hops = row.hops,
                q.topic_ids = row.topics, q.answer_ids = row.answers
