// Linking one question: returns one row of four lists, the entities of $dataset whose folded
// name is among $keys (by_key) or whose stem is among $stems (by_stem), each {id, name, key,
// degree} (degree: relationships of any type and way, a weak prior between homonyms); the
// LinkWords of $words (words: {word, names, keys}); the entities whose initials are among
// $letters (initials: {id, name, key: the letters, degree}).
RETURN
  COLLECT {
    MATCH (e:Entity {dataset: $dataset}) WHERE e.link_key IN $keys
    RETURN {id: e.id, name: e.name, key: e.link_key, degree: COUNT { (e)--() }}
  } AS by_key,
  COLLECT {
    MATCH (e:Entity {dataset: $dataset}) WHERE e.link_stem IN $stems
    RETURN {id: e.id, name: e.name, key: e.link_stem, degree: COUNT { (e)--() }}
  } AS by_stem,
  COLLECT {
    MATCH (w:LinkWord {dataset: $dataset}) WHERE w.word IN $words
    RETURN {word: w.word, names: w.names, keys: w.keys}
  } AS words,
  COLLECT {
    MATCH (e:Entity {dataset: $dataset}) WHERE e.link_acro IN $letters
    RETURN {id: e.id, name: e.name, key: e.link_acro, degree: COUNT { (e)--() }}
  } + COLLECT {
    MATCH (e:Entity {dataset: $dataset}) WHERE e.link_acro_short IN $letters
    RETURN {id: e.id, name: e.name, key: e.link_acro_short, degree: COUNT { (e)--() }}
  } AS initials
