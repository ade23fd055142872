// Schema: one Calibration per id (model, dataset, split, hint mode, retrieval settings).
CREATE CONSTRAINT calibration_key IF NOT EXISTS FOR (c:Calibration) REQUIRE c.id IS UNIQUE
