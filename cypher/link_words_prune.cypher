// Linker index build: deletes the LinkWords of $dataset not stamped $build (words of names
// renamed or deleted since the last build); returns nothing.
MATCH (w:LinkWord {dataset: $dataset}) WHERE w.build <> $build
DELETE w
