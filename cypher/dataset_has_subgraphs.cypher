// Returns has = true when some question of $dataset has per-question subgraph membership
// (:Question)-[:IN_SUBGRAPH]->(:Entity), the data `--scope subgraph` answers inside.
RETURN EXISTS {
  MATCH (q:Question {dataset: $dataset})-[:IN_SUBGRAPH]->(:Entity)
} AS has
