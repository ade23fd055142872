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
    MATCH (e)-[r]-(n:Entity)
    RETURN type(r) AS type, startNode(r) = e AS forward, e, n
    UNION ALL
    UNWIND found AS e
    WITH e WHERE 2 * COUNT { (e)--() } > $cap
    CALL (e) {
      WITH e WHERE e.cpr_hub_cap = $cap
      WITH e.cpr_hub_types AS types, e.cpr_hub_forward AS forwards, e.cpr_hub_ids AS ids
      UNWIND range(0, size(ids) - 1) AS i
      MATCH (n:Entity {dataset: $dataset, id: ids[i]})
      RETURN types[i] AS type, forwards[i] AS forward, n
      UNION ALL
      WITH e WHERE coalesce(e.cpr_hub_cap, -1) <> $cap
      MATCH (e)-[r]-(n:Entity)
      WITH type(r) AS type, startNode(r) = e AS forward, n ORDER BY n.id
      WITH type, forward, collect(n)[..$cap] AS ns
      UNWIND ns AS n
      RETURN type, forward, n
    }
    RETURN type, forward, e, n
  }
  WITH type, forward, collect(id(e) * 4294967296 + id(n)) AS edges, collect(n) AS ns
  RETURN collect([type, forward, edges, CASE WHEN $names THEN [n IN ns | n.id] END]) AS groups
}
RETURN [e IN found | id(e)] AS nodes, [e IN found | e.id] AS ids, groups
