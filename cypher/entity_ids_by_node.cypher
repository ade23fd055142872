// Search: the entity ids of nodes a search fetched without them ($nodes, the last hop's
// neighbours when `cpr ask` names only the answers it shows). Returns ONE row: nodes and ids
// as parallel lists; a node that is no longer an entity of $dataset is left out.
UNWIND $nodes AS node
MATCH (e:Entity)
  WHERE id(e) = node AND e.dataset = $dataset
RETURN collect(id(e)) AS nodes, collect(e.id) AS ids
