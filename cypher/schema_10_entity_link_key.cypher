// Schema: the linker's lookup of names by their folded words (graph/entity_index.py).
CREATE INDEX entity_link_key IF NOT EXISTS FOR (e:Entity) ON (e.dataset, e.link_key)
