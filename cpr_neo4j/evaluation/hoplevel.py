"""The UaG-style hop-level baseline: per-hop V_sem thresholds, answered by open expansion.

Built to be fair: the scorer is V_sem (no net; CPR's RCVNet was trained to rank prefixes
as wrong, which would cut hop-level frontiers unfairly), each hop's set decides the next
frontier (search/open_expansion.py), and calibration scores follow ONE canonical gold
sequence per question so the union bound holds (evaluation/hoplevel_thresholds.py). Gold
sequences are found through the SAME neighbour source as TreeG and open expansion
(graph/gold.py), of any length 1..H, and the answer set is the union of the ends of the
sequences kept at every hop: so the baseline runs on questions of any hop count <= H, as
CPR does.

Two variants share the calibration scores and ONE open expansion per test question, run
at the loosest FINITE thresholds over every variant and alpha; each (variant, alpha)
filters that run. A row whose thresholds are +inf (too few calibration questions have a
gold sequence for that alpha) is unattainable: its set would be every entity within H
hops, which is not computed (size NaN); it covers exactly the test questions whose gold
is reachable at all, which the gold search on the test questions tells. A tau_t of -inf
(most calibration gold branches ended before hop t) keeps no hop-t sequence: attainable.

Caps (`graph_caps`), sized to the graph: a hop can hold no more distinct sequences than
(step types)^H and fetch no more entities than the graph has, so those bounds never bind
and only the resource budgets below can. Every bind is counted (`diagnostics`), and so are
the questions whose search met a list cut by TreeG's neighbour fan-out cap.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, Protocol

import numpy as np

from cpr_neo4j.evaluation.hoplevel_thresholds import (
    Correction,
    HopRecord,
    apply,
    gold_scores,
    hop_thresholds,
    score_counts,
    widen,
)
from cpr_neo4j.graph import records
from cpr_neo4j.graph.gold import CutWatch, fanout_cap_of, gold_sequences
from cpr_neo4j.graph.store import GraphStore
from cpr_neo4j.search.base import NeighbourSource, RelPath
from cpr_neo4j.search.open_expansion import UNCAPPED, Caps, expand_open
from cpr_neo4j.stages.workers import Tick, interleave, run_shares, share_store
from cpr_neo4j.training.questions import Question

VARIANTS: dict[str, Correction] = {
    "UaG hop-level, Bonferroni (V_sem)": "bonferroni",
    "UaG hop-level, uncorrected (V_sem)": "none",
}
# Resource budgets per hop. 50k sequences cost one V_sem batch of 50k paths; 100k entities
# is one round trip of ~1M neighbour rows (MetaQA: 42,797 entities, 18 step types, so
# neither binds there up to H = 3).
SEQUENCE_BUDGET = 50_000
FRONTIER_BUDGET = 100_000
CAPS = ("sequences", "frontier", "fanout")  # the search's caps, and the neighbour fan-out cap


class VSemScorer(Protocol):
    """PathScorer's surface used here; v_sem ignores any net, so costs are V_sem whatever."""

    def questions(self, masked_texts: Sequence[str]) -> list[Any]: ...

    def v_sem(self, ctx: Any, paths: Sequence[RelPath]) -> np.ndarray: ...


class GoldScores(NamedTuple):
    scores: np.ndarray  # (n, H): S_t per question (-inf past its gold's length, +inf: none)
    lengths: list[int]  # the canonical gold sequence's length (0: none)
    bound: list[dict[str, int]]  # per question: the caps that bound its gold search


def graph_caps(store: GraphStore, dataset: str, hops: int) -> Caps:
    """min((2 x relations)^hops, SEQUENCE_BUDGET) sequences and min(entities,
    FRONTIER_BUDGET) fetched entities per hop, from the dataset's own statistics."""
    steps = 2 * sum(r["direction"] == "forward" for r in records.relations(store, dataset))
    info = store.read("dataset_info", dataset=dataset)
    entities = int((info[0]["d"].get("entities_source") if info else None) or FRONTIER_BUDGET)
    return Caps(
        sequences=max(1, min(max(steps, 1) ** hops, SEQUENCE_BUDGET)),
        frontier=max(1, min(entities, FRONTIER_BUDGET)),
    )


def calibration_scores(
    source: NeighbourSource,
    scorer: VSemScorer,
    questions: Sequence[Question],
    hops: int,
    topic_answers: bool = False,
    caps: Caps = UNCAPPED,
    tick: Callable[[], None] = lambda: None,
) -> GoldScores:
    """V_sem prefix costs of each question's canonical gold sequence
    (evaluation/hoplevel_thresholds.py)."""
    ctxs = scorer.questions([q.masked for q in questions])
    out = np.full((len(questions), hops), math.inf)
    lengths, bound = [], []
    for i, (q, ctx) in enumerate(zip(questions, ctxs, strict=True)):
        cost = lambda paths, ctx=ctx: scorer.v_sem(ctx, paths)  # noqa: E731
        found = gold_sequences(source, q.topics, q.answers, hops, topic_answers, caps, cost)
        seqs = [s for s, _ in found.sequences]
        if seqs:
            prefixes = sorted({s[:t] for s in seqs for t in range(1, len(s) + 1)})
            c = dict(zip(prefixes, np.asarray(cost(prefixes), dtype=float), strict=True))
            out[i] = gold_scores(
                ((s, [c[s[:t]] for t in range(1, len(s) + 1)]) for s in seqs), hops
            )
        lengths.append(int((out[i] > -math.inf).sum()) if seqs else 0)
        bound.append({**found.bound, "fanout": int(found.fanout_cut)})
        tick()
    return GoldScores(out, lengths, bound)


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
    caps: Caps | None = None,
    workers: int = 1,
    open_source: Callable[[GraphStore], NeighbourSource] | None = None,
    topic_answers: bool | None = None,
) -> dict[str, Any]:
    """results[variant][alpha] = {taus, covered, size, inexact, attainable}; diagnostics.

    `workers` processes share the questions (stages.workers); a forked one searches
    `open_source(its own store)` (without it, one process does all). caps: default
    `graph_caps`; topic_answers: default the dataset's convention (records.topic_answers).

    `inexact` counts the test questions whose safety cap may have changed that row's sets
    (the shared run is exact for those taus unless a cap bound below them).
    """
    if not alphas:
        raise ValueError("run_hop_level needs at least one alpha")
    workers = workers if open_source is not None else 1
    cycles = records.topic_answers(store, dataset) if topic_answers is None else topic_answers
    sized = caps is None
    caps = caps or graph_caps(store, dataset, hops)

    def src_of(share: int, mine: GraphStore) -> NeighbourSource:
        return source if share == 0 else open_source(mine)  # type: ignore[misc]

    def cal_share(share: int, shares: int, done: Tick) -> list[tuple]:
        with share_store(store, share) as mine:
            qs = cal_questions[share::shares]
            got = calibration_scores(
                src_of(share, mine), scorer_vsem, qs, hops, cycles, caps, lambda: done("")
            )
            return list(zip(got.scores, got.lengths, got.bound, strict=True))

    rows = interleave(run_shares(cal_share, workers, lambda _: tick()))
    cal = np.array([r[0] for r in rows], dtype=float).reshape(-1, hops)
    taus = {(v, a): hop_thresholds(cal, a, corr) for v, corr in VARIANTS.items() for a in alphas}
    finite = [t for t in taus.values() if not np.isposinf(t).any()]
    loosest = np.max(np.stack(finite), axis=0) if finite else None
    ctxs = scorer_vsem.questions([q.masked for q in test_questions])
    grid = list(taus.items())

    def test_share(share: int, shares: int, done: Tick) -> list[dict]:
        out = []
        with share_store(store, share) as mine:
            src = src_of(share, mine)
            for q, ctx in zip(test_questions[share::shares], ctxs[share::shares], strict=True):
                cost = lambda paths, ctx=ctx: scorer_vsem.v_sem(ctx, paths)  # noqa: E731
                gold = gold_sequences(src, q.topics, q.answers, hops, cycles, caps, cost)
                out.append(_test_row(src, cost, q, gold, loosest, grid, hops, caps, cycles))
                done("")
        return out

    tests = interleave(run_shares(test_share, workers, lambda _: tick()))
    m = len(tests)
    results: dict[str, dict[float, dict[str, Any]]] = {v: {} for v in VARIANTS}
    reachable = np.array([r["reachable"] for r in tests], dtype=bool)
    for k, ((v, a), t) in enumerate(grid):
        ok = not np.isposinf(t).any()
        covered = np.array([r["covered"][k] for r in tests], bool) if ok else reachable.copy()
        size = np.array([r["size"][k] for r in tests], float) if ok else np.full(m, math.nan)
        inexact = sum(not r["exact"][k] for r in tests) if ok else 0
        results[v][a] = {
            "taus": t.tolist(),
            "covered": covered.reshape(m),
            "size": size.reshape(m),
            "inexact": inexact,
            "attainable": ok,
        }
    diag = _diagnostics(rows, cal, tests, caps, loosest, hops)
    diag["caps"]["sized_to_graph"] = sized
    diag["caps"]["fanout"] = fanout_cap_of(source)[1]
    return {
        "results": results,
        "cal_scores": cal,
        "loosest_taus": None if loosest is None else loosest.tolist(),
        "cal_no_gold": diag["calibration"]["no_gold"],
        "capped": diag["test"]["capped"],
        "round_trips": sum(r["round_trips"] for r in tests),
        "notes": _notes(diag, hops),
        "diagnostics": diag,
    }


def _test_row(src, cost, q: Question, gold, loosest, grid, hops: int, caps: Caps, cycles: bool):
    """One test question reduced to numbers at once (survivors' end sets are not kept)."""
    n = len(grid)
    row: dict[str, Any] = {"reachable": bool(gold.sequences), "gold_bound": dict(gold.bound)}
    row.update(covered=[False] * n, size=[0] * n, exact=[True] * n, reached=None)
    row.update(bound=[None] * hops, fanout=False, round_trips=0)
    if loosest is None:
        return row
    watch = CutWatch(src)
    run = expand_open(watch, cost, q.topics, widen(loosest), caps, cycles)
    rec = HopRecord.of(((s.costs, s.ends) for s in run.every), hops, q.answers)
    for k, (_, t) in enumerate(grid):
        if not np.isposinf(t).any():
            covered, size = apply([rec], t)
            row["covered"][k], row["size"][k] = bool(covered[0]), int(size[0])
            row["exact"][k] = run.exact(widen(t))
    row["reached"] = any(not s.ends.isdisjoint(rec.gold) for s in run.every)
    row.update(bound=list(run.bound), fanout=watch.cut, round_trips=run.round_trips)
    return row


def _diagnostics(rows, cal: np.ndarray, tests: list[dict], caps: Caps, loosest, hops: int):
    """Why the rows look as they do: gold coverage of calibration, caps, reach of test."""
    lengths = [r[1] for r in rows]
    ran = [r for r in tests if r["reached"] is not None]
    reached = sum(bool(r["reached"]) for r in ran) if ran else None

    def share(k: int | None, n: int) -> float | None:
        return None if k is None or not n else k / n

    return {
        "caps": {"sequences": caps.sequences, "frontier": caps.frontier},
        "calibration": {
            "questions": len(rows),
            "with_gold": sum(n > 0 for n in lengths),
            "with_gold_share": share(sum(n > 0 for n in lengths), len(rows)),
            "no_gold": sum(n == 0 for n in lengths),
            "gold_length": {h: lengths.count(h) for h in range(1, hops + 1)},
            "per_hop": score_counts(cal),
            "cap_bound": {c: sum(r[2].get(c, 0) > 0 for r in rows) for c in CAPS},
        },
        "test": {
            "questions": len(tests),
            "gold_reachable": sum(r["reachable"] for r in tests),
            "gold_search_cap_bound": {
                c: sum(r["gold_bound"].get(c, 0) > 0 for r in tests) for c in CAPS[:2]
            },
            "expanded_at": None if loosest is None else loosest.tolist(),
            "reached_gold": reached,  # by the one open expansion, at the loosest finite taus
            "reached_share": share(reached, len(tests)),
            "capped": sum(any(b is not None for b in r["bound"]) for r in tests),
            "cap_bound": {
                c: [sum(r["bound"][t] == c for r in tests) for t in range(hops)] for c in CAPS[:2]
            },
            "fanout_cut": sum(r["fanout"] for r in tests),
        },
    }


def _notes(d: dict, hops: int) -> list[str]:
    """The report's sentences on the hop-level rows."""
    c, t, caps = d["calibration"], d["test"], d["caps"]
    lengths = ", ".join(f"{h} hop{'s' * (h > 1)}: {n}" for h, n in c["gold_length"].items())
    out = [
        f"hop-level: {c['with_gold']} of {c['questions']} calibration questions have a "
        f"canonical gold sequence within {hops} hops ({lengths}); the other "
        f"{c['no_gold']} score +inf at every hop",
        f"hop-level: gold reachable within {hops} hops through the neighbour source for "
        f"{t['gold_reachable']} of {t['questions']} test questions (what an unattainable "
        f"row covers)"
        + (
            f"; open expansion at the loosest finite thresholds reached a gold answer for "
            f"{t['reached_gold']}"
            if t["reached_gold"] is not None
            else "; no alpha is attainable, so open expansion was not run"
        ),
    ]
    cal_b = [f"{k} for {n}" for k, n in c["cap_bound"].items() if n and k != "fanout"]
    test_b = [f"{k} for {sum(n)}" for k, n in t["cap_bound"].items() if sum(n)]
    graph = ", sized to the graph" if caps.get("sized_to_graph") else ""
    out.append(
        f"hop-level safety caps ({caps['sequences']} sequences, {caps['frontier']} fetched "
        f"entities per hop{graph}) bound: calibration gold search "
        f"{', '.join(cal_b) or 'never'}; test open expansion {', '.join(test_b) or 'never'} "
        "(rows count the questions a bind may have changed as 'inexact')"
    )
    if caps.get("fanout") is not None:  # TreeG's cap, shared: why some gold is out of reach
        out.append(
            f"hop-level: the neighbour fan-out cap ({caps['fanout']} per entity, relation and "
            f"direction, as TreeG's) cut a list met by the gold search of "
            f"{c['cap_bound']['fanout']} calibration questions and by the open expansion of "
            f"{t['fanout_cut']} test questions"
        )
    return out
