// Returns nodes = the node ids of question $question's subgraph members (IN_SUBGRAPH); used
// by bench/scope.py's alternative scope filter (members fetched once, filtered in numpy).
MATCH (:Question {dataset: $dataset, id: $question})-[:IN_SUBGRAPH]->(e:Entity)
RETURN collect(id(e)) AS nodes
