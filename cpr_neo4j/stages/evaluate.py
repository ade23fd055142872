"""`cpr eval`: the deployed protocol first, the pooled re-split second.

Headline (conformal.deployed): exactly what a user does. tau comes from the CPR model's
calibration share (held out from training, as `cpr calibrate` uses it) and every question
of the evaluation split is answered with that one tau, with gold topic entities (as
`cpr ask --entity` would). Second view (conformal.evaluate): the calibration share and
the evaluation split pooled and re-split at random.

Scope: `subgraph` answers every question (calibration share and evaluation split alike)
inside its own subgraph, `graph` over the whole graph; default: the model's.

Evaluation split: `test`, or `inner-dev`, the share of the training split that training
and calibration never saw (the model records its ids): every default is chosen there.

Methods: CPR (RCVNet, PUCT pairs), Abl.1 (V_sem only), Abl.2 (RCVNet, "w/o PUCT": shortest
gold paths against random negatives; trained here with CPR's settings when missing), top-k
from CPR's ranking, and the UaG-style hop-level baselines (stages.hoplevel: open expansion
with per-hop V_sem thresholds, Bonferroni-corrected and uncorrected).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from cpr_neo4j.conformal.deployed import DeployedResults, ci_test_only, deployed, row
from cpr_neo4j.conformal.evaluate import (
    EvalResults,
    ScoredQuestion,
    evaluate,
    scored_columns,
)
from cpr_neo4j.conformal.report import write_report
from cpr_neo4j.errors import CprError
from cpr_neo4j.graph import records
from cpr_neo4j.graph.neighbours import Neo4jNeighbours
from cpr_neo4j.graph.store import GraphStore
from cpr_neo4j.graph.subgraphs import GRAPH, SUBGRAPH, resolve_scope
from cpr_neo4j.model.encoder import TextEncoder
from cpr_neo4j.model.scorer import PathScorer
from cpr_neo4j.model.store import load_scorer, read_config
from cpr_neo4j.search.adjacency_cache import CachedAdjacency
from cpr_neo4j.search.hints import HintProvider
from cpr_neo4j.stages import questions as qsel
from cpr_neo4j.stages.calibrate import DEFAULT_CENTRE, resolve_model
from cpr_neo4j.stages.hoplevel import run_hop_level
from cpr_neo4j.stages.retrieval import RetrievalSettings, Retriever, results_dir
from cpr_neo4j.stages.train import TrainSettings, train
from cpr_neo4j.stages.workers import default_workers, interleave, run_shares, share_store

METHODS = {"cpr": "CPR", "abl1": "Abl.1 (V_sem)", "abl2": "Abl.2 (w/o PUCT)"}
MARGIN = "CPR, margin score"
INNER_DEV = "inner-dev"

Progress = Callable[[str, int], Callable[[], None]]


def centred_name(centre: float) -> str:
    return {1: MARGIN, 0: "CPR, raw cost"}.get(centre, f"CPR, centred {centre:g}")


@dataclass
class EvalSettings:
    dataset: str
    alphas: tuple[float, ...] = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
    repeats: int = 20  # pooled view: random re-splits
    methods: tuple[str, ...] = ("cpr", "abl1", "abl2")
    hops: int | None = None  # question hop filter (None: every hop count, the mixed setting)
    split: str = "test"  # or "inner-dev"
    model_id: str | None = None  # default: the newest CPR model for the hop filter
    max_questions: int | None = None  # subsample the evaluation split (seeded); None = all
    hop_level: bool = True
    hop_level_questions: int | None = 1000  # open expansion is slow on hubs: a seeded sample
    beam_width: int = 32
    active: int = 32
    hints: HintProvider | None = None
    hint_beta: float = 0.0
    boot: int = 1000
    delta: float | None = 0.05  # PAC rows for CPR (None: none)
    centre: float = DEFAULT_CENTRE  # as `cpr calibrate` scores (conformal.threshold.centred)
    centres: tuple[float, ...] = (1.0,)  # extra rows: CPR's costs centred so (1 = margin)
    seed: int = 0
    scope: str | None = None  # "subgraph" | "graph"; None: the model's
    workers: int = field(default_factory=default_workers)  # processes sharing the questions
    notes: list[str] = field(default_factory=list)

    @property
    def hint_mode(self) -> str:
        return self.hints.mode if self.hints is not None and self.hint_beta else "none"


@dataclass
class EvalOutput:
    deployed: DeployedResults
    pooled: EvalResults
    model_id: str
    models: dict[str, str]  # method -> the model id that scored it
    files: dict[str, Path]


CPR_ONLY = ("negatives", "retrieval_negatives", "random_negatives")  # Abl.2 ignores them


def _ablation_settings(meta: dict) -> dict:
    """Settings an Abl.2 model must share with CPR's; the scope as trained (models made
    before scopes existed searched the whole graph)."""
    out = {k: v for k, v in meta["settings"].items() if k not in (*CPR_ONLY, "scope")}
    return {**out, "scope": meta.get("scope", GRAPH)}


def _config_or_none(model_id: str) -> dict | None:
    """The model's saved meta, or None when its files are not under this CPR_HOME."""
    try:
        return read_config(model_id)["meta"]
    except CprError:
        return None


def _abl2(store: GraphStore, cpr_meta: dict, say: Callable[[str], None]) -> str:
    """An Abl.2 model with CPR's question shares and training settings, else a new one."""
    found = records.latest_model(
        store,
        cpr_meta["dataset"],
        negatives="random",
        hops_filter=cpr_meta.get("hops_filter") or records.ALL_HOPS,
    )
    meta = _config_or_none(found["id"]) if found else None
    if meta is not None:
        same_shares = all(
            meta.get(k) == cpr_meta.get(k) for k in ("calibration_ids", "inner_dev_ids")
        )
        if same_shares and _ablation_settings(meta) == _ablation_settings(cpr_meta):
            return found["id"]
    say("Abl.2: no w/o-PUCT model with CPR's calibration share; training one now")
    settings = replace(
        TrainSettings(**cpr_meta["settings"]),
        negatives="random",
        scope=cpr_meta.get("scope", GRAPH),
    )
    result = train(store, settings)
    return result.model_id


def _scorer(
    store: GraphStore, method: str, meta: dict, encoder: TextEncoder, say: Callable[[str], None]
) -> tuple[PathScorer, str]:
    if method == "cpr":
        return load_scorer(meta["model_id"], encoder), meta["model_id"]
    if method == "abl1":
        scorer = PathScorer(encoder, records.relation_text(store, meta["dataset"]))
        return scorer, scorer.model_id
    model_id = _abl2(store, meta, say)
    return load_scorer(model_id, encoder), model_id


def questions(
    store: GraphStore, s: EvalSettings, meta: dict
) -> tuple[list[qsel.Question], list[qsel.Question]]:
    """(calibration share, evaluation questions) for the model's hop filter."""
    hops = meta.get("hops_filter")
    cal = qsel.load(store, s.dataset, meta["split"], hops, set(meta["calibration_ids"]))
    if s.split == INNER_DEV:
        ids = set(meta.get("inner_dev_ids") or [])
        if not ids:
            raise CprError(
                f"model {meta['model_id']} records no inner dev split: retrain it with `cpr train`"
            )
        target = qsel.load(store, s.dataset, meta["split"], hops, ids)
    else:
        target = qsel.load(store, s.dataset, s.split, hops)
    if not cal:
        raise CprError(f"model {meta['model_id']} lists no calibration questions in {s.dataset!r}")
    if not target:
        raise CprError(f"dataset {s.dataset!r} has no {s.split} questions to evaluate on")
    if s.max_questions and len(target) > s.max_questions:
        target = random.Random(s.seed).sample(target, s.max_questions)
        s.notes.append(f"{s.split} split subsampled to {s.max_questions} questions (seed {s.seed})")
    return cal, target


def _sources(
    store: GraphStore, dataset: str, settings: RetrievalSettings
) -> tuple[CachedAdjacency, Callable[[str], CachedAdjacency]]:
    """One neighbour cache for the whole run, shared by every method and question; under
    SUBGRAPH scope one per question, shared by every method."""
    source = CachedAdjacency(Neo4jNeighbours(store, dataset, settings.fanout_cap))
    per_question: dict[str, CachedAdjacency] = {}

    def source_for(qid: str) -> CachedAdjacency:
        if qid not in per_question:
            scoped = Neo4jNeighbours(store, dataset, settings.fanout_cap, question=qid)
            per_question[qid] = CachedAdjacency(scoped)
        return per_question[qid]

    return source, source_for


def _records(
    retriever: Retriever,
    qs: list[qsel.Question],
    tick: Callable[[], None],
    centres: list[float],
) -> dict[float, list[ScoredQuestion]]:
    """Each question's record per centre, reduced to numbers as it comes (a full 3-hop run
    would otherwise hold a dict of thousands of candidates per question and method)."""
    out: dict[float, list[ScoredQuestion]] = {c: [] for c in centres}
    for q in qs:
        found = retriever.run(q.masked, q.topics, q.text, q.id)
        ids, costs = found.answer_columns()
        scored = scored_columns(q.id, frozenset(q.answers), ids, costs, centres)
        for c, one in zip(centres, scored, strict=True):
            out[c].append(one)
        tick()
    return out


def run(
    store: GraphStore,
    s: EvalSettings,
    say: Callable[[str], None] = print,
    progress: Progress | None = None,
    out_dir: str | Path | None = None,
) -> EvalOutput:
    hops_filter = s.hops or records.ALL_HOPS
    model_id = resolve_model(store, s.dataset, s.model_id, hops_filter)
    node = records.model_node(store, model_id) or {}
    meta = {
        **read_config(model_id)["meta"],
        "model_id": model_id,
        "created": node.get("created", ""),
    }
    if node.get("negatives", "puct") != "puct" and "cpr" in s.methods:
        s.notes.append(f"model {model_id} is not a CPR (PUCT) model: its rows are labelled CPR")
    cal_qs, test_qs = questions(store, s, meta)
    everyone = cal_qs + test_qs
    scope = resolve_scope(store, s.dataset, s.scope or meta.get("scope"))
    settings = RetrievalSettings(
        hops=meta["hops"],
        beam_width=s.beam_width,
        active=s.active,
        hint_mode=s.hint_mode,
        hint_beta=s.hint_beta if s.hint_mode != "none" else 0.0,
        hint_prompt=s.hints.prompt if s.hints is not None and s.hint_mode != "none" else "",
        scope=scope,
    )
    source, source_for = _sources(store, s.dataset, settings)
    encoder = TextEncoder()
    step = progress or (lambda name, n: lambda: None)
    used: dict[str, str] = {}
    methods: list[tuple[str, PathScorer, list[float]]] = []  # (name, scorer, centres)
    for method in s.methods:
        scorer, used[METHODS[method]] = _scorer(store, method, meta, encoder, say)
        scorer.questions([q.masked for q in everyone])
        retriever = Retriever(store, s.dataset, scorer, settings, s.hints, source, source_for)
        retriever.prefetch([(q.masked, q.topics, q.id) for q in everyone])  # hints: one batch
        # every method's row scores as `cpr calibrate` does (costs centred by s.centre); the
        # extra CPR rows try other centres on the same retrievals
        centres = [s.centre, *(c for c in s.centres if c != s.centre and method == "cpr")]
        methods.append((METHODS[method], scorer, centres))
    bars = {name: step(name, len(everyone)) for name, _, _ in methods}

    def share_records(share: int, shares: int, tick: Callable[[str], None]) -> dict:
        """Every method on questions share, share + shares, ...: a forked worker opens its
        own driver and cache; the parent (share 0) keeps `source` warm for the hop level."""
        with share_store(store, share) as mine:
            own = _sources(mine, s.dataset, settings) if share else (source, source_for)
            return {
                name: _records(
                    Retriever(mine, s.dataset, scorer, settings, s.hints, *own),
                    everyone[share::shares],
                    lambda name=name: tick(name),
                    centres,
                )
                for name, scorer, centres in methods
            }

    shares = run_shares(share_records, s.workers, lambda name: bars[name]())
    cal_by: dict[str, list[ScoredQuestion]] = {}
    test_by: dict[str, list[ScoredQuestion]] = {}
    for method, _, centres in methods:
        for c in centres:
            merged = interleave([part[method][c] for part in shares])
            name = method if c == s.centre else centred_name(c)
            cal_by[name], test_by[name] = merged[: len(cal_qs)], merged[len(cal_qs) :]
    cpr_name = METHODS["cpr"] if "cpr" in s.methods else None
    hint_rows = {m: s.hint_mode for m in cal_by}
    headline = deployed(cal_by, test_by, s.alphas, s.boot, s.seed, cpr_name, hint_rows, s.delta)
    if s.hop_level and scope == SUBGRAPH:
        headline.notes.append(
            "hop-level baselines search the whole graph: not run with --scope subgraph"
        )
    elif s.hop_level:

        def reopen(mine: GraphStore) -> CachedAdjacency:
            """A forked worker's source for open expansion: a whole-graph cache like `source`."""
            return _sources(mine, s.dataset, settings)[0]

        _add_hop_level(store, s, headline, cal_qs, test_qs, meta, encoder, source, reopen, step)
    pooled_in = {m: cal_by[m] + test_by[m] for m in cal_by}
    pooled = evaluate(
        pooled_in,
        s.alphas,
        s.repeats,
        cal_size=len(cal_qs),
        seed=s.seed,
        baselines_from=cpr_name,
        delta=s.delta,
    )
    setting = (
        f"model {model_id} ({'every hop count' if not s.hops else f'{s.hops}-hop questions'}), "
        f"H = {meta['hops']}, B = {s.beam_width}, A = {s.active}, hints: {s.hint_mode}, "
        f"scope: {scope}, "
        f"costs centred by {s.centre:g} x the best; "
        f"models per method: " + ", ".join(f"{m} = {i}" for m, i in used.items())
    )
    headline.notes = [*s.notes, setting, *headline.notes]
    pooled.notes = [*s.notes, setting, *pooled.notes]
    split = s.split + (f"-{s.hops}hop" if s.hops else "-all")
    out = Path(out_dir) if out_dir else results_dir(s.dataset, model_id, split)
    files = write_report(headline, pooled, out, title=f"{s.dataset} {split}")
    return EvalOutput(headline, pooled, model_id, used, files)


def _add_hop_level(
    store: GraphStore,
    s: EvalSettings,
    headline: DeployedResults,
    cal_qs: list[qsel.Question],
    test_qs: list[qsel.Question],
    meta: dict,
    encoder: TextEncoder,
    source: CachedAdjacency,
    reopen: Callable[[GraphStore], CachedAdjacency],
    step: Progress,
) -> None:
    """UaG-style rows: per-hop V_sem thresholds from the calibration share, open expansion."""
    if not s.hops:
        headline.notes.append(
            "hop-level baselines need a fixed hop count (their answers are the ends at hop H): "
            "not run in the mixed setting"
        )
        return
    sample = test_qs
    if s.hop_level_questions and len(test_qs) > s.hop_level_questions:
        sample = random.Random(s.seed + 1).sample(test_qs, s.hop_level_questions)
        headline.notes.append(
            f"hop-level rows: {len(sample)} of the {len(test_qs)} evaluation questions "
            f"(seeded sample; open expansion is slow on hub entities)"
        )
    vsem = PathScorer(encoder, records.relation_text(store, s.dataset))
    out = run_hop_level(
        store,
        s.dataset,
        vsem,
        cal_qs,
        sample,
        meta["hops"],
        s.alphas,
        source,
        tick=step("hop-level (open expansion)", len(cal_qs) + len(sample)),
        workers=s.workers,
        open_source=reopen,
    )
    rng = np.random.default_rng(s.seed)
    for variant, by_alpha in out["results"].items():
        headline.methods.append(variant)
        for a in s.alphas:
            r = by_alpha[a]
            hit, size = np.asarray(r["covered"], bool), np.asarray(r["size"], float)
            headline.rows.append(
                row(
                    variant,
                    a,
                    [float(t) for t in r["taus"]],
                    hit,
                    size,
                    float("nan"),
                    float("nan"),
                    ci_test_only(hit, s.boot, rng),
                )
            )
    for note in out.get("notes", []):
        headline.notes.append(note)
