// Records answered questions, one (:Ask) per row of $asks, in one transaction; returns the ids
// of the rows NOT written (`stale`). A row with `expect` {graph_now, newest} is written only if
// its dataset's fingerprint and newest calibration time are still those (`cpr serve` answered it
// under a calibration it had cached: a new ingest or calibration since means ask again).
// (:Ask {id, name = the question, ...})-[:TOPIC]->(topics), -[:ANSWER {rank, cost, path, nodes, rels,
// forward}]->(answers): nodes are the entity ids e0..eL of the answer's best path, rels the relationship
// type of each hop and forward true where it points e(i) -> e(i+1).
// Entities of path_entities named by a bare Freebase MID (CVT/mediator nodes) get the label :Mediator.
UNWIND $asks AS ask
CALL (ask) {
  OPTIONAL MATCH (d:Dataset {name: ask.dataset})
  OPTIONAL MATCH (x:Calibration {dataset: ask.dataset})
  WITH d.fingerprint AS graph_now, max(x.created) AS newest
  RETURN ask.expect IS NULL OR
         (graph_now = ask.expect.graph_now AND newest = ask.expect.newest) AS current
}
WITH collect(CASE WHEN current THEN ask END) AS fresh,
     collect(CASE WHEN current THEN null ELSE ask.id END) AS stale
CALL (fresh) {
  UNWIND fresh AS ask
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
}
RETURN stale
