"""Warm `cpr ask` latency on MetaQA without an LLM: TreeG + scorer + threshold per question.

    python bench/ask.py [--questions 200] [--naive-questions 40]

For 2-hop and 3-hop test questions: per-question latency p50/p95 (each question with a
cold neighbour source, as a fresh `cpr ask` has), Cypher round trips per question (one
per hop: must equal H), batch throughput (questions one after another, question
embeddings batched up front), and the ratio against a naive variant that queries one
entity per round trip. Uses the newest CPR model trained at that depth, else V_sem.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from cpr_neo4j.conformal.threshold import answer_set
from cpr_neo4j.graph import records
from cpr_neo4j.graph.neighbours import Neo4jNeighbours
from cpr_neo4j.graph.store import GraphStore
from cpr_neo4j.model.encoder import TextEncoder
from cpr_neo4j.model.scorer import PathScorer
from cpr_neo4j.model.store import load_scorer
from cpr_neo4j.search.treeg import retrieve, retrieve_naive
from cpr_neo4j.stages import questions as qsel

DATASET = "metaqa"


def scorer_for(store: GraphStore, hops: int, encoder: TextEncoder) -> tuple[PathScorer, str]:
    model = records.latest_model(store, DATASET, negatives="puct", hops_filter=hops)
    if model:
        return load_scorer(model["id"], encoder), model["id"]
    return PathScorer(encoder, records.relation_text(store, DATASET)), "V_sem (no model trained)"


def timed(store, scorer, qs, hops, fn) -> tuple[list[float], list[int]]:
    lat, trips = [], []
    for q in qs:
        source = Neo4jNeighbours(store, DATASET)  # cold: no neighbours cached across questions
        began = time.perf_counter()
        r = fn(source, scorer, scorer.question(q.masked), q.topics, hops)
        answer_set(r.answer_costs(), 0.0)
        lat.append((time.perf_counter() - began) * 1000)
        trips.append(source.round_trips)
    return lat, trips


def pct(values: list[float], p: float) -> float:
    return float(np.percentile(values, p))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--questions", type=int, default=200)
    ap.add_argument("--naive-questions", type=int, default=40)
    args = ap.parse_args()
    encoder = TextEncoder()
    with GraphStore() as store:
        for hops in (2, 3):
            qs = qsel.load(store, DATASET, "test", hops)[: args.questions]
            scorer, name = scorer_for(store, hops, encoder)
            scorer.questions([q.masked for q in qs])
            timed(store, scorer, qs[:10], hops, retrieve)  # warm-up: caches, JIT, plans
            lat, trips = timed(store, scorer, qs, hops, retrieve)
            began = time.perf_counter()
            timed(store, scorer, qs, hops, retrieve)
            qps = len(qs) / (time.perf_counter() - began)
            nlat, ntrips = timed(store, scorer, qs[: args.naive_questions], hops, retrieve_naive)
            blat = lat[: args.naive_questions]
            print(f"MetaQA {hops}-hop test, {len(qs)} questions, scorer {name}")
            print(
                f"  batched TreeG: p50 {pct(lat, 50):.1f} ms, p95 {pct(lat, 95):.1f} ms, "
                f"{qps:.1f} questions/s, round trips/question "
                f"{statistics.mean(trips):.2f} (H = {hops})"
            )
            print(
                f"  naive (one entity per round trip), first {len(nlat)} questions: "
                f"p50 {pct(nlat, 50):.1f} ms, round trips/question {statistics.mean(ntrips):.1f}"
            )
            print(
                f"  ratio naive/batched p50 on the same questions: "
                f"{pct(nlat, 50) / pct(blat, 50):.1f}x; mean latency "
                f"{statistics.mean(nlat) / statistics.mean(blat):.1f}x"
            )
            if hops == 2:
                print(
                    f"  target p50 < 50 ms for 2-hop: {'met' if pct(lat, 50) < 50 else 'NOT met'}"
                )


if __name__ == "__main__":
    main()
