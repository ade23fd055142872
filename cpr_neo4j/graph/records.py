"""Reads and writes of the pipeline's records: questions, relation priors and embeddings,
scoring models, calibrations and Ask records. Plain dicts and numbers in and out."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from cpr_neo4j.errors import CprError
from cpr_neo4j.graph.store import GraphStore


@dataclass(frozen=True)
class QuestionRow:
    id: str
    text: str
    split: str
    hops: int | None
    topics: list[str]
    answers: list[str]


def questions(
    store: GraphStore, dataset: str, split: str | None = None, hops: int | None = None
) -> list[QuestionRow]:
    rows = store.read("questions", dataset=dataset, split=split, hops=hops)
    return [
        QuestionRow(
            r["id"],
            r["text"],
            r["split"],
            r["hops"],
            list(r["topics"] or []),
            list(r["answers"] or []),
        )
        for r in rows
    ]


def splits(store: GraphStore, dataset: str) -> dict[str, dict]:
    """split -> {n, max_hops}; a one-line error when the dataset has no questions."""
    rows = {
        r["split"]: {"n": r["n"], "max_hops": r["max_hops"]}
        for r in store.read("question_splits", dataset=dataset)
    }
    if not rows:
        raise CprError(f"dataset {dataset!r} has no questions in Neo4j: run `cpr ingest {dataset}`")
    return rows


def relations(store: GraphStore, dataset: str) -> list[dict]:
    return [dict(r) for r in store.read("relations", dataset=dataset)]


def relation_text(store: GraphStore, dataset: str) -> dict[str, str]:
    return {r["name"]: r["text"] for r in relations(store, dataset) if r["direction"] == "forward"}


def save_priors(store: GraphStore, dataset: str, counts: Mapping[str, Mapping[str, float]]) -> None:
    """counts: step key ('rel' forward, '~rel' reverse) -> {alpha, beta}."""
    rows = [
        {
            "name": k.lstrip("~"),
            "direction": "reverse" if k.startswith("~") else "forward",
            "alpha": float(v["alpha"]),
            "beta": float(v["beta"]),
        }
        for k, v in counts.items()
    ]
    store.write("save_priors", dataset=dataset, rows=rows)


def save_relation_embeddings(store: GraphStore, dataset: str, model: str, rows: list[dict]) -> None:
    store.write("save_relation_embeddings", dataset=dataset, model=model, rows=rows)


def _props(values: Mapping[str, Any]) -> dict[str, Any]:
    """Neo4j properties are scalars or lists of scalars: nested values go in as JSON text."""
    out = {}
    for k, v in values.items():
        if isinstance(v, Mapping) or (isinstance(v, list) and v and isinstance(v[0], (dict, list))):
            out[k] = json.dumps(v, sort_keys=True, default=str)
        elif v is not None:
            out[k] = v
    return out


def save_model(store: GraphStore, model_id: str, props: Mapping[str, Any]) -> None:
    store.write("merge_model", id=model_id, props=_props(props))


ALL_HOPS = 0  # hops_filter of a model trained on every hop count (the mixed setting)


def latest_model(
    store: GraphStore,
    dataset: str,
    negatives: str | None = None,
    hops: int | None = None,
    hops_filter: int | None = None,
) -> dict | None:
    """Newest model; hops = search depth, hops_filter = question hop count (ALL_HOPS: mixed)."""
    rows = store.read(
        "latest_model", dataset=dataset, negatives=negatives, hops=hops, hops_filter=hops_filter
    )
    return dict(rows[0]["m"]) if rows else None


def model_node(store: GraphStore, model_id: str) -> dict | None:
    rows = store.read("model_by_id", id=model_id)
    return dict(rows[0]["m"]) if rows else None


def save_calibration(
    store: GraphStore, calibration_id: str, model_id: str, props: Mapping[str, Any]
) -> None:
    store.write("merge_calibration", id=calibration_id, model=model_id, props=_props(props))


def latest_calibration(
    store: GraphStore, dataset: str, model_id: str | None = None, hops_filter: int | None = None
) -> dict | None:
    """Newest calibration of `model_id`, else of the newest-calibrated CPR (never Abl.) model;
    "graph_now" is the dataset's current fingerprint. Nodes already read are not sent again
    (the sorted scores are most of a calibration's size)."""
    for known in (list(_CALIBRATIONS), []):  # [] again if the entry went in the meantime
        rows = store.read(
            "latest_calibration",
            dataset=dataset,
            model=model_id,
            hops_filter=hops_filter,
            known=known,
        )
        if not rows:
            return None
        row = rows[0]
        node = _CALIBRATIONS.get(row["key"]) if row["c"] is None else dict(row["c"])
        if node is not None:
            if len(_CALIBRATIONS) >= MAX_CACHED_CALIBRATIONS:
                _CALIBRATIONS.clear()
            _CALIBRATIONS[row["key"]] = node
            return {**node, "model": row["model"], "graph_now": row["graph_now"]}
    raise AssertionError("unreachable: the second read sends the node")


# Calibration nodes by "id@created": recalibrating rewrites a node under the same id with a
# new created time, so an entry never goes stale.
_CALIBRATIONS: dict[str, dict] = {}
MAX_CACHED_CALIBRATIONS = 64


def calibrated_datasets(store: GraphStore) -> list[str]:
    return [r["dataset"] for r in store.read("calibrated_datasets")]


def save_ask(
    store: GraphStore,
    ask_id: str,
    dataset: str,
    props: Mapping[str, Any],
    topics: list[str],
    answers: list[dict],
    via: list[dict],
) -> None:
    """Write an (:Ask) record (cypher/create_ask.cypher). `via` rows {answer, pos, entity}
    give each recorded answer's best path, topic first; a row may also carry the hop into it
    ({rel, forward}), else the hop is read off the graph and the answer's `path` text."""
    chains: dict[str, list[dict]] = {}
    for v in sorted(via, key=lambda v: v["pos"]):
        chains.setdefault(v["answer"], []).append(v)
    hops = _resolve_hops(store, dataset, chains, {a["id"]: a.get("path", "") for a in answers})
    rows = [{**a, **hops.get(a["id"], {})} for a in answers]
    store.write(
        "create_ask",
        id=ask_id,
        dataset=dataset,
        props=_props({**props, "name": props.get("question")}),  # Browser's caption
        topics=topics,
        answers=rows,
        path_entities=sorted({v["entity"] for v in via}),
    )


def _resolve_hops(
    store: GraphStore, dataset: str, chains: dict[str, list[dict]], texts: dict[str, str]
) -> dict[str, dict]:
    """answer id -> {nodes, rels, forward}: its path's entity ids and each hop's type and way."""
    pairs = {
        (u["entity"], v["entity"])
        for steps in chains.values()
        for u, v in pairwise(steps)
        if "rel" not in v
    }
    found: dict[tuple[str, str], list[tuple[str, bool]]] = {}
    names: dict[str, str] = {}
    pairs_in = sorted(map(list, pairs))  # none when the caller gave every hop (cpr ask)
    rows = store.read("ask_hop_candidates", dataset=dataset, pairs=pairs_in) if pairs else []
    for r in rows:
        found.setdefault((r["u"], r["v"]), []).append((r["type"], r["forward"]))
        names.update({r["u"]: r["u_name"], r["v"]: r["v_name"]})
    out = {}
    for answer, steps in chains.items():
        ids = [s["entity"] for s in steps]
        text, first = texts.get(answer, ""), names.get(ids[0], ids[0])
        cursor = len(first) if text.startswith(first) else -1  # -1: no text to read hops off
        rels, forward = [], []
        for u, v in pairwise(steps):
            options = (
                [(v["rel"], v["forward"])]
                if "rel" in v
                else found.get((u["entity"], v["entity"]), [])
            )
            hop = _pick_hop(options, text, cursor, names.get(v["entity"], v["entity"]))
            if hop is None:
                break
            (t, f), cursor = hop
            rels.append(t)
            forward.append(bool(f))
        else:
            out[answer] = {"nodes": ids, "rels": rels, "forward": forward}
    return out


def _pick_hop(
    options: list[tuple[str, bool]], text: str, cursor: int, name: str
) -> tuple[tuple[str, bool], int] | None:
    """The option that `text` (stages.ask.describe's rendering) shows at `cursor`, with the
    cursor after it; a sole option without matching text stands; None when unresolved."""
    for t, f in options if cursor >= 0 else []:
        piece = f" -{t}-> {name}" if f else f" <-{t}- {name}"
        if text.startswith(piece, cursor):
            return (t, f), cursor + len(piece)
    return (options[0], -1) if len(options) == 1 else None


def ask_record(store: GraphStore, ask_id: str) -> dict | None:
    """{ask: properties, topics: ids, answers: [{id, rank, cost, path, nodes, rels, forward}]}."""
    rows = store.read("ask_record", id=ask_id)
    return dict(rows[0]) if rows else None


def entity_names(store: GraphStore, dataset: str, ids: list[str]) -> dict[str, str]:
    return {r["id"]: r["name"] for r in store.read("entities_by_id", dataset=dataset, ids=ids)}
