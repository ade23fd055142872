// Records an answered question: (:Ask)-[:TOPIC]->(topics), -[:ANSWER {rank, cost}]->(answers),
// -[:VIA {answer, pos}]->(entities of each answer's best path); returns nothing.
CREATE (a:Ask {id: $id})
SET a += $props
WITH a
CALL (a) {
  UNWIND $topics AS tid
  MATCH (t:Entity {dataset: $dataset, id: tid})
  CREATE (a)-[:TOPIC]->(t)
}
CALL (a) {
  UNWIND $answers AS ans
  MATCH (e:Entity {dataset: $dataset, id: ans.id})
  CREATE (a)-[:ANSWER {rank: ans.rank, cost: ans.cost, path: ans.path}]->(e)
}
CALL (a) {
  UNWIND $via AS v
  MATCH (e:Entity {dataset: $dataset, id: v.entity})
  CREATE (a)-[:VIA {answer: v.answer, pos: v.pos}]->(e)
}
