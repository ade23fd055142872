// Re-ingest that changed the graph: removes every hub list of $dataset (hub_lists then
// writes those of the hubs there are now; a node that stopped being a hub keeps none);
// returns nothing.
MATCH (e:Entity {dataset: $dataset})
WHERE e.cpr_hub_cap IS NOT NULL
REMOVE e.cpr_hub_cap, e.cpr_hub_types, e.cpr_hub_forward, e.cpr_hub_nodes, e.cpr_hub_ids
