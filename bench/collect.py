"""PUCT collection speed on MetaQA in Neo4j: the neighbour cache shared across questions
(`cpr train`'s) against the per-question cache alone and against no cache.

    python bench/collect.py [--questions 60]

For 2-hop and 3-hop dev questions: questions/s and Cypher round trips per question of
PuctCollector (32 rollouts, gold paths by BFS through the same source), with the rows
cached across questions (search/adjacency_cache.py, what `cpr train` uses), with the
per-question cache only (the baseline before it), and with every lookup sent to Neo4j.
"""

from __future__ import annotations

import argparse
import time

from cpr_neo4j.graph import records
from cpr_neo4j.graph.neighbours import Neo4jNeighbours
from cpr_neo4j.graph.store import GraphStore
from cpr_neo4j.model.encoder import TextEncoder
from cpr_neo4j.model.scorer import PathScorer
from cpr_neo4j.search.adjacency_cache import CachedAdjacency
from cpr_neo4j.training import questions as qsel
from cpr_neo4j.training.puct import PuctCollector

DATASET = "metaqa"


def run(store, scorer, qs, hops, cache: bool, shared: bool = False) -> tuple[float, float, int]:
    source = Neo4jNeighbours(store, DATASET)
    col = PuctCollector(CachedAdjacency(source) if shared else source, scorer, seed=0, cache=cache)
    began = time.perf_counter()
    pairs = sum(len(col.collect(q.topics, q.answers, q.masked, hops, question_id=q.id)) for q in qs)
    took = time.perf_counter() - began
    return len(qs) / took, source.round_trips / len(qs), pairs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--questions", type=int, default=60)
    args = ap.parse_args()
    with GraphStore() as store:
        scorer = PathScorer(TextEncoder(), records.relation_text(store, DATASET))
        for hops in (2, 3):
            qs = qsel.load(store, DATASET, "dev", hops)[: args.questions]
            scorer.questions([q.masked for q in qs])
            run(store, scorer, qs, hops, True)  # warm-up: embeds every path the runs score
            sqps, strips, spairs = run(store, scorer, qs, hops, True, shared=True)
            qps, trips, pairs = run(store, scorer, qs, hops, True)
            nqps, ntrips, npairs = run(store, scorer, qs, hops, False)
            assert spairs == pairs == npairs, "no cache may change the pairs"
            print(f"MetaQA {hops}-hop dev, {len(qs)} questions, 32 rollouts each")
            for name, a, b in (
                ("shared cache (cpr train)", sqps, strips),
                ("per-question cache", qps, trips),
                ("no cache", nqps, ntrips),
            ):
                print(f"  {name:25s} {a:6.1f} questions/s, {b:6.1f} round trips/question")
            print(
                f"  ratio, shared against per-question cache: {sqps / qps:.1f}x faster, "
                f"{trips / max(strips, 1e-9):.1f}x fewer round trips"
            )


if __name__ == "__main__":
    main()
