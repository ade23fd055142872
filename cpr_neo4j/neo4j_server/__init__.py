"""A local Neo4j Community server assembled from Maven Central jars (no Docker needed)."""
