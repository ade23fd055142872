// Entity linking: full-text search of $text over entity names of $dataset; returns id, name, score.
CALL db.index.fulltext.queryNodes('entity_names', $text) YIELD node, score
WHERE node.dataset = $dataset
RETURN node.id AS id, node.name AS name, score
LIMIT $limit
