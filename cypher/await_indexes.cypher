// Waits until every index is online; returns nothing.
CALL db.awaitIndexes(300)
