// Ingest: creates missing relationships of ANY types in one statement, from columns: $ids =
// the distinct entity ids of the batch, then per row $h and $t (indexes into $ids) and $r (an
// index into $types). One plan and one transaction per batch whatever the number of types (a
// statement per type costs a plan compile and a transaction per type and batch); one index
// seek per distinct entity, not two per row; plain columns pack faster than a map per row.
// A relationship is created only when h has none of that type to t, so a re-run creates nothing.
// The existing ones are read from the end with fewer relationships, spelled out: MERGE with a
// dynamic type (or a plain pattern between h and t) is planned as a scan of ALL relationships
// per row when the plan is made on a database still without relationships. Rows must be unique
// per (h, r, t) (the loaders make them so) and batches run one after another; a row whose
// entity is missing is skipped, as a MATCH would. Types are validated before any write
// (graph.cypher.rel_type); returns nothing.
UNWIND range(0, size($ids) - 1) AS j
OPTIONAL MATCH (e:Entity {dataset: $dataset, id: $ids[j]})
WITH j, e
  ORDER BY j
WITH collect([e]) AS nodes
UNWIND range(0, size($h) - 1) AS i
WITH nodes[$h[i]][0] AS h, nodes[$t[i]][0] AS t, $types[$r[i]] AS r
  WHERE h IS NOT NULL AND t IS NOT NULL
WITH h, t, r,
     CASE WHEN COUNT { (h)-->() } <= COUNT { (t)<--() }
          THEN [(h)-[x]->(n) WHERE n = t | type(x)]
          ELSE [(n)-[x]->(t) WHERE n = h | type(x)] END AS have
  WHERE NOT r IN have
CREATE (h)-[:$(r)]->(t)
