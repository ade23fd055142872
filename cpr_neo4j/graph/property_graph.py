"""A property graph already in Neo4j as a dataset: `cpr ingest NAME --from-neo4j`.

The user's nodes and relationships are only read (cypher/property_graph_*.cypher) and
copied into cpr's schema (:Entity nodes with the dataset's name, native relationship
types) by the ordinary ingest, so every later stage reads one layout and no `cpr` command
ever writes to, or deletes, a node or relationship of the user's graph (delete_dataset
matches cpr's own labels only). Copy rather than read in place: docs/usage.md ("Your own
graph") gives the measured time, store size and what stays in step.

Per label, one property names a node (`--name-property Movie=title`; else `name`, else
`title`, else its id); a node's id is its elementId, or `Label:value` of a key property
(`--key Person=name`), which survives a dump and reload of the user's graph where element
ids need not. Relationship types become relations (validated and backtick-escaped where
written, as for any dataset).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field

import polars as pl

from cpr_neo4j.errors import BadInput
from cpr_neo4j.graph.store import GraphStore
from cpr_neo4j.loaders.base import Dataset, Problem, build_dataset, questions_frame

# cpr's own labels: never read as the user's graph (they live in the same database)
OWN_LABELS = (
    "Entity",
    "Relation",
    "Question",
    "Dataset",
    "ScoringModel",
    "Calibration",
    "Ask",
    "Mediator",
)


@dataclass(frozen=True)
class GraphSpec:
    """Which part of the user's graph becomes the dataset, and how its nodes are named."""

    names: dict[str, str] = field(default_factory=dict)  # label -> property naming its nodes
    keys: dict[str, str] = field(default_factory=dict)  # label -> key property (else elementId)
    labels: tuple[str, ...] | None = None  # keep nodes with any of these labels
    rel_types: tuple[str, ...] | None = None  # keep relationships of these types


@dataclass
class GraphRead:
    dataset: Dataset
    nodes: int  # nodes the filters kept (with a relationship or not)
    unnamed: dict[str, int]  # label -> nodes of it with no name property (named by their id)
    per_label: dict[str, int]  # label -> kept nodes
    seconds: float


def label_pairs(values: Iterable[str], option: str) -> dict[str, str]:
    """`Label=property` options as a dict; a malformed one is one line naming the option."""
    out: dict[str, str] = {}
    for value in values:
        label, sep, prop = value.partition("=")
        if not sep or not label.strip() or not prop.strip():
            raise BadInput(
                f"{option} takes LABEL=PROPERTY (e.g. {option} Movie=title), got {value!r}"
            )
        out[label.strip()] = prop.strip()
    return out


def names_list(value: str | None) -> tuple[str, ...] | None:
    """A comma-separated filter (`--labels Movie,Person`) as a tuple; None when not given."""
    if value is None:
        return None
    items = tuple(v.strip() for v in value.split(",") if v.strip())
    return items or None


def _check_present(store: GraphStore, spec: GraphSpec) -> None:
    """Filters and per-label options must name labels and types the graph has: a typo
    would otherwise read nothing, or name nothing, silently."""
    row = store.read("graph_labels")[0]
    labels = sorted(set(row["labels"]) - set(OWN_LABELS))
    types = sorted(row["types"])
    asked = [
        (opt, x)
        for opt, xs in (
            ("--labels", spec.labels or ()),
            ("--name-property", spec.names),
            ("--key", spec.keys),
        )  # fmt: skip
        for x in xs
    ]
    for opt, label in asked:
        if label in OWN_LABELS:
            raise BadInput(f"{opt} {label}: {label} is one of cpr's own labels, never read")
        if label not in labels:
            raise BadInput(
                f"{opt} {label}: no node has label {label!r} "
                f"(labels: {', '.join(labels) or 'none'})"
            )
    for t in spec.rel_types or ():
        if t not in types:
            raise BadInput(
                f"--rel-types {t}: no relationship has type {t!r} "
                f"(types: {', '.join(types) or 'none'})"
            )


def read_graph(
    store: GraphStore,
    name: str,
    spec: GraphSpec,
    questions: pl.DataFrame | None = None,
    problems: list[Problem] | None = None,
    strict: bool = False,
) -> GraphRead:
    """The user's graph as a Dataset, read in two statements; questions (loaders' frame,
    their topics and answers given as the node ids above) and their problems, if any."""
    began = time.monotonic()
    _check_present(store, spec)
    params = {
        "own": list(OWN_LABELS),
        "labels": list(spec.labels) if spec.labels else None,
        "types": list(spec.rel_types) if spec.rel_types else None,
    }
    nodes = store.read("property_graph_nodes", **params, names=spec.names, keys=spec.keys)
    node_rows = pl.DataFrame(
        {
            "element": [r["element"] for r in nodes],
            "id": [r["id"] for r in nodes],
            "name": [r["name"] for r in nodes],
            "label": [r["labels"] or ["(no label)"] for r in nodes],
        },
        schema={"element": pl.Utf8, "id": pl.Utf8, "name": pl.Utf8, "label": pl.List(pl.Utf8)},
    )
    dup = node_rows.filter(pl.col("id").is_duplicated())
    if not dup.is_empty():
        first = dup.row(0, named=True)
        raise BadInput(
            f"--key: {dup.height} nodes share a key with another (e.g. {first['id']!r}): "
            "choose a property that is unique per label, or leave --key out (element ids)"
        )
    rels = store.read("property_graph_triples", **params)
    ids = dict(zip(node_rows["element"], node_rows["id"], strict=True))
    triples = pl.DataFrame(
        {
            "head": [ids[r["head"]] for r in rels],
            "relation": [r["relation"] for r in rels],
            "tail": [ids[r["tail"]] for r in rels],
        },
        schema={"head": pl.Utf8, "relation": pl.Utf8, "tail": pl.Utf8},
    )
    source = f"the graph in Neo4j at {store.settings.uri}" + _filters(spec)
    qs = questions if questions is not None else questions_frame()
    dataset = build_dataset(name, source, triples, qs, problems or [], strict, names=node_rows)
    by_label = node_rows.explode("label")  # a node counts under each of its labels
    unnamed = by_label.filter(pl.col("name").is_null()).group_by("label").len()
    per_label = by_label.group_by("label").len()
    return GraphRead(
        dataset=dataset,
        nodes=node_rows.height,
        unnamed=dict(sorted(unnamed.iter_rows())),
        per_label=dict(sorted(per_label.iter_rows())),
        seconds=time.monotonic() - began,
    )


def _filters(spec: GraphSpec) -> str:
    parts = []
    if spec.labels:
        parts.append(f"labels {', '.join(spec.labels)}")
    if spec.rel_types:
        parts.append(f"relationship types {', '.join(spec.rel_types)}")
    return f" ({'; '.join(parts)})" if parts else ""
