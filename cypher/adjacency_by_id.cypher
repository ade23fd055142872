// Search: neighbours of the entities $ids of dataset $dataset, both directions, in ONE query.
// Returns ONE row (few big lists decode far faster than a row per entity or edge):
// nodes/ids = node id and id of every entity found; groups = one
// [relationship type, forward?, edges, names] per type and direction of each branch (a
// step may come in two groups, flat and hub: the reader merges them), where each edge is
// packed as entity node id * 2^32 + neighbour node id, and names = the neighbours' ids
// (only when $names, else null). Hub-aware cap: at most $cap neighbours per (entity, type,
// direction), the first by id, so a hub keeps the same edges whatever the store order and one
// big relation does not crowd out the others. Sorting the rows before collect keeps memory
// O(degree): a top-k over a collected list held the whole list per kept row (2.2 GiB for one
// 40k-edge hub at 10x MetaQA, refused with MemoryPoolOutOfMemoryError). Only an entity whose
// groups could reach the cap takes that sorted path, one subquery per entity (2 * degree >
// $cap, as a self-loop may match twice; degree counts every relationship); the rest, almost
// all, are matched in one flat pass with no sort (a 3-hop frontier's query: ~30% less time),
// outgoing and incoming apart, each grouped by type alone: an undirected match grouped by
// (type, startNode(r) = e) took a third longer at 100x MetaQA (~59k rows). An undirected
// match returns a self-loop once, as forward, so the incoming pass skips self-loops.
// A hub whose list ingest stored for this $cap (hub_lists.cypher: the same rows, computed once)
// is read from that list, touching no neighbour, instead of sorting its whole degree.
UNWIND $ids AS id
MATCH (e:Entity {dataset: $dataset, id: id})
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
