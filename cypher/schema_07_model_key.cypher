// Schema: one ScoringModel per weights hash.
CREATE CONSTRAINT model_key IF NOT EXISTS FOR (m:ScoringModel) REQUIRE m.id IS UNIQUE
