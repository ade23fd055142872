// Schema: one Relation node per (dataset, relation, direction); holds text, embedding and Beta prior.
CREATE CONSTRAINT relation_key IF NOT EXISTS FOR (r:Relation) REQUIRE (r.dataset, r.name, r.direction) IS UNIQUE
