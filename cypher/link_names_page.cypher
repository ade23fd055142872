// Linker index build: one page of the entities of $dataset whose id is above $after, the
// $page smallest ids, of those without link fields yet (or of all when $every); returns one
// row of two aligned lists, ids and names (may hold nulls).
MATCH (e:Entity {dataset: $dataset}) WHERE e.id > $after AND ($every OR e.link_key IS NULL)
WITH e ORDER BY e.id LIMIT $page
WITH collect(e) AS page
RETURN [e IN page | e.id] AS ids, [e IN page | e.name] AS names
