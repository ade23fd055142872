// Schema: the linker's lookup of names by their words without a plural or possessive s.
CREATE INDEX entity_link_stem IF NOT EXISTS FOR (e:Entity) ON (e.dataset, e.link_stem)
