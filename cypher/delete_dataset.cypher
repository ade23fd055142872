// Deletes dataset $dataset's own nodes: its Entity, Relation, Question and LinkWord nodes
// (with their relationships) and its Dataset record, 5,000 per transaction; nodes of other labels
// (a user's own, Ask, ScoringModel, Calibration) are left alone. Returns how many were deleted.
CALL () {
  MATCH (n:Entity {dataset: $dataset}) RETURN n
  UNION ALL
  MATCH (n:Relation {dataset: $dataset}) RETURN n
  UNION ALL
  MATCH (n:Question {dataset: $dataset}) RETURN n
  UNION ALL
  MATCH (n:LinkWord {dataset: $dataset}) RETURN n
  UNION ALL
  MATCH (n:Dataset {name: $dataset}) RETURN n
}
CALL (n) { DETACH DELETE n } IN TRANSACTIONS OF 5000 ROWS
RETURN count(*) AS deleted
