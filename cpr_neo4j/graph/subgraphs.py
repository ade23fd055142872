"""Per-question subgraphs in Neo4j: (:Question)-[:IN_SUBGRAPH]->(:Entity) membership.

WebQSP/CWQ (RoG, NSM/GraftNet) answer each question inside its own retrieved subgraph; the
graph holds their union. Membership is written as relationships (not a list property on the
question) so that retrieval can filter neighbours in Cypher with one Expand(Into) per edge
(`--scope subgraph`, graph/neighbours.py) and Browser can show a question's subgraph.

Writes follow graph/columns.py: column batches, each batch one transaction, CREATE after a
check (cypher/merge_subgraphs_cols.cypher), so a re-run or a resumed run creates nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np

from cpr_neo4j.errors import BadInput
from cpr_neo4j.graph.cypher import statement
from cpr_neo4j.graph.store import GraphStore

if TYPE_CHECKING:  # polars only when ingesting: `cpr ask` imports this module's names
    from cpr_neo4j.loaders.base import Dataset

Batches = Iterator[tuple[int, object]]  # (membership rows written, the summary counters)

SUBGRAPH, GRAPH = "subgraph", "graph"  # --scope: each question's own subgraph, or the union
SCOPES = (SUBGRAPH, GRAPH)


def membership_rows(dataset: Dataset) -> int:
    """Rows `write_subgraphs` sends (0 when the dataset has no per-question subgraphs)."""
    return 0 if dataset.subgraphs is None else dataset.subgraphs.height


def write_subgraphs(store: GraphStore, dataset: Dataset, batch_size: int) -> Batches:
    """IN_SUBGRAPH links for Dataset.subgraphs, about batch_size links per batch.

    Sorted by (question, entity) so every run cuts the same batches and a question's rows sit
    together (one question seek per batch it spans). The rows are unique (Dataset's rule):
    no unique() here, which cost gigabytes at WebQSP's 23M rows."""
    import polars as pl

    if dataset.subgraphs is None or dataset.subgraphs.is_empty():
        return
    pairs = dataset.subgraphs.select("question", "entity").sort("question", "entity")
    for off in range(0, pairs.height, batch_size):
        part = pairs.slice(off, batch_size)
        ids, index = np.unique(part["entity"].to_numpy(), return_inverse=True)
        grouped = (
            part.with_columns(pl.Series("k", index))
            .group_by("question", maintain_order=True)
            .agg(pl.col("k"))
        )
        params = {
            "ids": ids.tolist(),
            "q": grouped["question"].to_list(),
            "e": grouped["k"].to_list(),
            "dataset": dataset.name,
        }
        counters = store.query(statement("merge_subgraphs_cols"), params, write=True)[1].counters
        yield part.height, counters


def has_subgraphs(store: GraphStore, dataset: str) -> bool:
    """Whether any question of `dataset` has IN_SUBGRAPH membership."""
    return bool(store.read("dataset_has_subgraphs", dataset=dataset)[0]["has"])


def resolve_scope(store: GraphStore, dataset: str, asked: str | None) -> str:
    """The --scope to run: as asked (checked), else SUBGRAPH for a dataset with membership
    (the paper's setting) and GRAPH for one without."""
    if asked is not None and asked not in SCOPES:
        raise BadInput(f"--scope must be {SUBGRAPH} or {GRAPH}, got {asked!r}")
    if asked == GRAPH:
        return GRAPH
    has = has_subgraphs(store, dataset)
    if asked == SUBGRAPH and not has:
        raise BadInput(
            f"dataset {dataset!r} has no per-question subgraphs (no IN_SUBGRAPH membership): "
            "use --scope graph"
        )
    return SUBGRAPH if has else GRAPH
