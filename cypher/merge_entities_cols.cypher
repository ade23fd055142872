// Ingest: creates missing entities of a dataset from columns $ids, $names (a map per row packs
// several times slower in the driver); returns nothing.
UNWIND range(0, size($ids) - 1) AS i
MERGE (e:Entity {dataset: $dataset, id: $ids[i]})
  ON CREATE SET e.name = $names[i]
