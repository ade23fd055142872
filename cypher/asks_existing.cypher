// The ids among $ids that already have an (:Ask): what a write whose outcome is unknown (the
// connection went during it) left written (graph/records.py save_asks).
MATCH (a:Ask)
  WHERE a.id IN $ids
RETURN a.id AS id
