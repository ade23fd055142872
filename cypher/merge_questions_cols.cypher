// Ingest: creates missing questions from columns $id, $text, $split, $hops, $topics, $answers
// (a map per row packs several times slower in the driver); returns nothing.
// topic_ids / answer_ids keep the gold lists even when an answer is not in the graph.
UNWIND range(0, size($id) - 1) AS i
MERGE (q:Question {dataset: $dataset, id: $id[i]})
  ON CREATE SET q.text = $text[i], q.split = $split[i], q.hops = $hops[i],
                q.topic_ids = $topics[i], q.answer_ids = $answers[i]
