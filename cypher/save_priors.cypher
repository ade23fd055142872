// Training: writes the Beta prior (alpha, beta, rho) per (relation, direction) from $rows; returns nothing.
UNWIND $rows AS row
MATCH (r:Relation {dataset: $dataset, name: row.name, direction: row.direction})
SET r.alpha = row.alpha, r.beta = row.beta, r.rho = row.alpha / (row.alpha + row.beta)
