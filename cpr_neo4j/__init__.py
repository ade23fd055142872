"""cpr-neo4j: Conformal Path Reasoning over a Neo4j knowledge graph."""

__version__ = "0.1.0"
