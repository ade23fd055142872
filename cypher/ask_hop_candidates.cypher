// For $pairs [[u, v]] of consecutive path entities: every relationship between them (type, forward = u -> v) and both names.
UNWIND $pairs AS p
MATCH (u:Entity {dataset: $dataset, id: p[0]})-[r]-(v:Entity {dataset: $dataset, id: p[1]})
RETURN p[0] AS u, p[1] AS v, type(r) AS type, startNode(r) = u AS forward,
       coalesce(u.name, u.id) AS u_name, coalesce(v.name, v.id) AS v_name
