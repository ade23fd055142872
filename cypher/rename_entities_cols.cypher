// Re-ingest: sets the names of entities of $dataset from columns $ids, $names, and drops their
// linker fields (graph/entity_index.py writes them again for the new names); returns nothing.
UNWIND range(0, size($ids) - 1) AS i
MATCH (e:Entity {dataset: $dataset, id: $ids[i]})
SET e.name = $names[i], e.link_key = null, e.link_stem = null, e.link_acro = null,
  e.link_acro_short = null
