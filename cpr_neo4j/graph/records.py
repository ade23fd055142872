"""Reads and writes of the pipeline's records: questions, relation priors and embeddings,
scoring models, calibrations and Ask records. Plain dicts and numbers in and out."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from neo4j.exceptions import ServiceUnavailable, SessionExpired, TransientError

from cpr_neo4j.errors import CprError, UnknownDataset
from cpr_neo4j.graph.store import GraphStore


@dataclass(frozen=True, kw_only=True)  # built by keyword: many fields
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
            id=r["id"],
            text=r["text"],
            split=r["split"],
            hops=r["hops"],
            topics=list(r["topics"] or []),
            answers=list(r["answers"] or []),
        )
        for r in rows
    ]


def splits(store: GraphStore, dataset: str) -> dict[str, dict]:
    """split -> {n, max_hops}; a one-line error when the dataset has no questions."""
    rows = question_splits(store, dataset)
    if not rows:
        raise CprError(no_questions(store, dataset))
    return rows


def question_splits(store: GraphStore, dataset: str) -> dict[str, dict]:
    """split -> {n, max_hops}; empty when the dataset has no questions."""
    return {
        r["split"]: {"n": r["n"], "max_hops": r["max_hops"]}
        for r in store.read("question_splits", dataset=dataset)
    }


def label_steps(dataset: str) -> str:
    """The commands that give a dataset labelled questions and then a guarantee (`cpr label`
    shows every candidate with its path; `cpr train` splits the labels, calibration first)."""
    return (
        f"`cpr label {dataset} questions.txt -o labelled.jsonl` (your questions, one a line), "
        f"`cpr ingest {dataset} --questions labelled.jsonl`, then `cpr train {dataset}` and "
        f"`cpr calibrate {dataset}`"
    )


def no_questions(store: GraphStore, dataset: str) -> str:
    """What a dataset without labelled questions needs before calibration (docs/usage.md,
    "Your own graph"); `cpr ask` answers it meanwhile, without a guarantee."""
    require_dataset(store, dataset)
    return (
        f"dataset {dataset!r} has a graph but no labelled questions: label some with "
        f"{label_steps(dataset)}; meanwhile `cpr ask --dataset {dataset}` answers without a "
        "guarantee"
    )


@dataclass(frozen=True)
class DatasetRow:
    name: str
    complete: bool  # its ingest finished
    questions: int


def datasets(store: GraphStore) -> list[DatasetRow]:
    """Every dataset in Neo4j, newest ingest first."""
    return [
        DatasetRow(name=r["name"], complete=r["complete"], questions=r["questions"])
        for r in store.read("datasets")
    ]


def unknown_dataset(store: GraphStore, dataset: str) -> UnknownDataset:
    """The error for a dataset name Neo4j does not hold, listing the ones it does."""
    known = [d.name for d in datasets(store)]
    listed = f"known: {', '.join(known)}" if known else "none ingested yet"
    return UnknownDataset(
        f"unknown dataset {dataset!r} ({listed}): name one of those, or load a graph under "
        f"that name first (`cpr ingest {dataset} --triples FILE`, or `cpr ingest {dataset} "
        "--from-neo4j` for a graph already in Neo4j)"
    )


def require_dataset(store: GraphStore, dataset: str) -> dict:
    """The dataset's record; the unknown-dataset error (known ones listed) when absent."""
    rows = store.read("dataset_info", dataset=dataset)
    if not rows:
        raise unknown_dataset(store, dataset)
    return dict(rows[0]["d"])


def dataset_models(store: GraphStore, dataset: str, negatives: str | None = None) -> list[str]:
    """Ids of the models trained on `dataset` (with `negatives` when given), newest first."""
    rows = store.read("dataset_model_ids", dataset=dataset)
    return [r["id"] for r in rows if negatives is None or r["negatives"] == negatives]


def topic_answers(store: GraphStore, dataset: str) -> bool:
    """Whether a topic entity may be its own answer in `dataset` (set at ingest; False for
    datasets ingested before the setting existed, today's behaviour). Stages pass it to
    retrieval (RetrievalSettings.topic_answers) and to PUCT collection."""
    return bool(require_dataset(store, dataset).get("topic_answers"))


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
            now = {"graph_now": row["graph_now"], "newest": row["newest"]}
            return {**node, "model": row["model"], **now}
    raise AssertionError("unreachable: the second read sends the node")


# Calibration nodes by "id@created": recalibrating rewrites a node under the same id with a
# new created time, so an entry never goes stale.
_CALIBRATIONS: dict[str, dict] = {}
MAX_CACHED_CALIBRATIONS = 64


def calibrated_datasets(store: GraphStore, model_id: str | None = None) -> list[str]:
    """Calibrated datasets, newest first; only those `model_id` is calibrated on when given."""
    return [r["dataset"] for r in store.read("calibrated_datasets", model=model_id)]


def default_dataset(store: GraphStore, model_id: str | None = None) -> str | None:
    """The dataset `cpr ask` / `cpr serve` answer on when none is named: the newest one
    `model_id` is calibrated on (any model's when none is, or none is named)."""
    calibrated = calibrated_datasets(store, model_id) or calibrated_datasets(store)
    return calibrated[0] if calibrated else None


def save_asks(store: GraphStore, asks: Sequence[Mapping[str, Any]]) -> set[str]:
    """Write (:Ask) records in ONE transaction (cypher/create_ask.cypher): `cpr serve` writes
    the asks of concurrent requests together, one commit for all. Each ask is
    {id, dataset, props, topics: [ids], answers: [{id, rank, cost, path, nodes, rels,
    forward}]}; nodes are the entity ids of the answer's best path (topic first), rels and
    forward each hop's type and way (None for answers past the recorded paths). An ask with
    "expect" ({graph_now, newest}: what its cached calibration was read with) is written only
    while its dataset still has them; returns the ids of those not written. "mediators",
    when given, are the only path entities checked for the :Mediator label (the rest are
    known not to be named by a MID); else every one is."""
    rows = [
        {
            "id": a["id"],
            "dataset": a["dataset"],
            "props": _props({**a["props"], "name": a["props"].get("question")}),  # caption
            "topics": list(a["topics"]),
            "answers": list(a["answers"]),
            "path_entities": a["mediators"] if "mediators" in a else _path_entities(a),
            "expect": a.get("expect"),
        }
        for a in asks
    ]
    try:
        found = store.write_once("create_ask", asks=rows)  # one round trip: ask latency
    except (TransientError, ServiceUnavailable, SessionExpired):
        # Rolled back (transient), or the connection went with the outcome unknown: write
        # in a retried transaction those not already there (ask ids are unique and random,
        # so one found is this write's own; a stale one was not written and is checked again).
        # (read where writes go, a cluster's leader, so that it sees every commit)
        there = {r["id"] for r in store.write_rows("asks_existing", ids=[r["id"] for r in rows])}
        rows = [r for r in rows if r["id"] not in there]
        found = store.write_rows("create_ask", asks=rows) if rows else []
    return set(found[0]["stale"]) if found else set()


def _path_entities(ask: Mapping[str, Any]) -> list[str]:
    return sorted({e for x in ask["answers"] for e in x.get("nodes") or ()})


def ask_record(store: GraphStore, ask_id: str) -> dict | None:
    """{ask: properties, topics: ids, answers: [{id, rank, cost, path, nodes, rels, forward}]}."""
    rows = store.read("ask_record", id=ask_id)
    return dict(rows[0]) if rows else None


def entity_names(store: GraphStore, dataset: str, ids: list[str]) -> dict[str, str]:
    return {r["id"]: r["name"] for r in store.read("entities_by_id", dataset=dataset, ids=ids)}
