// Schema: full-text index on entity names, used to link question mentions to entities.
CREATE FULLTEXT INDEX entity_names IF NOT EXISTS FOR (e:Entity) ON EACH [e.name]
