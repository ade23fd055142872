// The convention check after labelled questions are added (graph/ingest.py
// settle_topic_answers): returns `questions`, the dataset's questions, and `with_topic`,
// those with one of their own topic entities among their gold answers.
MATCH (q:Question {dataset: $dataset})
RETURN count(q) AS questions,
       count(CASE WHEN EXISTS { (q)-[:TOPIC]->(e)<-[:ANSWER]-(q) } THEN 1 END) AS with_topic
