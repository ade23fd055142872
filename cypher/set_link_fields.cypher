// Linker index build: stores each entity's folded name, stem and initials (columns $ids,
// $keys, $stems, $acros, $shorts; "" where a name has none); returns nothing.
UNWIND range(0, size($ids) - 1) AS i
MATCH (e:Entity {dataset: $dataset, id: $ids[i]})
SET e.link_key = $keys[i], e.link_stem = $stems[i], e.link_acro = $acros[i],
  e.link_acro_short = $shorts[i]
