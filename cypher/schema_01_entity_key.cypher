// Schema: one Entity per (dataset, id); also the index behind every lookup by id.
CREATE CONSTRAINT entity_key IF NOT EXISTS FOR (e:Entity) REQUIRE (e.dataset, e.id) IS UNIQUE
