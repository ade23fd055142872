// Returns the counts of one dataset: entities, triples, relations, and questions per split.
CALL () { MATCH (e:Entity {dataset: $dataset}) RETURN count(e) AS entities }
CALL () { MATCH (:Entity {dataset: $dataset})-[r]->(t:Entity) WHERE t.dataset = $dataset RETURN count(r) AS triples }
CALL () { MATCH (r:Relation {dataset: $dataset}) WHERE r.direction = 'forward' RETURN count(r) AS relations }
CALL () { MATCH (q:Question {dataset: $dataset}) RETURN collect(q.split) AS splits }
RETURN entities, triples, relations, splits
