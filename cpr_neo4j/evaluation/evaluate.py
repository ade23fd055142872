"""`cpr eval`: the deployed protocol, its diagnostics and the pooled view, per method.

What is compared (evaluation/deployed.py Variant): CPR as it ships (the calibration's
score family, one threshold per group, the PAC threshold with the default delta, sets never
empty), then one change at a time (marginal delta 0, one threshold for all, empty sets
allowed, the paper's sets with the previous centred score), CPR controlling answer recall
(FNR), the conformal top-k baselines (single answers ranked by (cost, id), and distinct
score levels, tied answers together), Abl.1 (V_sem) and Abl.2 (w/o PUCT, trained here on
CPR's exact question shares when missing) with CPR's guarantee, and the UaG-style
hop-level baselines for a fixed hop count. Question sets: evaluation/eval_tables.py.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from cpr_neo4j.conformal.guarantee import DEFAULT_DELTA
from cpr_neo4j.errors import CprError
from cpr_neo4j.evaluation import eval_tables as et
from cpr_neo4j.evaluation.deployed import DeployedResults, Row, Variant, deployed
from cpr_neo4j.evaluation.diagnostics import cluster_bootstrap
from cpr_neo4j.evaluation.hoplevel import run_hop_level
from cpr_neo4j.evaluation.report import write_report
from cpr_neo4j.evaluation.table import CandidateTable
from cpr_neo4j.graph import fingerprint, records
from cpr_neo4j.graph.neighbours import Neo4jNeighbours
from cpr_neo4j.graph.store import GraphStore
from cpr_neo4j.graph.subgraphs import GRAPH, SUBGRAPH, resolve_scope
from cpr_neo4j.hints.base import HintProvider
from cpr_neo4j.model.encoder import shared_encoder
from cpr_neo4j.model.scorer import PathScorer
from cpr_neo4j.model.store import load_scorer, read_config
from cpr_neo4j.search.adjacency_cache import CachedAdjacency
from cpr_neo4j.stages.calibrate import resolve_model, score_spec
from cpr_neo4j.stages.retrieval import RetrievalSettings, Retriever, results_dir
from cpr_neo4j.stages.scoring import default_spec
from cpr_neo4j.stages.train import TrainSettings, train
from cpr_neo4j.stages.workers import default_workers
from cpr_neo4j.training.questions import Question

METHODS = {"cpr": "CPR", "abl1": "Abl.1 (V_sem)", "abl2": "Abl.2 (w/o PUCT)"}
INNER_DEV = et.INNER_DEV
PREVIOUS = {"family": "centred", "centre": 0.97}  # the score before the surprisal
Progress = Callable[[str, int], Callable[[], None]]


@dataclass
class EvalSettings:
    dataset: str
    alphas: tuple[float, ...] = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
    methods: tuple[str, ...] = ("cpr", "abl1", "abl2")
    hops: int | None = None  # question hop filter (None: every hop count, the mixed setting)
    split: str = et.TEST  # or inner-dev, final
    model_id: str | None = None
    max_questions: int | None = None
    hop_level: bool = True
    hop_level_questions: int | None = 1000
    beam_width: int = 32
    active: int = 32
    hints: HintProvider | None = None
    hint_beta: float = 0.0
    boot: int = 1000
    draws: int = 500  # pooled re-splits
    delta: float | None = DEFAULT_DELTA
    linking: str | None = None  # None: as `cpr calibrate` decides (auto)
    variants: bool = True  # CPR's one-change-at-a-time rows
    seed: int = 0
    scope: str | None = None
    workers: int = field(default_factory=default_workers)
    notes: list[str] = field(default_factory=list)
    temperature: float | None = None  # CPR scored at this T, not its fitted one (experiments)

    @property
    def hint_mode(self) -> str:
        return self.hints.mode if self.hints is not None and self.hint_beta else "none"


@dataclass
class EvalOutput:
    deployed: DeployedResults
    model_id: str
    models: dict[str, str]  # method -> the model id that scored it
    files: dict[str, Path]


CPR_ONLY = ("negatives", "retrieval_negatives", "random_negatives")  # Abl.2 ignores them
SHARES = ("calibration_ids", "inner_dev_ids", "training_ids")


def _ablation_settings(meta: dict) -> dict:
    out = {k: v for k, v in meta["settings"].items() if k not in (*CPR_ONLY, "scope")}
    return {**out, "scope": meta.get("scope", GRAPH)}


def _abl2(store: GraphStore, cpr: dict, say: Callable[[str], None]) -> str:
    """An Abl.2 model on CPR's exact question shares (checked, loudly), else a new one."""
    found = records.latest_model(
        store, cpr["dataset"], negatives="random", hops_filter=cpr.get("hops_filter") or 0
    )
    meta = _meta_or_none(found["id"]) if found else None
    same = meta is not None and all(meta.get(k) == cpr.get(k) for k in SHARES)
    if not same or _ablation_settings(meta) != _ablation_settings(cpr):
        say("Abl.2: no w/o-PUCT model on CPR's question shares; training one now")
        s = replace(TrainSettings(**cpr["settings"]), negatives="random", scope=cpr.get("scope"))
        meta = _meta_or_none(train(store, s).model_id) or {}
    differ = [k for k in SHARES if meta.get(k) != cpr.get(k)]
    if differ:
        raise CprError(
            f"Abl.2's {', '.join(differ)} differ from CPR's: it could have trained on CPR's "
            "calibration or inner dev questions; refusing to compare"
        )
    return meta["model_id"]


def _meta_or_none(model_id: str) -> dict | None:
    try:
        return {**read_config(model_id)["meta"], "model_id": model_id}
    except CprError:
        return None


def _scorer(store, method: str, meta: dict, say) -> tuple[PathScorer, str]:
    encoder = shared_encoder()  # one ONNX session for every method
    if method == "cpr":
        return load_scorer(meta["model_id"], encoder), meta["model_id"]
    if method == "abl1":
        scorer = PathScorer(encoder, records.relation_text(store, meta["dataset"]))
        return scorer, scorer.model_id
    model_id = _abl2(store, meta, say)
    return load_scorer(model_id, encoder), model_id


@dataclass(kw_only=True)  # built by keyword: many fields
class Searched:
    """Every method's candidate tables for the calibration and test questions, before any
    threshold: what `run` calibrates and measures (experiments read them here too)."""

    model_id: str
    meta: dict
    cal_qs: list[Question]
    test_qs: list[Question]
    settings: RetrievalSettings  # its scope is the one searched
    cal: dict[str, CandidateTable]  # method name -> table
    test: dict[str, CandidateTable]
    variants: list[Variant]  # what `run` reports, CPR as it ships first
    population: dict
    used: dict[str, str]  # method name -> the model id that scored it
    notes: list[str]


def searched(
    store: GraphStore,
    s: EvalSettings,
    say: Callable[[str], None] = print,
    progress: Progress | None = None,
) -> Searched:
    """Search and score both question sets with every method of `s`."""
    model_id = resolve_model(store, s.dataset, s.model_id, s.hops or records.ALL_HOPS)
    meta = {**read_config(model_id)["meta"], "model_id": model_id}
    cal_qs, test_qs, notes = et.question_sets(
        store, s.dataset, s.split, meta, s.max_questions, s.seed
    )
    scope = resolve_scope(store, s.dataset, s.scope or meta.get("scope"))
    settings = RetrievalSettings(
        hops=meta["hops"],
        beam_width=s.beam_width,
        active=s.active,
        hint_mode=s.hint_mode,
        hint_beta=s.hint_beta if s.hint_mode != "none" else 0.0,
        hint_prompt=s.hints.prompt if s.hints is not None and s.hint_mode != "none" else "",
        scope=scope,
        topic_answers=records.topic_answers(store, s.dataset),
    )
    graph = fingerprint.current(store, s.dataset)
    inputs = et.search_inputs(store, s.dataset, cal_qs, test_qs, s.linking, graph)
    notes.append(
        f"topic entities {inputs.mode} (text linking finds the gold topics for "
        f"{inputs.accuracy:.1%} of the calibration questions)"
    )
    step = progress or (lambda name, n: lambda: None)
    used, cal_t, test_t, specs = {}, {}, {}, {}
    everyone = cal_qs + test_qs
    for method in s.methods:
        name = METHODS[method]
        scorer, used[name] = _scorer(store, method, meta, say)
        scorer.questions([m for q in everyone for _, m in inputs.choices[q.id]])
        fit = Retriever(store, s.dataset, scorer, settings, s.hints)
        spec, how = score_spec(store, fit, meta if method == "cpr" else _fit_only(meta))
        if method == "cpr" and s.temperature is not None:
            spec, how = default_spec(s.temperature), "set by the evaluation"
        specs[name] = spec
        notes.append(f"{name}: score {spec['family']} at T = {spec['T']:.4g} ({how})")
        fit.prefetch([(m, t, q.id) for q in everyone for t, m in inputs.choices[q.id] if t])
        tick = step(name, len(everyone))
        table = et.tables(
            store, s.dataset, scorer, settings, spec, everyone, inputs, s.hints, s.workers, tick
        )
        cal_t[name], test_t[name] = (
            table.subset(range(len(cal_qs))),
            table.subset(range(len(cal_qs), len(everyone))),
        )
    hop_counts = sorted({q.hops for q in cal_qs if q.hops is not None})
    return Searched(
        model_id=model_id,
        meta=meta,
        cal_qs=cal_qs,
        test_qs=test_qs,
        settings=settings,
        cal=cal_t,
        test=test_t,
        variants=_variants(s, specs),
        population={"n": len(cal_qs), "dataset": s.dataset, "hop_counts": hop_counts},
        used=used,
        notes=notes,
    )


def run(
    store: GraphStore,
    s: EvalSettings,
    say: Callable[[str], None] = print,
    progress: Progress | None = None,
    out_dir: str | Path | None = None,
) -> EvalOutput:
    x = searched(store, s, say, progress)
    hints = {m: s.hint_mode for m in x.cal}
    headline = deployed(x.cal, x.test, x.variants, s.alphas, x.population, s.boot, s.seed,
                        s.draws, hints)  # fmt: skip
    step = progress or (lambda name, n: lambda: None)
    if s.hop_level and "cpr" in s.methods:
        _hop_level_rows(store, s, headline, x.cal_qs, x.test_qs, x.meta, step, x.notes, x.settings)
    setting = (
        f"model {x.model_id} ({'every hop count' if not s.hops else f'{s.hops}-hop questions'}), "
        f"H = {x.meta['hops']}, B = {s.beam_width}, A = {s.active}, hints: {s.hint_mode}, "
        f"scope: {x.settings.scope}; models per method: "
        + ", ".join(f"{m} = {i}" for m, i in x.used.items())
    )
    headline.notes = [*s.notes, *x.notes, setting, *headline.notes]
    split = s.split + (f"-{s.hops}hop" if s.hops else "-all")
    out = Path(out_dir) if out_dir else results_dir(s.dataset, x.model_id, split)
    files = write_report(headline, out, title=f"{s.dataset} {split}")
    return EvalOutput(deployed=headline, model_id=x.model_id, models=x.used, files=files)


def _fit_only(meta: dict) -> dict:
    """A method without its own temperature fits one on CPR's training questions."""
    return {k: v for k, v in meta.items() if k != "temperature"}


def _variants(s: EvalSettings, specs: dict[str, dict]) -> list[Variant]:
    cpr = METHODS["cpr"]
    out: list[Variant] = []
    if cpr in specs:
        spec = specs[cpr]
        out.append(Variant(name=cpr, method=cpr, spec=spec, delta=s.delta, diagnose=True))
        if s.variants:
            out += [
                Variant(name=f"{cpr}, marginal (delta 0)", method=cpr, spec=spec, delta=None),
                Variant(
                    name=f"{cpr}, one threshold for all",
                    method=cpr,
                    spec=spec,
                    delta=s.delta,
                    grouped=False,
                ),
                Variant(
                    name=f"{cpr}, empty sets allowed",
                    method=cpr,
                    spec=spec,
                    delta=s.delta,
                    allow_empty=True,
                ),
                Variant(
                    name=f"{cpr}, the paper's sets (centred cost, marginal, one threshold, "
                    "may be empty)",
                    method=cpr,
                    spec=PREVIOUS,
                    delta=None,
                    allow_empty=True,
                    grouped=False,
                ),
            ]
        out += [
            Variant(
                name=f"{cpr}, answer recall (FNR)", method=cpr, spec=spec, delta=None, risk="fnr"
            ),
            Variant(
                name=f"top-k ({cpr})",
                method=cpr,
                spec={"family": "id_rank"},
                delta=None,
                grouped=False,
            ),
            Variant(
                name=f"top-k levels ({cpr})",
                method=cpr,
                spec={"family": "level"},
                delta=None,
                grouped=False,
            ),
        ]
    for name, spec in specs.items():
        if name != cpr:
            out.append(Variant(name=name, method=name, spec=spec, delta=s.delta, diagnose=True))
    return out


def _hop_level_rows(
    store: GraphStore,
    s: EvalSettings,
    headline: DeployedResults,
    cal_qs: list[Question],
    test_qs: list[Question],
    meta: dict,
    step: Progress,
    notes: list[str],
    settings: RetrievalSettings,
) -> None:
    """The UaG-style hop-level baselines as rows of the deployed report (evaluation/
    hoplevel.py runs them: per-hop V_sem thresholds from the calibration questions, open
    expansion). Their answers are the ends of the sequences kept at every hop 1..H (as
    TreeG's), so they run on mixed hop counts too; their rows carry ECR with its template
    interval, set sizes, and the run's own diagnostics (calibration questions with a
    canonical gold sequence, how often each cap bound, how often open expansion reached a
    gold answer), so a degenerate run says why."""
    if (s.scope or meta.get("scope")) == SUBGRAPH:
        notes.append("hop-level baselines search the whole graph: not run with --scope subgraph")
        return
    sample = test_qs
    if s.hop_level_questions and len(test_qs) > s.hop_level_questions:
        sample = random.Random(s.seed + 1).sample(test_qs, s.hop_level_questions)
        notes.append(
            f"hop-level rows: {len(sample)} of the {len(test_qs)} evaluation questions "
            "(seeded sample; open expansion is slow on hub entities)"
        )
    vsem = PathScorer(shared_encoder(), records.relation_text(store, s.dataset))

    def source(mine) -> CachedAdjacency:  # TreeG's own fan-out cap
        return CachedAdjacency(Neo4jNeighbours(mine, s.dataset, settings.fanout_cap))

    tick: Callable[[], None] = step("hop-level (open expansion)", len(cal_qs) + len(sample))
    out = run_hop_level(
        store,
        s.dataset,
        vsem,
        cal_qs,
        sample,
        meta["hops"],
        s.alphas,
        source(store),
        tick=tick,
        workers=s.workers,
        open_source=source,
        topic_answers=settings.topic_answers,
    )
    templates = np.unique([q.masked for q in sample], return_inverse=True)[1]
    rng = np.random.default_rng(s.seed)
    for variant, by_alpha in out["results"].items():
        headline.methods.append(variant)
        for a in s.alphas:
            r = by_alpha[a]
            hit = np.asarray(r["covered"], bool)
            size = np.asarray(r["size"], float)
            lo, hi = cluster_bootstrap(hit, templates, s.boot, rng)
            taus = {t + 1: float(x) for t, x in enumerate(r["taus"])}
            nan = math.nan
            metrics = {
                "ecr": float(hit.mean()),
                "apss": float(size.mean()),
                "size_median": float(np.median(size)),
                "size_p90": float(np.percentile(size, 90)),
                "empty_rate": float((size == 0).mean()),
                "recall": nan,
                "precision": nan,
                "f1": nan,
                "hits1": nan,
                "ecr_gold_1": nan,
                "n_gold_1": 0,
                "ecr_gold_2_5": nan,
                "n_gold_2_5": 0,
                "ecr_gold_gt5": nan,
                "n_gold_gt5": 0,
            }
            headline.rows.append(
                Row(
                    method=variant,
                    alpha=float(a),
                    risk="coverage",
                    tau=taus,
                    attainable=all(map(math.isfinite, taus.values())),
                    ecr=float(hit.mean()),
                    ecr_lo=lo,
                    ecr_hi=hi,
                    ecr_lo_cal=nan,
                    ecr_hi_cal=nan,
                    fnr=nan,
                    fnr_lo=nan,
                    fnr_hi=nan,
                    apss=float(size.mean()),
                    metrics=metrics,
                    by_hops={},
                    single={"ecr": nan, "apss": nan, "n": 0},
                    n_test=len(sample),
                )
            )
    notes.extend(out.get("notes", []))
    headline.hop_level = out.get("diagnostics", {})
