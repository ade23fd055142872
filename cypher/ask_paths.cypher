// Browser view of an Ask: rows (a, r, x, y) holding the Ask, its TOPIC and ANSWER relationships and exactly the hops of each answer's recorded best path.
MATCH (a:Ask {id: $id})
CALL (a) {
  MATCH (a)-[r:TOPIC|ANSWER]->(x:Entity)
  RETURN r, x, x AS y
  UNION
  MATCH (a)-[p:ANSWER]->(:Entity)
  UNWIND range(0, size(coalesce(p.rels, [])) - 1) AS i
  WITH DISTINCT a, p.rels[i] AS t, p.nodes[i] AS u, p.nodes[i + 1] AS v, p.forward[i] AS f
  MATCH (x:Entity {dataset: a.dataset, id: CASE WHEN f THEN u ELSE v END})-[r]->
        (y:Entity {dataset: a.dataset, id: CASE WHEN f THEN v ELSE u END})
  WHERE type(r) = t
  RETURN r, x, y
}
RETURN a, r, x, y
