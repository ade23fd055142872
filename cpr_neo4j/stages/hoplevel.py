"""The UaG-style hop-level baseline: per-hop V_sem thresholds, answered by open expansion.

Built to be fair: the scorer is V_sem (no net; CPR's RCVNet was trained to rank prefixes
as wrong, which would cut hop-level frontiers unfairly), each hop's set decides the next
frontier (search/open_expansion.py), and calibration scores follow ONE canonical gold
sequence per question so the union bound holds (conformal/hoplevel.py). Two variants share
the calibration scores and ONE open expansion per test question, run at the loosest
thresholds over every variant and alpha; each (variant, alpha) filters that run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

from cpr_neo4j.conformal.hoplevel import Correction, HopRecord, apply, gold_scores, hop_thresholds
from cpr_neo4j.graph.gold import gold_sequences
from cpr_neo4j.graph.store import GraphStore
from cpr_neo4j.search.base import NeighbourSource, RelPath
from cpr_neo4j.search.open_expansion import (
    MAX_FRONTIER,
    MAX_SEQUENCES,
    OpenExpansion,
    expand_open,
)
from cpr_neo4j.stages.questions import Question
from cpr_neo4j.stages.workers import Tick, interleave, run_shares, share_store

VARIANTS: dict[str, Correction] = {
    "UaG hop-level, Bonferroni (V_sem)": "bonferroni",
    "UaG hop-level, uncorrected (V_sem)": "none",
}


class VSemScorer(Protocol):
    """PathScorer's surface used here; v_sem ignores any net, so costs are V_sem whatever."""

    def questions(self, masked_texts: Sequence[str]) -> list[Any]: ...

    def v_sem(self, ctx: Any, paths: Sequence[RelPath]) -> np.ndarray: ...


def calibration_scores(
    store: GraphStore,
    dataset: str,
    scorer: VSemScorer,
    questions: Sequence[Question],
    hops: int,
    tick: Callable[[], None] = lambda: None,
) -> np.ndarray:
    """(n, H): V_sem prefix costs of each question's canonical gold sequence (+inf: none)."""
    ctxs = scorer.questions([q.masked for q in questions])
    out = np.full((len(questions), hops), np.inf)
    for i, (q, ctx) in enumerate(zip(questions, ctxs, strict=True)):
        seqs = [s for s, _ in gold_sequences(store, dataset, q.topics, q.answers, hops)]
        if seqs:
            prefixes = sorted({s[:t] for s in seqs for t in range(1, hops + 1)})
            cost = dict(zip(prefixes, np.asarray(scorer.v_sem(ctx, prefixes), float), strict=True))
            out[i] = gold_scores(
                ((s, [cost[s[:t]] for t in range(1, hops + 1)]) for s in seqs), hops
            )
        tick()
    return out


def run_hop_level(
    store: GraphStore,
    dataset: str,
    scorer_vsem: VSemScorer,
    cal_questions: Sequence[Question],
    test_questions: Sequence[Question],
    hops: int,
    alphas: Sequence[float],
    source: NeighbourSource,
    tick: Callable[[], None] = lambda: None,
    max_sequences: int = MAX_SEQUENCES,
    max_frontier: int = MAX_FRONTIER,
    workers: int = 1,
    open_source: Callable[[GraphStore], NeighbourSource] | None = None,
) -> dict[str, Any]:
    """results[variant][alpha] = {taus, covered, size, inexact}; plus counts and notes.

    `workers` processes share the questions (stages.workers); a forked one searches
    `open_source(its own store)` (without it, one process does all).

    `inexact` counts the test questions whose safety cap may have changed that row's sets
    (the shared run is exact for those taus unless a cap bound below them).
    """
    if not alphas:
        raise ValueError("run_hop_level needs at least one alpha")
    workers = workers if open_source is not None else 1

    def cal_share(share: int, shares: int, done: Tick) -> list[np.ndarray]:
        with share_store(store, share) as mine:
            qs = cal_questions[share::shares]
            return list(calibration_scores(mine, dataset, scorer_vsem, qs, hops, lambda: done("")))

    rows = interleave(run_shares(cal_share, workers, lambda _: tick()))
    cal = np.array(rows, dtype=float).reshape(-1, hops)
    taus = {(v, a): hop_thresholds(cal, a, corr) for v, corr in VARIANTS.items() for a in alphas}
    loosest = np.max(np.stack(list(taus.values())), axis=0)
    ctxs = scorer_vsem.questions([q.masked for q in test_questions])

    def test_share(share: int, shares: int, done: Tick) -> list[tuple[HopRecord, OpenExpansion]]:
        out = []
        with share_store(store, share) as mine:
            src = source if share == 0 else open_source(mine)  # type: ignore[misc]
            for q, ctx in zip(test_questions[share::shares], ctxs[share::shares], strict=True):
                run = expand_open(
                    src,
                    lambda paths, ctx=ctx: scorer_vsem.v_sem(ctx, paths),
                    q.topics,
                    loosest,
                    max_sequences,
                    max_frontier,
                )
                costs = np.array([s.costs for s in run.sequences], dtype=float).reshape(-1, hops)
                ends = [s.ends for s in run.sequences]
                out.append((HopRecord(costs, ends, frozenset(q.answers)), run))
                done("")
        return out

    pairs = interleave(run_shares(test_share, workers, lambda _: tick()))
    recs, runs = [r for r, _ in pairs], [run for _, run in pairs]
    results: dict[str, dict[float, dict[str, Any]]] = {v: {} for v in VARIANTS}
    for (v, a), t in taus.items():
        covered, size = apply(recs, t)
        inexact = sum(not r.exact(t) for r in runs)
        results[v][a] = {"taus": t.tolist(), "covered": covered, "size": size, "inexact": inexact}
    no_gold = int(np.isinf(cal[:, 0]).sum()) if len(cal) else 0
    capped = sum(r.capped for r in runs)
    notes = [
        f"hop-level: {no_gold} of {len(cal)} calibration questions have no gold relation "
        f"sequence of exactly {hops} hops (score +inf at every hop)",
    ]
    if capped:
        notes.append(
            f"hop-level: the open-expansion safety cap ({max_sequences} sequences, "
            f"{max_frontier} frontier entities per hop) bound for {capped} of "
            f"{len(runs)} test questions; rows count those it may have changed as 'inexact'"
        )
    return {
        "results": results,
        "cal_scores": cal,
        "loosest_taus": loosest.tolist(),
        "cal_no_gold": no_gold,
        "capped": capped,
        "round_trips": sum(r.round_trips for r in runs),
        "notes": notes,
    }
