"""Ingest batches as columns: each batch one transaction, each statement MERGE-safe.

Why columns: the driver packs a list of plain values several times faster than a map per
row, and listing a batch's distinct entity ids once (rows refer to them by index) costs one
index seek per entity rather than one per row end. Why one statement for every relation
type (cypher/merge_triples_any.cypher): a statement per type costs a plan compile and a
transaction per type and batch, which collapses with thousands of types.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import polars as pl

from cpr_neo4j.graph.cypher import statement
from cpr_neo4j.graph.store import GraphStore
from cpr_neo4j.loaders.base import Dataset

Batches = Iterator[tuple[int, object]]  # (rows written, the summary counters)


def _write(store: GraphStore, name: str, params: dict) -> object:
    return store.query(statement(name), params, write=True)[1].counters


def write_entities(
    store: GraphStore, dataset: Dataset, batch_size: int, name: str = "merge_entities_cols"
) -> Batches:
    """`name`: the statement (bench/ingest.py times a plain CREATE on the same columns)."""
    ents = dataset.entities
    for off in range(0, ents.height, batch_size):
        part = ents.slice(off, batch_size)
        params = {"ids": part["id"].to_list(), "names": part["name"].to_list()}
        yield part.height, _write(store, name, {**params, "dataset": dataset.name})


def write_triples(
    store: GraphStore,
    dataset: Dataset,
    relations: list[str],
    batch_size: int,
    name: str = "merge_triples_any",
) -> Batches:
    """Sorted by head, relation, tail: the same batches on every run (a re-run finds its
    own batches' relationships), and a head's triples share a batch. `relations`: the
    validated relation names, sorted (graph.ingest.validate_relations)."""
    triples = dataset.triples.sort("head", "relation", "tail")
    code = triples["relation"].cast(pl.Enum(relations)).to_physical().to_numpy()
    heads, tails = triples["head"].to_numpy(), triples["tail"].to_numpy()
    for off in range(0, triples.height, batch_size):
        end = min(off + batch_size, triples.height)
        ids, index = np.unique(
            np.concatenate([heads[off:end], tails[off:end]]), return_inverse=True
        )
        n = end - off
        params = {
            "ids": ids.tolist(),
            "h": index[:n].tolist(),
            "t": index[n:].tolist(),
            "r": code[off:end].tolist(),
            "types": relations,
            "dataset": dataset.name,
        }
        yield n, _write(store, name, params)


def write_questions(store: GraphStore, dataset: Dataset, batch_size: int) -> Batches:
    q = dataset.questions
    cols = {"id": "id", "text": "text", "split": "split", "hops": "hops"}
    cols |= {"topics": "topics", "answers": "answers"}
    for off in range(0, q.height, batch_size):
        part = q.slice(off, batch_size)
        params = {key: part[col].to_list() for key, col in cols.items()}
        yield (
            part.height,
            _write(store, "merge_questions_cols", {**params, "dataset": dataset.name}),
        )


def write_links(store: GraphStore, dataset: Dataset, column: str, batch_size: int) -> Batches:
    """TOPIC or ANSWER links (`column` topics / answers), about batch_size links a batch."""
    pairs = dataset.questions.select("id", column).explode(column).drop_nulls().unique()
    pairs = pairs.sort("id", column)  # unique: the statement creates after a check per batch
    for off in range(0, pairs.height, batch_size):
        part = pairs.slice(off, batch_size)
        ids, index = np.unique(part[column].to_numpy(), return_inverse=True)
        grouped = (
            part.with_columns(pl.Series("k", index))
            .group_by("id", maintain_order=True)
            .agg(pl.col("k"))
        )
        params = {"ids": ids.tolist(), "q": grouped["id"].to_list(), "e": grouped["k"].to_list()}
        yield part.height, _write(store, f"link_{column}_cols", {**params, "dataset": dataset.name})
