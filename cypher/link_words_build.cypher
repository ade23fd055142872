// Linker index build: one LinkWord per word of the dataset's folded names, with how many
// distinct names hold it and, for a word at most $rare names hold, those names (sorted),
// stamped $build (link_words_prune then drops words no name holds any more); run in an
// implicit transaction (CALL IN TRANSACTIONS). Returns nothing.
MATCH (e:Entity {dataset: $dataset}) WHERE e.link_key > ''
WITH DISTINCT e.link_key AS key
UNWIND split(key, ' ') AS word
WITH DISTINCT key, word ORDER BY key
WITH word, collect(key) AS keys
CALL (word, keys) {
  MERGE (w:LinkWord {dataset: $dataset, word: word})
  SET w.names = size(keys), w.keys = CASE WHEN size(keys) <= $rare THEN keys ELSE [] END,
    w.build = $build
} IN TRANSACTIONS OF 10000 ROWS
