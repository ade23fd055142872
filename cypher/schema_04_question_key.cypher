// Schema: one Question per (dataset, id).
CREATE CONSTRAINT question_key IF NOT EXISTS FOR (q:Question) REQUIRE (q.dataset, q.id) IS UNIQUE
