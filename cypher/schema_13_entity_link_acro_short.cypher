// Schema: the linker's lookup of names by their initials without little words ("usa").
CREATE INDEX entity_link_acro_short IF NOT EXISTS FOR (e:Entity) ON (e.dataset, e.link_acro_short)
