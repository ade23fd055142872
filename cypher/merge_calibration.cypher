// Writes a Calibration (tau per alpha, sorted scores, settings) linked to its ScoringModel; returns nothing.
MATCH (m:ScoringModel {id: $model})
MERGE (c:Calibration {id: $id})
SET c += $props
MERGE (c)-[:OF]->(m)
