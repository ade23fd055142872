// Browser view of an Ask: its topic, answers and the KG relationships along their best paths.
MATCH (a:Ask {id: $id})-[:VIA]->(n:Entity)
WITH a, collect(DISTINCT n) AS ns
UNWIND ns AS x
MATCH (x)-[r]-(y:Entity) WHERE y IN ns
RETURN a, x, r, y
