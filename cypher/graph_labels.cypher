// Returns the node labels and relationship types present in the database (a catalogue read).
CALL () { CALL db.labels() YIELD label RETURN collect(label) AS labels }
CALL () { CALL db.relationshipTypes() YIELD relationshipType RETURN collect(relationshipType) AS types }
RETURN labels, types
