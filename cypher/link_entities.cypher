// Entity linking: full-text search of $text over entity names of $dataset; returns id, name, score:
// the best $limit by score, ties by id.
CALL db.index.fulltext.queryNodes('entity_names', $text) YIELD node, score
WHERE node.dataset = $dataset
RETURN node.id AS id, node.name AS name, score
ORDER BY score DESC, id
LIMIT $limit
