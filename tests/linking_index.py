"""The entity index `cpr ask` links with, built offline from a loaded dataset's rows (names,
degrees) rather than from Neo4j: for linking checks on the dataset files (tests/test_linking.py,
bench/linking.py), plus an undirected adjacency for reachability."""

from __future__ import annotations

from collections import defaultdict

import polars as pl

from cpr_neo4j.graph.entity_index import EntityIndex


def index_of(ds) -> tuple[EntityIndex, dict[str, set[str]]]:
    t = ds.triples
    deg = (
        pl.concat([t.select(pl.col("head").alias("id")), t.select(pl.col("tail").alias("id"))])
        .group_by("id")
        .len()
    )
    ents = ds.entities.join(deg, on="id", how="left").fill_null(0)
    rels = t.get_column("relation").unique().to_list()
    index = EntityIndex(ents["id"].to_list(), ents["name"].to_list(), ents["len"].to_list(), rels)
    adj: dict[str, set[str]] = defaultdict(set)
    for h, _, tl in t.iter_rows():
        adj[h].add(tl)
        adj[tl].add(h)
    return index, adj
