// Deletes every node (and its relationships) of dataset $dataset, 5,000 per transaction; returns nothing.
MATCH (n)
WHERE n.dataset = $dataset OR (n:Dataset AND n.name = $dataset)
CALL (n) { DETACH DELETE n } IN TRANSACTIONS OF 5000 ROWS
