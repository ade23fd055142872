// Property graph to dataset: returns each node of the user's graph that the filters keep (not one
// of cpr's own labels $own; any of $labels when given), its elementId, its id (elementId, or `label:value` of
// the first label in $keys with that property), its labels and its name (the property $names
// sets for its first such label, else name, else title; null when it has none). Reads only.
MATCH (n)
WHERE NOT any(l IN labels(n) WHERE l IN $own)
  AND ($labels IS NULL OR any(l IN labels(n) WHERE l IN $labels))
WITH n, [l IN labels(n) WHERE $keys[l] IS NOT NULL AND n[$keys[l]] IS NOT NULL] AS keyed,
     [l IN labels(n) WHERE $names[l] IS NOT NULL AND n[$names[l]] IS NOT NULL] AS named
RETURN CASE WHEN size(keyed) > 0 THEN keyed[0] + ':' + toString(n[$keys[keyed[0]]])
            ELSE elementId(n) END AS id,
       elementId(n) AS element, labels(n) AS labels,
       CASE WHEN size(named) > 0 THEN toString(n[$names[named[0]]])
            ELSE toString(coalesce(n.name, n.title)) END AS name
