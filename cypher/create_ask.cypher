// Records answered questions, one (:Ask) per row of $asks, in one transaction; returns nothing.
// (:Ask {id, name = the question, ...})-[:TOPIC]->(topics), -[:ANSWER {rank, cost, path, nodes, rels,
// forward}]->(answers): nodes are the entity ids e0..eL of the answer's best path, rels the relationship
// type of each hop and forward true where it points e(i) -> e(i+1).
// Entities of path_entities named by a bare Freebase MID (CVT/mediator nodes) get the label :Mediator.
UNWIND $asks AS ask
CREATE (a:Ask {id: ask.id})
SET a += ask.props
WITH a, ask
CALL (a, ask) {
  UNWIND ask.topics AS tid
  MATCH (t:Entity {dataset: ask.dataset, id: tid})
  CREATE (a)-[:TOPIC]->(t)
}
CALL (a, ask) {
  UNWIND ask.answers AS ans
  MATCH (e:Entity {dataset: ask.dataset, id: ans.id})
  CREATE (a)-[:ANSWER {
    rank: ans.rank, cost: ans.cost, path: ans.path,
    nodes: ans.nodes, rels: ans.rels, forward: ans.forward
  }]->(e)
}
CALL (ask) {
  UNWIND ask.path_entities AS pid
  MATCH (e:Entity {dataset: ask.dataset, id: pid})
  WHERE e.name =~ '[mg]\\.[0-9A-Za-z_]+' AND NOT e:Mediator
  SET e:Mediator
}
