// Schema: one Dataset record per ingested dataset (counts, completion flag).
CREATE CONSTRAINT dataset_key IF NOT EXISTS FOR (d:Dataset) REQUIRE d.name IS UNIQUE
