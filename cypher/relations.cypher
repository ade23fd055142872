// Returns the Relation nodes of $dataset: name, direction, text, Beta prior (alpha, beta), embedding.
MATCH (r:Relation {dataset: $dataset})
RETURN r.name AS name, r.direction AS direction, r.text AS text, r.alpha AS alpha, r.beta AS beta,
       r.embedding AS embedding, r.embedding_model AS embedding_model
ORDER BY name, direction
