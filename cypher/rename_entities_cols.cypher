// Re-ingest: sets the names of entities of $dataset from columns $ids, $names; returns nothing.
UNWIND range(0, size($ids) - 1) AS i
MATCH (e:Entity {dataset: $dataset, id: $ids[i]})
SET e.name = $names[i]
