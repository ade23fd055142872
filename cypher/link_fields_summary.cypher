// Linker index build: returns how many entities $dataset has (entities) and the most words
// of a folded name (longest; null when no entity is named).
MATCH (e:Entity {dataset: $dataset})
RETURN count(e) AS entities,
  max(CASE WHEN e.link_key > '' THEN size(split(e.link_key, ' ')) END) AS longest
