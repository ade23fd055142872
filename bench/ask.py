"""Warm `cpr ask` latency on MetaQA without an LLM: TreeG + scorer + threshold per question.

    python bench/ask.py [--questions 200] [--naive-questions 20]

For 2-hop and 3-hop test questions: per-question latency p50/p95 (each question with a
cold neighbour source, as a fresh `cpr ask` has), Cypher round trips per question (one
per hop: must equal H), batch throughput, and ratios against two baselines measured in
the same run on the same questions, interleaved question by question so that load on the
machine hits both alike:

- `v1`: TreeG as it was before the columnar rewrite (frozen in tests/treeg_v1.py: one row
  per edge from cypher/neighbours.cypher, Python sets of entity ids);
- `naive`: the current TreeG querying one entity per round trip.

Uses the newest CPR model trained at that depth, else V_sem. bench/scale.py reuses
scorer_for, one and latencies on scaled copies of the graph.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from neo4j.exceptions import Neo4jError

from cpr_neo4j.conformal.threshold import answer_set, cut
from cpr_neo4j.graph import records
from cpr_neo4j.graph.neighbours import Neo4jNeighbours
from cpr_neo4j.graph.store import GraphStore
from cpr_neo4j.model.encoder import TextEncoder
from cpr_neo4j.model.scorer import PathScorer
from cpr_neo4j.model.store import load_scorer
from cpr_neo4j.search.adjacency_cache import ANSWER_CACHE_ENTITIES, CachedAdjacency
from cpr_neo4j.search.answers import answer_columns
from cpr_neo4j.search.treeg import Retrieval, retrieve, retrieve_naive
from cpr_neo4j.training import questions as qsel

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.treeg_v1 import NeighboursV1, retrieve_v1  # noqa: E402

DATASET = "metaqa"


# --- the benchmark ---

Run = Callable[..., Retrieval]
VARIANTS: dict[str, tuple[type, Run]] = {
    "new": (Neo4jNeighbours, retrieve),
    "v1": (NeighboursV1, retrieve_v1),
    "naive": (Neo4jNeighbours, retrieve_naive),
}


def scorer_for(
    store: GraphStore, hops: int, encoder: TextEncoder, dataset: str = DATASET
) -> tuple[PathScorer, str]:
    model = records.latest_model(store, dataset, negatives="puct", hops_filter=hops)
    if model:
        return load_scorer(model["id"], encoder), model["id"]
    return PathScorer(encoder, records.relation_text(store, dataset)), "V_sem (no model trained)"


def one(
    store: GraphStore,
    scorer: PathScorer,
    q: qsel.Question,
    hops: int,
    variant: str,
    dataset: str = DATASET,
    keep: dict[str, dict[str, float]] | None = None,
) -> tuple[float, int]:
    """(latency ms, round trips) of one question with a cold neighbour source; `keep` gets
    its candidates' costs by question id."""
    cls, fn = VARIANTS[variant]
    source = cls(store, dataset)
    began = time.perf_counter()
    r = fn(source, scorer, scorer.question(q.masked), q.topics, hops)
    costs = r.answer_costs()
    answer_set(costs, 0.0)
    ms = (time.perf_counter() - began) * 1000
    if keep is not None:
        keep[q.id] = dict(costs)
    return ms, source.round_trips


ASK_T = 1.0  # ask_like's surprisal temperature (a calibration fits its own)


def ask_like(
    store: GraphStore,
    scorer: PathScorer,
    q: qsel.Question,
    hops: int,
    dataset: str = DATASET,
    keep: dict[str, dict[str, float]] | None = None,
    sizes: list[int] | None = None,
) -> tuple[float, int]:
    """(latency ms, round trips) of what `cpr ask` does with a linked question (stages/ask.py
    `search` and `_cut`), with a cold neighbour source: TreeG naming only the answers shown
    (defer_names), the default score (surprisal, here at ASK_T), the set at its top level (the
    smallest set any threshold gives: sets are never empty), ranked by (score, cost, id), and
    each answer's best path. Not timed: linking, the threshold lookup, the :Ask write, and
    `keep` (every answer's cost, for comparisons). `sizes` gets each set's size."""
    source = Neo4jNeighbours(store, dataset)
    began = time.perf_counter()
    r = retrieve(source, scorer, scorer.question(q.masked), q.topics, hops, defer_names=True)
    cols = answer_columns(r, ASK_T)
    scores = cols.surprisal
    shown = cols.ordered(np.flatnonzero(cut(scores, -np.inf)), scores).tolist()
    for k in shown:
        r.witness(cols.id_at(k), None if cols.nodes is None else int(cols.nodes[k]))
    ms = (time.perf_counter() - began) * 1000
    trips = source.round_trips
    if keep is not None:
        keep[q.id] = r.answer_costs()
    if sizes is not None:
        sizes.append(len(shown))
    return ms, trips


def latencies(
    store: GraphStore,
    scorer: PathScorer,
    qs: list[qsel.Question],
    hops: int,
    dataset: str = DATASET,
    warmup: int = 10,
    failed: list[tuple[str, str]] | None = None,
    keep: dict[str, dict[str, float]] | None = None,
    ask: bool = False,
    sizes: list[int] | None = None,
) -> list[float]:
    """Per-question latency (ms) of the current TreeG + answer set, after `warmup` questions
    (path embeddings, query plans, JIT); question embeddings are cached first, as here.
    With `failed`, a question whose query the server refuses (e.g. out of transaction memory)
    is listed there as (id, error code) instead of ending the run. `keep`: each question's
    candidates, as one() keeps them. ask: time `ask_like` (what `cpr ask` does) instead."""
    scorer.questions([q.masked for q in qs])
    out = []
    for k, q in enumerate([*qs[:warmup], *qs]):
        mine = keep if k >= warmup else None
        try:
            if ask:
                counted = sizes if k >= warmup else None
                ms = ask_like(store, scorer, q, hops, dataset, mine, counted)[0]
            else:
                ms = one(store, scorer, q, hops, "new", dataset, mine)[0]
        except Neo4jError as exc:
            if failed is None:
                raise
            if k >= warmup:
                failed.append((q.id, str(exc.code)))
            continue
        if k >= warmup:
            out.append(ms)
    return out


def in_session(
    store: GraphStore,
    scorer: PathScorer,
    warm: list[qsel.Question],
    qs: list[qsel.Question],
    hops: int,
    dataset: str = DATASET,
) -> tuple[list[float], list[int], int]:
    """Per-question latency (ms) and round trips with ONE neighbour cache kept across
    questions, answered one at a time, after the `warm` questions: (ms, trips, entities)."""
    source = CachedAdjacency(Neo4jNeighbours(store, dataset), max_entities=ANSWER_CACHE_ENTITIES)
    lat, trips = [], []
    for k, q in enumerate([*warm, *qs]):
        before, began = source.round_trips, time.perf_counter()
        r = retrieve(source, scorer, scorer.question(q.masked), q.topics, hops)
        answer_set(r.answer_costs(), 0.0)
        if k >= len(warm):
            lat.append((time.perf_counter() - began) * 1000)
            trips.append(source.round_trips - before)
    return lat, trips, source.entities


def pct(values: list[float], p: float) -> float:
    return float(np.percentile(values, p))


def target(ms: list[float]) -> str:
    """Issue 13's latency goal: p50 < 50 ms and p95 < 150 ms."""
    return "met" if pct(ms, 50) < 50 and pct(ms, 95) < 150 else "NOT met"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--questions", type=int, default=200)
    ap.add_argument("--naive-questions", type=int, default=20)
    ap.add_argument("--hops", default="2,3")
    ap.add_argument(
        "--session-warmup",
        type=int,
        default=300,
        help="other test questions answered first in the session measurement",
    )
    ap.add_argument(
        "--torch-threads",
        type=int,
        help="torch.set_num_threads for the scorer (on a loaded 2-core machine 1 was ~5x "
        "faster per scoring call than the default: threads fight over the cores)",
    )
    args = ap.parse_args()
    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)
    print(f"torch threads: {torch.get_num_threads()}")
    rust = importlib.util.find_spec("neo4j._rust") is not None
    print(f"neo4j driver {'with' if rust else 'WITHOUT'} the Rust extension (neo4j-rust-ext)")
    encoder = TextEncoder()
    with GraphStore() as store:
        for hops in (int(h) for h in args.hops.split(",")):
            qs = qsel.load(store, DATASET, "test", hops)[: args.questions]
            scorer, name = scorer_for(store, hops, encoder)
            scorer.questions([q.masked for q in qs])
            for q in qs[:10]:  # warm-up: path embeddings, query plans, JIT
                one(store, scorer, q, hops, "new"), one(store, scorer, q, hops, "v1")
            lat: dict[str, list[float]] = {"new": [], "v1": [], "naive": []}
            trips: dict[str, list[int]] = {"new": [], "v1": [], "naive": []}
            for k, q in enumerate(qs):  # interleaved, alternating which goes first
                order = ["new", "v1"] if k % 2 == 0 else ["v1", "new"]
                if k < args.naive_questions:
                    order.append("naive")
                for v in order:
                    ms, rt = one(store, scorer, q, hops, v)
                    lat[v].append(ms)
                    trips[v].append(rt)
            began = time.perf_counter()
            for q in qs:
                one(store, scorer, q, hops, "new")
            qps = len(qs) / (time.perf_counter() - began)
            print(f"MetaQA {hops}-hop test, {len(qs)} questions, scorer {name}")
            for v in ("new", "v1"):
                print(
                    f"  {v:>5}: p50 {pct(lat[v], 50):.1f} ms, p95 {pct(lat[v], 95):.1f} ms, "
                    f"mean {statistics.mean(lat[v]):.1f} ms, round trips/question "
                    f"{statistics.mean(trips[v]):.2f} (H = {hops})"
                )
            print(f"  new, back to back: {qps:.1f} questions/s")
            print(
                f"  ratio v1/new: p50 {pct(lat['v1'], 50) / pct(lat['new'], 50):.1f}x, "
                f"p95 {pct(lat['v1'], 95) / pct(lat['new'], 95):.1f}x"
            )
            if lat["naive"]:
                n = len(lat["naive"])
                print(
                    f"  naive (one entity per round trip), first {n} questions: p50 "
                    f"{pct(lat['naive'], 50):.1f} ms, round trips/question "
                    f"{statistics.mean(trips['naive']):.1f}; naive/new p50 on the same "
                    f"questions {pct(lat['naive'], 50) / pct(lat['new'][:n], 50):.1f}x"
                )
            print(f"  target p50 < 50 ms and p95 < 150 ms: {target(lat['new'])}")
            warm = qsel.load(store, DATASET, "test", hops)[len(qs) : len(qs) + args.session_warmup]
            scorer.questions([q.masked for q in warm])
            ses, ses_trips, cached = in_session(store, scorer, warm, qs, hops)
            print(
                f"  in a session (one neighbour cache across questions, as `cpr serve` and "
                f"`cpr ask --file` keep; warmed on {len(warm)} other test questions, "
                f"{cached:,} entities cached): p50 {pct(ses, 50):.1f} ms, p95 "
                f"{pct(ses, 95):.1f} ms, round trips/question {statistics.mean(ses_trips):.2f}; "
                f"per-question source / session p50 {pct(lat['new'], 50) / pct(ses, 50):.1f}x"
            )
            print(f"  in a session, target p50 < 50 / p95 < 150 ms: {target(ses)}")


if __name__ == "__main__":
    main()
