"""The UaG-style hop-level baselines as rows of the deployed report (stages/hoplevel.py
runs them: per-hop V_sem thresholds from the calibration questions, open expansion).

Their answers are the ends of the sequences kept at every hop 1..H (as TreeG's), so they
run on mixed hop counts too; their rows carry ECR with its template interval, set sizes,
and the run's own diagnostics (calibration questions with a canonical gold sequence, how
often each cap bound, how often open expansion reached a gold answer), so a degenerate
run says why.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable

import numpy as np

from cpr_neo4j.conformal.deployed import DeployedResults, Row
from cpr_neo4j.conformal.diagnostics import cluster_bootstrap
from cpr_neo4j.graph import records
from cpr_neo4j.graph.neighbours import Neo4jNeighbours
from cpr_neo4j.graph.subgraphs import SUBGRAPH
from cpr_neo4j.model.encoder import shared_encoder
from cpr_neo4j.model.scorer import PathScorer
from cpr_neo4j.search.adjacency_cache import CachedAdjacency
from cpr_neo4j.stages.hoplevel import run_hop_level


def hop_level_rows(
    store, s, headline: DeployedResults, cal_qs, test_qs, meta, step, notes, settings
):
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
        store, s.dataset, vsem, cal_qs, sample, meta["hops"], s.alphas, source(store),
        tick=tick, workers=s.workers, open_source=source, topic_answers=settings.topic_answers,
    )  # fmt: skip
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
                "ecr": float(hit.mean()), "apss": float(size.mean()),
                "size_median": float(np.median(size)), "size_p90": float(np.percentile(size, 90)),
                "empty_rate": float((size == 0).mean()), "recall": nan, "precision": nan,
                "f1": nan, "hits1": nan, "ecr_gold_1": nan, "n_gold_1": 0,
                "ecr_gold_2_5": nan, "n_gold_2_5": 0, "ecr_gold_gt5": nan, "n_gold_gt5": 0,
            }  # fmt: skip
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
