// Ingest, last step before dataset_finish: each hub's capped neighbour list, stored on the hub
// so a search reads it instead of sorting the hub's neighbours per query (at 100x MetaQA a
// genre has ~400k: a 3-hop ask spent most of its time there). A hub is what the adjacency
// queries call one (2 * degree > $cap); its list is exactly their sorted path's rows: per
// relationship type and direction the first $cap neighbours by id, kept in that order, as
// parallel lists (type, forward?, node id, entity id); node ids stay valid, as entities are
// deleted only with their dataset or by a re-ingest that replaces part of it, which first
// removes every list (clear_hub_lists) and so rewrites them all here. Every ingest recomputes every
// hub of the dataset (new edges, or new question links that make a node a hub), so the lists
// stay in step with the graph; the queries use them only when cpr_hub_cap is their $cap.
// Returns nothing.
MATCH (e:Entity {dataset: $dataset})
WHERE 2 * COUNT { (e)--() } > $cap
CALL (e) {
  CALL (e) {
    MATCH (e)-[r]-(n:Entity)
    WITH type(r) AS type, startNode(r) = e AS forward, n ORDER BY n.id
    WITH type, forward, collect(n)[..$cap] AS ns
    UNWIND ns AS n
    RETURN type, forward, id(n) AS node, n.id AS id
  }
  WITH e, collect(type) AS types, collect(forward) AS forwards, collect(node) AS nodes,
    collect(id) AS ids
  SET e.cpr_hub_cap = $cap, e.cpr_hub_types = types, e.cpr_hub_forward = forwards,
    e.cpr_hub_nodes = nodes, e.cpr_hub_ids = ids
} IN TRANSACTIONS OF 20 ROWS
