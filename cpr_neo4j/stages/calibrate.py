"""`cpr calibrate`: TreeG + scorer over the held-out calibration questions -> :Calibration.

Per calibration question the node keeps what any later request needs (conformal/
guarantee.py): its score S (the best gold answer's score, +inf if none is a candidate),
its group (the hop count of its best answer's path), its gold answers' scores and |Y|. So
`cpr ask` and `cpr serve` serve any alpha, delta, risk (coverage or answer recall) and
grouping later without recalibrating. It also keeps a canary: a few questions' path costs,
which a later session re-scores to prove it computes the same numbers.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone

import numpy as np

from cpr_neo4j.conformal import levels
from cpr_neo4j.conformal.guarantee import DEFAULT_DELTA, Calibrated, population_of, request
from cpr_neo4j.conformal.levels import DEFAULT_ALPHAS
from cpr_neo4j.conformal.threshold import TOLERANCE
from cpr_neo4j.errors import CprError
from cpr_neo4j.graph import fingerprint, records
from cpr_neo4j.graph.neighbours import Neo4jNeighbours
from cpr_neo4j.graph.store import GraphStore
from cpr_neo4j.graph.subgraphs import SUBGRAPH, resolve_scope
from cpr_neo4j.hints.base import HintProvider
from cpr_neo4j.linking.readings import link_readings as link_text
from cpr_neo4j.linking.readings import named_readings, search_readings
from cpr_neo4j.linking.resolve import linker
from cpr_neo4j.model.costs import save_table
from cpr_neo4j.model.store import load_scorer, model_dir, read_config
from cpr_neo4j.search.adjacency_cache import CachedAdjacency
from cpr_neo4j.stages import canary as canary_mod
from cpr_neo4j.stages import pins
from cpr_neo4j.stages.retrieval import RetrievalSettings, Retriever, calibration_id
from cpr_neo4j.stages.scoring import answer_scores, columns, default_spec, fit_temperature
from cpr_neo4j.stages.session import NAMED
from cpr_neo4j.text import bracket_mentions
from cpr_neo4j.training import questions as qsel
from cpr_neo4j.training.generate import is_generated

# Topic entities of calibration questions: TEXT links the question text as `cpr ask` does
# (its errors count as misses), GOLD takes the dataset's; AUTO picks TEXT when it finds
# the gold topics for at least MIN_TEXT_LINKING of the questions.
TEXT, GOLD, AUTO = "text", "gold", "auto"
MIN_TEXT_LINKING = 0.5
FIT_QUESTIONS = 200  # training questions a temperature is fitted on when the model has none
ACCURACY_QUESTIONS = 500  # training questions text linking is measured on (--linking auto)


@dataclass
class CalibrationResult:
    id: str
    model_id: str
    n: int
    recall: float  # share of calibration questions with a gold answer among candidates
    calibrated: Calibrated
    delta: float | None
    linking: str = GOLD
    linking_accuracy: float = 1.0  # on training questions (what `auto` decides on)
    scope: str = "graph"
    spec: dict = field(default_factory=dict)
    groups: dict[int, int] = field(default_factory=dict)  # group -> calibration questions
    warnings: list[str] = field(default_factory=list)
    linked_calibration: float = 1.0  # share of calibration questions linked to gold topics
    costs_kept: int = 0  # path costs in the model's table for `cpr serve` (model/costs.py)


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


def calibration_ids(store: GraphStore, dataset: str, model_id: str, meta: dict) -> set[str]:
    """The labelled questions that calibrate this model: the reserve `cpr train` kept;
    for a model that trained on no labelled question (generated ones alone), every labelled
    question of its split, none of which it saw. Generated questions never calibrate."""
    ids = set(meta["calibration_ids"])
    if not ids and meta.get("labels_trained") == 0:
        rows = qsel.load(store, dataset, meta["split"], meta.get("hops_filter"))
        ids = {q.id for q in rows} - set(meta.get("inner_dev_ids") or ())
    bad = sorted(i for i in ids if is_generated(i))
    if bad:
        raise CprError(
            f"model {model_id} lists generated question {bad[0]!r} for calibration: generated "
            "questions are training data only and never calibrate; retrain with `cpr train`"
        )
    return ids


def score_spec(store: GraphStore, retriever: Retriever, meta: dict) -> tuple[dict, str]:
    """The model's score family (its fitted temperature); a model trained before
    temperatures existed gets one fitted here on its training questions, never on the
    calibration share."""
    if meta.get("temperature"):
        return default_spec(meta["temperature"]), "fitted at training"
    pool = qsel.load(
        store, meta["dataset"], meta["split"], meta.get("hops_filter"), set(meta["training_ids"])
    )
    sample = random.Random(1).sample(pool, min(FIT_QUESTIONS, len(pool)))
    found = [retriever.run(q.masked, q.topics, q.text, q.id) for q in sample]
    t = fit_temperature(found, [set(q.answers) for q in sample])
    return default_spec(t), f"fitted now on {len(sample)} training questions"


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
    delta: float | None = DEFAULT_DELTA,
    linking: str = AUTO,
    scope: str | None = None,
) -> CalibrationResult:
    """scope: None takes the model's (else the dataset's default, graph/subgraphs.py)."""
    model_id = resolve_model(store, dataset, model_id, hops_filter)
    meta = read_config(model_id)["meta"]
    if meta.get("dataset") != dataset:
        raise CprError(f"model {model_id} was trained on {meta.get('dataset')!r}, not {dataset!r}")
    scorer = load_scorer(model_id)
    scope = resolve_scope(store, dataset, scope or meta.get("scope"))
    mode = hints.mode if hints and hint_beta else "none"
    topic_answers = records.topic_answers(store, dataset)
    settings = RetrievalSettings(
        hops=meta["hops"],
        beam_width=beam_width,
        active=active,
        hint_mode=mode,
        hint_beta=hint_beta if mode != "none" else 0.0,
        hint_prompt=hints.prompt if hints and mode != "none" else "",
        scope=scope,
        topic_answers=topic_answers,
    )
    ids = calibration_ids(store, dataset, model_id, meta)
    cal = qsel.load(store, dataset, meta["split"], meta.get("hops_filter"), ids)
    if not cal:
        raise CprError(
            f"no labelled questions to calibrate model {model_id} on in {dataset!r}: label "
            f"some (`cpr label {dataset} questions.txt -o labelled.jsonl`), add them "
            f"(`cpr ingest {dataset} --questions labelled.jsonl`), then calibrate"
        )
    graph = fingerprint.current(store, dataset)
    # text or gold linking is decided on training questions, never on the calibration share
    if meta.get("labels_trained") == 0 and not meta["calibration_ids"]:
        # every labelled question calibrates: none is left to decide on, so AUTO links the
        # text as `cpr ask` does (the labelling flow's topics are the linker's own)
        accuracy, linking = 1.0, TEXT if linking == AUTO else linking
    else:
        accuracy = linking_accuracy(store, dataset, meta, graph, ACCURACY_QUESTIONS)
    # no `cpr ask` runs inside a question's own subgraph: AUTO takes the dataset's topics there
    mode = choose_linking(GOLD if scope == SUBGRAPH and linking == AUTO else linking, accuracy)
    gold_in = {q.id: ([(q.topics, q.masked)]) for q in cal}
    linked = {q.id: link_text(store, dataset, q.text, graph) for q in cal} if mode == TEXT else {}
    inputs = {qid: linked[qid] if mode == TEXT else gold_in[qid] for qid in gold_in}
    # one neighbour cache across the calibration questions: they share hubs
    shared = CachedAdjacency(Neo4jNeighbours(store, dataset, settings.fanout_cap))
    retriever = Retriever(store, dataset, scorer, settings, hints, shared)
    spec, spec_note = score_spec(store, retriever, meta)
    on_questions(len(cal))
    scorer.questions([m for c in inputs.values() for _, m in c])  # one embedding batch
    retriever.prefetch([(m, t, qid) for qid, c in inputs.items() for t, m in c if t])
    rows, named, canary, taken = [], [], [], {}
    names: dict[str, str] = {}  # the topics' names, as a user would type them to --entity
    if mode == TEXT:
        topic_ids = sorted({t for q in cal for t in q.topics})
        rows_ = store.read("entities_by_id", dataset=dataset, ids=topic_ids)
        names = {r["id"]: r["name"] for r in rows_ if r["name"]}
    for i, q in enumerate(cal):
        found, taken[q.id] = search_readings(retriever, inputs[q.id], q)
        if found is not None and len(canary) < canary_mod.QUESTIONS and found.candidates():
            canary.append(canary_mod.entry(scorer, taken[q.id][1], found))
        row = _row(found, q, i, spec, topic_answers)
        rows.append(row)
        if mode == TEXT:  # the curves for a user who names the topic (`--entity`)
            readings = _named_in(store, dataset, q, names, graph)
            if readings != inputs[q.id]:  # else the search, hence the row, is the same
                row = _row(search_readings(retriever, readings, q)[0], q, i, spec, topic_answers)
            named.append(row)
        tick()
    cal_accuracy = sum(set(taken[q.id][0]) == set(q.topics) for q in cal) / len(cal)
    hop_counts = sorted({q.hops for q in cal if q.hops is not None})
    node = {"n": len(cal), "dataset": dataset, "hop_counts": hop_counts}
    calibrated = _calibrated(rows, cal, node)
    named_props = (
        {f"{NAMED}{k}": v for k, v in _calibrated(named, cal, node).to_props().items()}
        if mode == TEXT
        else {}
    )
    # the texts embedded here are what `cpr ask` meets: keep them for later processes
    scorer.encoder.save(*scorer.embedded())
    kept = 0  # and the costs computed (torch's are not the numpy scorer's bits)
    if scorer.backend == "numpy" and len(scorer.costs):
        kept = save_table(model_dir(model_id), model_id, scorer.costs)
    cid = calibration_id(model_id, dataset, settings, sorted(ids), spec, mode)
    recall = float(np.isfinite(calibrated.scores).mean())
    records.save_calibration(
        store,
        cid,
        model_id,
        {
            "dataset": dataset,
            "split": meta["split"],
            "model_id": model_id,
            "n": len(cal),
            "hops_filter": meta.get("hops_filter") or records.ALL_HOPS,
            "hop_counts": hop_counts,
            "scores": np.sort(calibrated.scores).tolist(),
            **calibrated.to_props(),
            **named_props,
            # what `cpr calibrate` prints, for GET /calibrations
            "alphas": [float(a) for a in alphas],
            "taus": levels.to_json(levels.tau_rows(calibrated, alphas, delta)),
            "score_family": json.dumps(spec, sort_keys=True),
            "score_note": spec_note,
            "recall": recall,
            "delta": delta,
            "tolerance": TOLERANCE,
            pins.CODE: json.dumps(pins.current(), sort_keys=True),  # read by stages/pins.py
            "canary": json.dumps(canary),
            "backend": getattr(scorer, "backend", "numpy"),
            "device": str(getattr(scorer, "device", "cpu")),
            "linking": mode,
            "linker": linker(store, dataset, graph) if mode == TEXT else None,
            "linking_accuracy": accuracy,  # on training questions: what decided the mode
            "linking_accuracy_calibration": cal_accuracy,
            # how the calibration questions name their topics: `cpr ask` notes a question
            # written the other way (plain words under a [bracketed] calibration)
            "bracketed": sum(bool(bracket_mentions(q.text)) for q in cal) / len(cal),
            "scope": scope,
            "topic_answers": topic_answers,
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
    # group 0 holds the questions with no candidate at all (no answer is ever given there)
    warnings = [n for n in calibrated.notes(request(0.5, delta)) if not n.startswith("groups [0]")]
    counts = dict(zip(*np.unique(calibrated.groups, return_counts=True), strict=True))
    return CalibrationResult(
        id=cid,
        model_id=model_id,
        n=len(cal),
        recall=recall,
        calibrated=calibrated,
        delta=delta,
        linking=mode,
        linking_accuracy=accuracy,
        scope=scope,
        spec=spec,
        groups={int(g): int(c) for g, c in counts.items()},
        warnings=warnings,
        linked_calibration=cal_accuracy,
        costs_kept=kept,
    )


def _named_in(store, dataset: str, q, names: dict[str, str], graph: str) -> list:
    """The readings `cpr ask --entity` searches for q's gold topics (linking/readings.py
    named_readings); the dataset's own masking when its topics are not in the graph."""
    try:
        return named_readings(store, dataset, q.text, q.topics, names, graph)
    except CprError:
        return [(q.topics, q.masked)]


def _row(found, q, i: int, spec: dict, topic_answers: bool) -> tuple:
    """(question index, answer scores, gold mask, group) of one calibration question; a
    question without candidates is a miss in no group of its own (group 0)."""
    if found is None:
        return (np.zeros(0, np.int64), np.zeros(0), np.zeros(0, bool), 0)
    cols = columns(found, spec, topic_answers)
    s = answer_scores(cols, spec)
    answers = set(q.answers)
    gold = np.fromiter(map(answers.__contains__, cols.ids), bool, len(s))
    return (np.full(len(s), i), s, gold, cols.group)


def _calibrated(rows: list[tuple], cal: list, node: dict) -> Calibrated:
    cat = lambda k, dt: np.concatenate([r[k] for r in rows]) if rows else np.zeros(0, dt)  # noqa: E731
    return Calibrated.from_flat(
        cat(0, np.int64),
        cat(1, float),
        cat(2, bool),
        np.array([len(set(q.answers)) for q in cal]),
        np.array([r[3] for r in rows]),
        population_of(node),
    )


def choose_linking(asked: str, accuracy: float) -> str:
    if asked not in (TEXT, GOLD, AUTO):
        raise CprError(f"linking must be {TEXT}, {GOLD} or {AUTO}, got {asked!r}")
    if asked != AUTO:
        return asked
    return TEXT if accuracy >= MIN_TEXT_LINKING else GOLD


def linking_accuracy(store: GraphStore, dataset: str, meta: dict, graph: str, most: int) -> float:
    """Share of (up to `most`) training questions whose text links to their
    gold topics, ties counted as a hit when the gold topics are among the readings (the
    search decides those): what `--linking auto` decides on."""
    pool = qsel.load(store, dataset, meta["split"], meta.get("hops_filter"))
    held = set(meta["calibration_ids"])
    pool = [q for q in pool if q.id not in held]
    if not pool:
        return 0.0
    sample = random.Random(2).sample(pool, min(most, len(pool)))
    hit = [
        any(set(t) == set(q.topics) for t, _ in link_text(store, dataset, q.text, graph))
        for q in sample
    ]
    return sum(hit) / len(sample)
