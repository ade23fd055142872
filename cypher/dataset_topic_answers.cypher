// Sets whether a topic entity may be its own answer on the (:Dataset) record (the project's
// own node; the fingerprint is refreshed after, as calibrations pin it); returns nothing.
MATCH (d:Dataset {name: $dataset})
SET d.topic_answers = $on
