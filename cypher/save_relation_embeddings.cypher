// Caches step-text embeddings on Relation nodes from $rows [{name, direction, embedding}]; returns nothing.
UNWIND $rows AS row
MATCH (r:Relation {dataset: $dataset, name: row.name, direction: row.direction})
SET r.embedding = row.embedding, r.embedding_model = $model
