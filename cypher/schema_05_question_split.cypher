// Schema: questions are read by dataset and split.
CREATE INDEX question_split IF NOT EXISTS FOR (q:Question) ON (q.dataset, q.split)
