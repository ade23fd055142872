// Deletes the (:Ask) records of dataset $dataset, 5,000 per transaction; returns how many.
MATCH (a:Ask {dataset: $dataset})
CALL (a) { DETACH DELETE a } IN TRANSACTIONS OF 5000 ROWS
RETURN count(*) AS deleted
