// Returns the ids of the ScoringModels trained on $dataset and of the Calibrations made on it.
CALL () { MATCH (m:ScoringModel {dataset: $dataset}) RETURN collect(m.id) AS models }
CALL () { MATCH (c:Calibration {dataset: $dataset}) RETURN collect(c.id) AS calibrations }
RETURN models, calibrations
