// Schema: the linker's lookup of names by their initials ("jfk", "usa").
CREATE INDEX entity_link_acro IF NOT EXISTS FOR (e:Entity) ON (e.dataset, e.link_acro)
