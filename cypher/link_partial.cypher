// Linking one question's partial names: returns one row of two lists, the LinkWords of
// $words ({word, names}) and the entities of $dataset whose folded name is among $keys
// ({id, name, key, degree}).
RETURN
  COLLECT {
    MATCH (w:LinkWord {dataset: $dataset}) WHERE w.word IN $words
    RETURN {word: w.word, names: w.names}
  } AS words,
  COLLECT {
    MATCH (e:Entity {dataset: $dataset}) WHERE e.link_key IN $keys
    RETURN {id: e.id, name: e.name, key: e.link_key, degree: COUNT { (e)--() }}
  } AS by_key
