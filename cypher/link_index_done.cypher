// Linker index build: records on the Dataset which index its entities carry ($version),
// how many entities it has, the most words of a name, its relation names (the linker's
// relation words) and the build's seconds; returns nothing.
MATCH (d:Dataset {name: $dataset})
SET d.link_index = $version, d.link_entities = $entities, d.link_longest = $longest,
  d.link_relations = $relations,
  d.link_build_s = $seconds
