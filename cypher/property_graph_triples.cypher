// Property graph to dataset: returns (head elementId, relationship type, tail elementId) for each
// relationship of the user's graph between nodes the filters keep (none of cpr's own labels
// $own; any of $labels when given) whose type is one of $types when given. Reads only.
MATCH (h)-[r]->(t)
WHERE ($types IS NULL OR type(r) IN $types)
  AND NOT any(l IN labels(h) WHERE l IN $own)
  AND NOT any(l IN labels(t) WHERE l IN $own)
  AND ($labels IS NULL OR (any(l IN labels(h) WHERE l IN $labels)
                           AND any(l IN labels(t) WHERE l IN $labels)))
RETURN elementId(h) AS head, type(r) AS relation, elementId(t) AS tail
