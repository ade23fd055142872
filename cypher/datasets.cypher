// Returns every Dataset record's name, whether its ingest completed, and its question count, newest first.
MATCH (d:Dataset)
OPTIONAL CALL (d) { MATCH (q:Question {dataset: d.name}) RETURN count(q) AS questions }
RETURN d.name AS name, coalesce(d.complete, false) AS complete, questions,
       coalesce(d.finished, d.started) AS finished
ORDER BY finished DESC, name
