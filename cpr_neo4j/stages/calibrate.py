"""`cpr calibrate`: TreeG + scorer over the held-out calibration questions -> :Calibration.

S(q) = min V' over candidate paths ending at a gold answer (+inf if none). The node keeps
the sorted scores, so `cpr ask` can serve any alpha later without recalibrating.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone

import numpy as np

from cpr_neo4j.conformal.threshold import (
    centred,
    conformal_threshold,
    nonconformity,
    smallest_alpha,
    unattainable,
)
from cpr_neo4j.errors import CprError
from cpr_neo4j.graph import fingerprint, records
from cpr_neo4j.graph.linking import link
from cpr_neo4j.graph.neighbours import Neo4jNeighbours
from cpr_neo4j.graph.store import GraphStore
from cpr_neo4j.graph.subgraphs import GRAPH, SUBGRAPH, resolve_scope
from cpr_neo4j.model.store import load_scorer, read_config
from cpr_neo4j.search.adjacency_cache import CachedAdjacency
from cpr_neo4j.search.hints import HintProvider
from cpr_neo4j.stages import questions as qsel
from cpr_neo4j.stages.retrieval import RetrievalSettings, Retriever, calibration_id
from cpr_neo4j.text import mask_question

DEFAULT_ALPHAS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
# Answer costs minus this share of the question's best cost (conformal.threshold.centred):
# chosen on inner dev splits (README, "Method").
DEFAULT_CENTRE = 0.97
# Topic entities of calibration questions: TEXT links the question text as `cpr ask` does
# (its errors count as misses), GOLD takes the dataset's; AUTO picks TEXT when it finds
# the gold topics for at least MIN_TEXT_LINKING of the questions.
TEXT, GOLD, AUTO = "text", "gold", "auto"
MIN_TEXT_LINKING = 0.5


@dataclass
class CalibrationResult:
    id: str
    model_id: str
    n: int
    taus: dict[float, float]
    recall: float  # share of calibration questions with a gold answer among candidates
    warnings: list[str]
    alpha_min: float  # smallest alpha with a finite tau (recall and n decide it)
    delta: float | None = None  # PAC taus were computed too (with probability 1 - delta)
    pac_taus: dict[float, float] | None = None
    pac_alpha_min: float | None = None
    linking: str = GOLD  # how topic entities were found: TEXT (as `cpr ask` does) or GOLD
    linking_accuracy: float = 1.0  # share of questions whose text links to the gold topics
    scope: str = GRAPH  # retrieval inside each question's own subgraph (SUBGRAPH) or not


def resolve_model(
    store: GraphStore, dataset: str, model_id: str | None, hops_filter: int | None = None
) -> str:
    """`model_id` when given (checked), else the newest CPR model (PUCT pairs, never an
    ablation) trained on `hops_filter`-hop questions (ALL_HOPS: every hop; None: any)."""
    if model_id:
        node = records.model_node(store, model_id)
        if node is None:
            raise CprError(f"no scoring model {model_id!r} in Neo4j: see `cpr train --help`")
        if node.get("dataset") != dataset:
            raise CprError(
                f"model {model_id} was trained on {node.get('dataset')!r}, not {dataset!r}"
            )
        return model_id
    latest = records.latest_model(store, dataset, negatives="puct", hops_filter=hops_filter)
    if not latest:
        which = {None: "", records.ALL_HOPS: " on every hop count"}.get(
            hops_filter, f" on {hops_filter}-hop questions"
        )
        hint = {None: "", records.ALL_HOPS: ""}.get(hops_filter, f" --hops {hops_filter}")
        raise CprError(f"no CPR model for {dataset!r}{which}: run `cpr train {dataset}{hint}`")
    return latest["id"]


def calibrate(
    store: GraphStore,
    dataset: str,
    model_id: str | None = None,
    alphas: tuple[float, ...] = DEFAULT_ALPHAS,
    beam_width: int = 32,
    active: int = 32,
    hints: HintProvider | None = None,
    hint_beta: float = 0.0,
    tick: Callable[[], None] = lambda: None,
    on_questions: Callable[[int], None] = lambda n: None,
    hops_filter: int | None = None,
    delta: float | None = None,
    centre: float = DEFAULT_CENTRE,
    linking: str = AUTO,
    scope: str | None = None,
) -> CalibrationResult:
    """scope: None takes the model's (else the dataset's default, graph/subgraphs.py)."""
    model_id = resolve_model(store, dataset, model_id, hops_filter)
    config = read_config(model_id)
    meta = config["meta"]
    if meta.get("dataset") != dataset:
        raise CprError(f"model {model_id} was trained on {meta.get('dataset')!r}, not {dataset!r}")
    scorer = load_scorer(model_id)
    scope = resolve_scope(store, dataset, scope or meta.get("scope"))
    mode = hints.mode if hints and hint_beta else "none"
    settings = RetrievalSettings(
        hops=meta["hops"],
        beam_width=beam_width,
        active=active,
        hint_mode=mode,
        hint_beta=hint_beta if mode != "none" else 0.0,
        hint_prompt=hints.prompt if hints and mode != "none" else "",
        scope=scope,
    )
    ids = set(meta["calibration_ids"])
    cal = qsel.load(store, dataset, meta["split"], meta.get("hops_filter"), ids)
    if not cal:
        raise CprError(f"model {model_id} lists no calibration questions present in {dataset!r}")
    graph = fingerprint.current(store, dataset)
    linked = {q.id: link_text(store, dataset, q.text) for q in cal}
    accuracy = sum(set(linked[q.id][0]) == set(q.topics) for q in cal) / len(cal)
    # no `cpr ask` runs inside a question's own subgraph: AUTO takes the dataset's topics there
    mode = choose_linking(GOLD if scope == SUBGRAPH and linking == AUTO else linking, accuracy)
    inputs = {
        q.id: linked[q.id] if mode == TEXT else (q.topics, q.masked) for q in cal
    }  # (topic ids, masked text): what `cpr ask` would search from
    on_questions(len(cal))
    # one neighbour cache across the calibration questions: they share hubs
    shared = CachedAdjacency(Neo4jNeighbours(store, dataset, settings.fanout_cap))
    retriever = Retriever(store, dataset, scorer, settings, hints, shared)
    scorer.questions([m for t, m in inputs.values() if t])  # one embedding batch
    retriever.prefetch([(m, t, qid) for qid, (t, m) in inputs.items()])  # hints: one batch
    scores = []
    for q in cal:
        topics, masked = inputs[q.id]
        costs = retriever.run(masked, topics, q.text, q.id).answer_costs() if topics else {}
        scores.append(nonconformity(centred(costs, centre), q.answers))
        tick()
    scores_arr = np.sort(np.asarray(scores, dtype=float))
    n, n_finite = len(scores_arr), int(np.isfinite(scores_arr).sum())
    taus = {a: tau_for({"scores": scores_arr}, a) for a in alphas}
    pac = {a: tau_for({"scores": scores_arr}, a, delta) for a in alphas} if delta else None
    caught = [
        why
        for d in dict.fromkeys([None, delta])
        for a in alphas
        if (why := unattainable(n, n_finite, a, d))
    ]
    cid = calibration_id(model_id, dataset, settings, sorted(ids), centre, mode)
    recall = n_finite / n
    alpha_min = smallest_alpha(n, n_finite)
    pac_alpha_min = smallest_alpha(n, n_finite, delta) if delta else None
    records.save_calibration(
        store,
        cid,
        model_id,
        {
            "dataset": dataset,
            "split": meta["split"],
            "model_id": model_id,
            "n": len(cal),
            "scores": scores_arr.tolist(),
            "alphas": list(alphas),
            "taus": [taus[a] for a in alphas],
            "recall": recall,
            "n_finite": n_finite,
            "alpha_min": alpha_min,
            "delta": delta,
            "pac_taus": [pac[a] for a in alphas] if pac else None,
            "pac_alpha_min": pac_alpha_min,
            "centre": centre,
            "linking": mode,
            "linking_accuracy": accuracy,
            "scope": scope,
            "graph_fingerprint": graph,
            "settings": settings.key(),
            "hint_mode": settings.hint_mode,
            "hint_beta": settings.hint_beta,
            "hint_prompt": settings.hint_prompt or None,
            "hint_model": getattr(hints, "model", None) if mode != "none" else None,
            "beam_width": beam_width,
            "active": active,
            "hops": settings.hops,
            "fanout_cap": settings.fanout_cap,
            "seed": meta["settings"]["seed"],
            "created": datetime.now(timezone.utc).isoformat(),
        },
    )
    return CalibrationResult(
        cid,
        model_id,
        n,
        taus,
        recall,
        caught,
        alpha_min,
        delta,
        pac,
        pac_alpha_min,
        mode,
        accuracy,
        scope,
    )


def link_text(store: GraphStore, dataset: str, text: str) -> tuple[list[str], str]:
    """(topic ids, masked question) as `cpr ask` finds them; ([], text) when linking fails."""
    try:
        topics, _ = link(store, dataset, text)
    except CprError:
        return [], text
    return [t["id"] for t in topics], mask_question(text, [t["name"] for t in topics])


def choose_linking(asked: str, accuracy: float) -> str:
    if asked not in (TEXT, GOLD, AUTO):
        raise CprError(f"linking must be {TEXT}, {GOLD} or {AUTO}, got {asked!r}")
    if asked != AUTO:
        return asked
    return TEXT if accuracy >= MIN_TEXT_LINKING else GOLD


def tau_for(calibration: dict, alpha: float, delta: float | None = None) -> float:
    """tau from the stored scores (any alpha and delta, no recalibration); +inf when
    fewer than k scores are finite (`threshold.unattainable` says why)."""
    scores = np.asarray(calibration["scores"], dtype=float)
    if not 0 < alpha < 1:
        raise CprError(f"alpha must be between 0 and 1, got {alpha}")
    if delta is not None and not 0 < delta < 1:
        raise CprError(f"delta must be between 0 and 1, got {delta}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return conformal_threshold(scores, alpha, delta) if len(scores) else math.inf


def why_unattainable(calibration: dict, alpha: float, delta: float | None = None) -> str | None:
    """The cause of tau = +inf for this calibration at alpha, or None when tau is finite."""
    scores = np.asarray(calibration["scores"], dtype=float)
    return unattainable(len(scores), int(np.isfinite(scores).sum()), alpha, delta)
