"""Entity linking: question text -> topic entities (resolve.py, by name_rules.py's tests on
names, over graph/entity_index.py, the index Neo4j keeps), the one rule for a named entity
(named.py), and the readings the search decides between (readings.py)."""
