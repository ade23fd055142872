// Re-ingest: deletes the Relation nodes of $dataset named in $names (no triple uses them); returns nothing.
UNWIND $names AS name
MATCH (r:Relation {dataset: $dataset, name: name})
DETACH DELETE r
