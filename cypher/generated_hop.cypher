// Generated questions: one hop of many walks at once. Per row of $rows (walk, ids, type,
// forward) returns the walk and the distinct entities of $dataset reached from its frontier
// `ids` through relationship type `type` in that direction (forward: frontier = start node),
// at most $cap + 1 of them (a caller drops a walk whose frontier passes $cap).
UNWIND $rows AS row
UNWIND row.ids AS id
MATCH (e:Entity {dataset: $dataset, id: id})-[r]-(n:Entity {dataset: $dataset})
WHERE type(r) = row.type AND (startNode(r) = e) = row.forward
WITH row.walk AS walk, collect(DISTINCT n.id) AS ends
RETURN walk, ends[..$cap + 1] AS ends
