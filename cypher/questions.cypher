// Returns the questions of $dataset, optionally one split and hop count: id, text, hops, topics, answers (ids).
MATCH (q:Question {dataset: $dataset})
WHERE ($split IS NULL OR q.split = $split) AND ($hops IS NULL OR q.hops = $hops)
RETURN q.id AS id, q.text AS text, q.split AS split, q.hops AS hops,
       q.topic_ids AS topics, q.answer_ids AS answers
ORDER BY q.id
