"""Online ingest with many relation types: one statement for all types, still idempotent
and resumable, and every relationship lands with its own type."""

from __future__ import annotations

import random
from dataclasses import replace

import polars as pl
import pytest

from cpr_neo4j.graph.ingest import counts, ingest, validate_relations, write_entities, write_triples
from cpr_neo4j.graph.schema import bootstrap
from tests.conftest import drop_dataset
from tests.test_ingest import _dataset

pytestmark = pytest.mark.neo4j
NAME = "test_many_types"


def _triples(types: int = 1200, n: int = 3000) -> list[tuple[str, str, str]]:
    rng = random.Random(7)
    rels = [f"dom{i % 13}.type{i}.prop-{i}" for i in range(types)]
    rows = {
        (f"m.{rng.randrange(400)}", rels[k % types], f"m.{rng.randrange(400)}") for k in range(n)
    }
    # the same pair under two types, both directions: the existence check is per type
    rows |= {("m.a", rels[0], "m.b"), ("m.a", rels[1], "m.b"), ("m.b", rels[0], "m.a")}
    return sorted(rows)


def _stored_types(store) -> dict[str, int]:
    rows = store.query(
        "MATCH (:Entity {dataset: $d})-[r]->(:Entity) RETURN type(r) AS t, count(*) AS n",
        {"d": NAME},
    )[0]
    return {r["t"]: r["n"] for r in rows}


def test_many_types_partial_run_completes_and_rerun_creates_nothing(store):
    ds = _dataset(_triples(), NAME)
    expected = {
        r: n for r, n in ds.triples.group_by("relation").len().iter_rows()
    }  # fmt: skip
    assert len(expected) > 1000
    drop_dataset(store, NAME)
    try:
        # a run killed after two of seven triple batches: entities and 1,000 triples written
        bootstrap(store)
        for _ in write_entities(store, ds, 500):
            pass
        batches = write_triples(store, ds, validate_relations(ds), 500)
        done = sum(n for n, _ in (next(batches), next(batches)))
        batches.close()
        assert sum(_stored_types(store).values()) == done == 1000
        first = ingest(store, ds, batch_size=500)
        assert first.created_relationships == ds.triples.height - done
        assert _stored_types(store) == expected
        again = ingest(store, ds, batch_size=700)  # other batches: still nothing new
        assert again.created_nodes == 0 and again.created_relationships == 0
        assert _stored_types(store) == expected
        assert counts(store, NAME)["triples"] == ds.triples.height
    finally:
        drop_dataset(store, NAME)


def test_rows_whose_entity_is_missing_are_skipped_not_misplaced(store):
    ds = _dataset([("a", "r1", "b"), ("b", "r2", "c"), ("c", "r3", "d")], NAME)
    drop_dataset(store, NAME)
    try:
        bootstrap(store)
        short = ds.entities.filter(pl.col("id") != "b")
        for _ in write_entities(store, replace(ds, entities=short), 10):
            pass
        for _ in write_triples(store, ds, validate_relations(ds), 10):
            pass
        rows = store.query(
            "MATCH (h:Entity {dataset: $d})-[r]->(t) RETURN h.id AS h, type(r) AS r, t.id AS t",
            {"d": NAME},
        )[0]
        assert [(x["h"], x["r"], x["t"]) for x in rows] == [("c", "r3", "d")]
    finally:
        drop_dataset(store, NAME)
