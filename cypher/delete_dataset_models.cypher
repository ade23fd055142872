// Deletes the ScoringModels trained on $dataset and the Calibrations made on it; returns nothing.
MATCH (n)
WHERE (n:ScoringModel OR n:Calibration) AND n.dataset = $dataset
DETACH DELETE n
