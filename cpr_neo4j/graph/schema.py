"""Idempotent schema bootstrap: constraints and indexes every later stage relies on."""

from __future__ import annotations

from cpr_neo4j.config import resource_dir
from cpr_neo4j.graph.store import GraphStore


def schema_statements() -> list[str]:
    return sorted(p.stem for p in resource_dir("cypher").glob("schema_[0-9]*.cypher"))


def bootstrap(store: GraphStore) -> list[str]:
    """Create whatever is missing (IF NOT EXISTS), wait for indexes; returns the names run."""
    names = schema_statements()
    for name in names:
        store.write(name)
    store.write("await_indexes")
    return names
