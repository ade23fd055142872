"""`cpr eval`: retrieval + scoring once per question and method, then many random
calibration/test draws re-threshold the cached numbers (conformal.evaluate).

Question pool = the CPR model's held-out calibration questions + the test split (same hop
filter); none of them was seen in training, so they are exchangeable. Each draw takes as
many calibration questions as the model held out (the paper's calibration share) and
tests on the rest. Methods: CPR (RCVNet, PUCT pairs), Abl.1 (V_sem only), Abl.2 (RCVNet,
random negatives; trained here with CPR's settings when missing), plus the hop-level and
top-k baselines computed from CPR's retrievals.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from cpr_neo4j.conformal.evaluate import (
    EvalResults,
    QuestionRecord,
    evaluate,
    record_from_retrieval,
)
from cpr_neo4j.conformal.report import write_report
from cpr_neo4j.errors import CprError
from cpr_neo4j.graph import records
from cpr_neo4j.graph.neighbours import Neo4jNeighbours
from cpr_neo4j.graph.store import GraphStore
from cpr_neo4j.model.encoder import TextEncoder
from cpr_neo4j.model.scorer import PathScorer
from cpr_neo4j.model.store import load_scorer, read_config
from cpr_neo4j.search.base import CachedNeighbours
from cpr_neo4j.stages import questions as qsel
from cpr_neo4j.stages.retrieval import RetrievalSettings, Retriever, results_dir
from cpr_neo4j.stages.train import TrainSettings, train

METHODS = {"cpr": "CPR", "abl1": "Abl.1 (V_sem)", "abl2": "Abl.2 (random neg.)"}
MARGIN = "CPR, margin score"


def margin_record(rec: QuestionRecord) -> QuestionRecord:
    """CPR's costs minus the question's best cost: S(q) = V'(gold) - min V'.

    Still a valid conformal score (a fixed function of the question's candidates), and
    comparable across questions whose cost levels differ; ties at 0 (gold ranked first)
    make its sets coarse. Reported beside CPR, not used by `cpr ask`.
    """
    best = min(rec.answer_costs.values(), default=0.0)
    costs = {a: c - best for a, c in rec.answer_costs.items()}
    return QuestionRecord(rec.qid, rec.gold, costs, rec.top, None)


@dataclass
class EvalSettings:
    dataset: str
    alphas: tuple[float, ...] = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
    repeats: int = 20
    methods: tuple[str, ...] = ("cpr", "abl1", "abl2")
    hops: int | None = None  # pick the CPR model trained at this depth
    split: str = "test"
    max_questions: int | None = None  # subsample the test split (seeded); None = all
    beam_width: int = 32
    active: int = 32
    seed: int = 0
    notes: list[str] = field(default_factory=list)


def _scorer(
    store: GraphStore,
    s: EvalSettings,
    method: str,
    cpr_meta: dict,
    encoder: TextEncoder,
    say: Callable[[str], None],
) -> PathScorer:
    if method == "cpr":
        return load_scorer(cpr_meta["model_id"], encoder)
    if method == "abl1":
        return PathScorer(encoder, records.relation_text(store, s.dataset))
    found = records.latest_model(store, s.dataset, negatives="random", hops=cpr_meta["hops"])
    # An Abl.2 model counts only if trained after CPR's, on the same calibration share.
    if (
        found
        and found["created"] >= cpr_meta["created"]
        and read_config(found["id"])["meta"]["calibration_ids"] == cpr_meta["calibration_ids"]
    ):
        return load_scorer(found["id"], encoder)
    say("Abl.2: no random-negative model with CPR's calibration share; training one now")
    base = TrainSettings(**cpr_meta["settings"])
    result = train(store, replace(base, negatives="random"))
    s.notes.append(f"Abl.2 model {result.model_id} trained by this run")
    return load_scorer(result.model_id, encoder)


def pool(store: GraphStore, s: EvalSettings, meta: dict) -> tuple[list[qsel.Question], int]:
    """(questions, calibration size): held-out calibration questions + the test split."""
    cal = qsel.load(
        store, s.dataset, meta["split"], meta.get("hops_filter"), set(meta["calibration_ids"])
    )
    test = qsel.load(store, s.dataset, s.split, meta.get("hops_filter"))
    if not test:
        raise CprError(f"dataset {s.dataset!r} has no {s.split} questions to evaluate on")
    if s.max_questions and len(test) > s.max_questions:
        test = random.Random(s.seed).sample(test, s.max_questions)
        s.notes.append(f"test split subsampled to {s.max_questions} questions (seed {s.seed})")
    return cal + test, len(cal)


def run(
    store: GraphStore,
    s: EvalSettings,
    say: Callable[[str], None] = print,
    progress: Callable[[str, int], Callable[[], None]] | None = None,
) -> tuple[EvalResults, dict[str, Path]]:
    cpr = records.latest_model(store, s.dataset, negatives="puct", hops=s.hops)
    if not cpr:
        raise CprError(
            f"no CPR model for {s.dataset!r}"
            + (f" at {s.hops} hops" if s.hops else "")
            + f": run `cpr train {s.dataset}"
            + (f" --hops {s.hops}`" if s.hops else "`")
        )
    meta = {**read_config(cpr["id"])["meta"], "model_id": cpr["id"], "created": cpr["created"]}
    questions, n_cal = pool(store, s, meta)
    settings = RetrievalSettings(hops=meta["hops"], beam_width=s.beam_width, active=s.active)
    # One neighbour cache for the whole run: every method and question shares it.
    source = CachedNeighbours(Neo4jNeighbours(store, s.dataset, settings.fanout_cap))
    encoder = TextEncoder()
    by_method: dict[str, list[QuestionRecord]] = {}
    for method in s.methods:
        scorer = _scorer(store, s, method, meta, encoder, say)
        retriever = Retriever(store, s.dataset, scorer, settings, source=source)
        scorer.questions([q.masked for q in questions])
        tick = progress(METHODS[method], len(questions)) if progress else (lambda: None)
        recs = []
        for q in questions:
            rec = record_from_retrieval(q.id, q.answers, retriever.run(q.masked, q.topics))
            if method != "cpr":
                rec.sequences = None  # only CPR feeds the hop-level baseline
            recs.append(rec)
            tick()
        by_method[METHODS[method]] = recs
        if method == "cpr":
            by_method[MARGIN] = [margin_record(r) for r in recs]
    results = evaluate(
        by_method,
        s.alphas,
        repeats=s.repeats,
        cal_size=n_cal,
        seed=s.seed,
        baselines_from=METHODS["cpr"] if "cpr" in s.methods else None,
    )
    results.notes = [
        *s.notes,
        f"CPR model {cpr['id']}, H = {meta['hops']}, "
        f"B = {s.beam_width}, A = {s.active}, candidates = paths retained at every "
        f"hop 1..H",
        *results.notes,
    ]
    split = s.split + (f"-{meta['hops_filter']}hop" if meta.get("hops_filter") else "-all")
    files = write_report(results, results_dir(s.dataset, cpr["id"], split))
    return results, files
