"""Retrieval recall against the TreeG budget (B, A), beside what the graph allows at all.

    python bench/recall.py [--dataset metaqa] [--hops 1,2,3,0] [--questions 200]
        [--budgets 8x8,16x16,32x32,64x64] [--topic-answers dataset|on|off|both]

Recall = share of questions with a gold answer among TreeG's candidates. It caps coverage:
an alpha below 1 - recall on the calibration share is unattainable (tau = +inf). For each
hop setting (0 = mixed: every hop count, the model's depth) the newest CPR model for it
scores a seeded sample of its calibration share and of the test split at each budget;
every question starts with a cold neighbour source, as a fresh `cpr ask` does. Ratios are
against the default budget B = A = 32 measured in the same run.

"reachable" = share of the same questions with a gold answer within H hops of a topic at
all: a plain BFS over entities from the topics, through the same neighbour source and
fan-out cap, under the same topic-answer rule (a topic is never passed through, and is an
answer only with topic answers on, by an edge back onto it). It does not depend on the
budget: recall - reachable is what search loses, 1 - reachable what the graph (or the
topic-answer convention) loses.

--dataset: any ingested dataset with a CPR model (`cpr train NAME`); --hops defaults to the
hop settings that have one. --topic-answers: the dataset's recorded setting (the default),
a forced one, or both (off and on rows from the same model and questions).
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Sequence

from cpr_neo4j.graph import records
from cpr_neo4j.graph.neighbours import Neo4jNeighbours
from cpr_neo4j.graph.store import GraphStore
from cpr_neo4j.model.encoder import TextEncoder
from cpr_neo4j.model.store import load_scorer, read_config
from cpr_neo4j.search.base import NeighbourSource
from cpr_neo4j.search.treeg import retrieve
from cpr_neo4j.training import questions as qsel

DEFAULT = (32, 32)
HOP_SETTINGS = (1, 2, 3, 0)


def reachable(
    source: NeighbourSource,
    topics: Sequence[str],
    answers: set[str],
    hops: int,
    topic_answers: bool,
) -> bool:
    """Whether a gold answer lies within `hops` hops of a topic (BFS, one round trip per
    level). Shortest walks are simple, so this is "some simple path of at most H steps"."""
    tops = set(topics)
    goal = answers if topic_answers else answers - tops
    seen = set(tops)
    frontier = sorted(tops)
    for level in range(1, hops + 1):
        if not frontier:
            return False
        found = source.neighbours(frontier)
        nxt = set()
        for u in frontier:
            for _, v in found.get(u, ()):
                if v in goal:
                    return True  # a topic in `goal` is reached only by an edge back onto it
                if v not in seen and level < hops:
                    nxt.add(v)
        seen |= nxt
        frontier = sorted(nxt)
    return False


def measure(store, dataset, scorer, qs, depth, beam, active, topic_answers) -> tuple[float, list]:
    hits, ms = 0, []
    for q in qs:
        source = Neo4jNeighbours(store, dataset)
        began = time.perf_counter()
        r = retrieve(
            source,
            scorer,
            scorer.question(q.masked),
            q.topics,
            depth,
            beam,
            active,
            topic_answers=topic_answers,
        )
        ms.append((time.perf_counter() - began) * 1000)
        hits += bool(set(q.answers) & r.answer_costs().keys())
    return hits / max(len(qs), 1), ms


def reach_share(store, dataset, qs, depth, topic_answers) -> float:
    source = Neo4jNeighbours(store, dataset)  # same default fan-out cap as `measure`
    hit = sum(reachable(source, q.topics, set(q.answers), depth, topic_answers) for q in qs)
    return hit / max(len(qs), 1)


def _settings(store, dataset: str, mode: str) -> list[bool]:
    if mode == "both":
        return [False, True]
    if mode == "dataset":
        return [records.topic_answers(store, dataset)]
    return [mode == "on"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="metaqa")
    ap.add_argument("--hops", help="Hop filters, 0 = mixed (default: those with a CPR model).")
    ap.add_argument("--questions", type=int, default=200, help="Per split (seeded sample).")
    ap.add_argument("--budgets", default="8x8,16x16,32x32,64x64", help="BxA pairs.")
    ap.add_argument("--topic-answers", default="dataset", choices=["dataset", "on", "off", "both"])
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    dataset = args.dataset
    budgets = [tuple(int(x) for x in b.split("x")) for b in args.budgets.split(",")]
    if DEFAULT not in budgets:
        budgets.append(DEFAULT)
    encoder = TextEncoder()
    print(
        "| hops | split | topic answers | B | A | recall | recall - default | reachable "
        "| ms/q p50 | ms/q mean | time ratio |"
    )
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    with GraphStore() as store:
        settings = _settings(store, dataset, args.topic_answers)
        hop_list = [int(x) for x in args.hops.split(",")] if args.hops else HOP_SETTINGS
        models = {
            h: records.latest_model(
                store, dataset, negatives="puct", hops_filter=h or records.ALL_HOPS
            )
            for h in hop_list
        }
        if not args.hops:
            models = {h: m for h, m in models.items() if m is not None}
            if not models:
                print(f"| no CPR model for {dataset}: run `cpr train {dataset}` first |")
        for h, model in models.items():
            if model is None:
                print(f"| {h or 'mixed'} | no CPR model: run `cpr train {dataset}` first |")
                continue
            meta = read_config(model["id"])["meta"]
            scorer = load_scorer(model["id"], encoder)
            hop_filter = h or None
            cal = qsel.load(store, dataset, meta["split"], hop_filter, set(meta["calibration_ids"]))
            test = qsel.load(store, dataset, "test", hop_filter)
            rng = random.Random(args.seed)
            for split, pool in (("calibration share", cal), ("test", test)):
                qs = rng.sample(pool, min(args.questions, len(pool)))
                scorer.questions([q.masked for q in qs])
                for on in settings:
                    reach = reach_share(store, dataset, qs, meta["hops"], on)
                    got = {
                        b: measure(store, dataset, scorer, qs, meta["hops"], *b, on)
                        for b in budgets
                    }
                    base_recall, base_ms = got[DEFAULT][0], statistics.mean(got[DEFAULT][1])
                    for (beam, active), (recall, ms) in got.items():
                        print(
                            f"| {h or 'mixed'} | {split} (n={len(qs)}) | "
                            f"{'on' if on else 'off'} | {beam} | {active} | {recall:.3f} | "
                            f"{recall - base_recall:+.3f} | {reach:.3f} | "
                            f"{statistics.median(ms):.0f} | {statistics.mean(ms):.0f} | "
                            f"{statistics.mean(ms) / base_ms:.2f}x |",
                            flush=True,
                        )


if __name__ == "__main__":
    main()
