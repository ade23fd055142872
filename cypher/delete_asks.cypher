// Deletes the Ask records with ids in $ids (and their relationships); returns nothing.
MATCH (a:Ask)
WHERE a.id IN $ids
DETACH DELETE a
