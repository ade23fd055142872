// Search: adjacency_by_id for entities given by node id ($nodes, from an earlier hop of the
// same question: a seek by node id is several times cheaper than by (dataset, id)). Same row
// and cap. The dataset check guards against a node id reused by a concurrent delete + create.
// Hubs read ingest's stored lists as in adjacency_by_id.
UNWIND $nodes AS node
MATCH (e:Entity)
  WHERE id(e) = node AND e.dataset = $dataset
WITH collect(e) AS found
CALL (found) {
  CALL (found) {
    UNWIND found AS e
    WITH e WHERE 2 * COUNT { (e)--() } <= $cap
    MATCH (e)-[r]->(n:Entity)
    WITH type(r) AS type, collect(id(e) * 4294967296 + id(n)) AS edges,
      collect(CASE WHEN $names THEN n.id END) AS names
    RETURN type, true AS forward, edges, names
    UNION ALL
    UNWIND found AS e
    WITH e WHERE 2 * COUNT { (e)--() } <= $cap
    MATCH (e)<-[r]-(n:Entity)
      WHERE n <> e
    WITH type(r) AS type, collect(id(e) * 4294967296 + id(n)) AS edges,
      collect(CASE WHEN $names THEN n.id END) AS names
    RETURN type, false AS forward, edges, names
    UNION ALL
    UNWIND found AS e
    WITH e WHERE 2 * COUNT { (e)--() } > $cap
    CALL (e) {
      WITH e WHERE e.cpr_hub_cap = $cap
      WITH e.cpr_hub_types AS types, e.cpr_hub_forward AS forwards, e.cpr_hub_nodes AS nodes,
        CASE WHEN $names THEN e.cpr_hub_ids END AS ids
      UNWIND range(0, size(nodes) - 1) AS i
      RETURN types[i] AS type, forwards[i] AS forward, nodes[i] AS node, ids[i] AS name
      UNION ALL
      WITH e WHERE coalesce(e.cpr_hub_cap, -1) <> $cap
      MATCH (e)-[r]-(n:Entity)
      WITH type(r) AS type, startNode(r) = e AS forward, n ORDER BY n.id
      WITH type, forward, collect(n)[..$cap] AS ns
      UNWIND ns AS n
      RETURN type, forward, id(n) AS node, CASE WHEN $names THEN n.id END AS name
    }
    WITH type, forward, collect(id(e) * 4294967296 + node) AS edges, collect(name) AS names
    RETURN type, forward, edges, names
  }
  RETURN collect([type, forward, edges, CASE WHEN $names THEN names END]) AS groups
}
RETURN [e IN found | id(e)] AS nodes, [e IN found | e.id] AS ids, groups
