"""Retrieval recall against the TreeG budget (B, A), and what each budget costs per question.

    python bench/recall.py [--hops 1,2,3,0] [--questions 200] [--budgets 8x8,16x16,32x32,64x64]

Recall = share of questions with a gold answer among TreeG's candidates. It caps coverage:
an alpha below 1 - recall on the calibration share is unattainable (tau = +inf). For each
hop setting (0 = mixed: every hop count, depth 3) the newest CPR model for it scores a
seeded sample of its calibration share and of the test split at each budget; every
question starts with a cold neighbour source, as a fresh `cpr ask` does. Ratios are
against the default budget B = A = 32 measured in the same run.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from cpr_neo4j.graph import records
from cpr_neo4j.graph.neighbours import Neo4jNeighbours
from cpr_neo4j.graph.store import GraphStore
from cpr_neo4j.model.encoder import TextEncoder
from cpr_neo4j.model.store import load_scorer, read_config
from cpr_neo4j.search.treeg import retrieve
from cpr_neo4j.stages import questions as qsel

DATASET = "metaqa"
DEFAULT = (32, 32)


def measure(store, scorer, qs, depth, beam, active) -> tuple[float, list[float]]:
    hits, ms = 0, []
    for q in qs:
        source = Neo4jNeighbours(store, DATASET)
        began = time.perf_counter()
        r = retrieve(source, scorer, scorer.question(q.masked), q.topics, depth, beam, active)
        ms.append((time.perf_counter() - began) * 1000)
        hits += bool(set(q.answers) & r.answer_costs().keys())
    return hits / max(len(qs), 1), ms


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hops", default="1,2,3,0", help="Hop filters; 0 = mixed (every hop).")
    ap.add_argument("--questions", type=int, default=200, help="Per split (seeded sample).")
    ap.add_argument("--budgets", default="8x8,16x16,32x32,64x64", help="BxA pairs.")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    budgets = [tuple(int(x) for x in b.split("x")) for b in args.budgets.split(",")]
    if DEFAULT not in budgets:
        budgets.append(DEFAULT)
    encoder = TextEncoder()
    print(
        "| hops | split | B | A | recall | recall - default | ms/q p50 | ms/q mean | time ratio |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    with GraphStore() as store:
        for h in (int(x) for x in args.hops.split(",")):
            model = records.latest_model(
                store, DATASET, negatives="puct", hops_filter=h or records.ALL_HOPS
            )
            if model is None:
                print(f"| {h or 'mixed'} | no CPR model: run `cpr train {DATASET}` first |")
                continue
            meta = read_config(model["id"])["meta"]
            scorer = load_scorer(model["id"], encoder)
            hop_filter = h or None
            cal = qsel.load(store, DATASET, meta["split"], hop_filter, set(meta["calibration_ids"]))
            test = qsel.load(store, DATASET, "test", hop_filter)
            rng = random.Random(args.seed)
            for split, pool in (("calibration share", cal), ("test", test)):
                qs = rng.sample(pool, min(args.questions, len(pool)))
                scorer.questions([q.masked for q in qs])
                got = {b: measure(store, scorer, qs, meta["hops"], *b) for b in budgets}
                base_recall, base_ms = got[DEFAULT][0], statistics.mean(got[DEFAULT][1])
                for (beam, active), (recall, ms) in got.items():
                    print(
                        f"| {h or 'mixed'} | {split} | {beam} | {active} | {recall:.3f} | "
                        f"{recall - base_recall:+.3f} | {statistics.median(ms):.0f} | "
                        f"{statistics.mean(ms):.0f} | {statistics.mean(ms) / base_ms:.2f}x |",
                        flush=True,
                    )


if __name__ == "__main__":
    main()
