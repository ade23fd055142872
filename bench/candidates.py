"""The scorer on TreeG's own candidates: where each model ranks the right relation sequence.

    python bench/candidates.py [--hops 0] [--questions 500] [--models ID,ID,...]

On a seeded sample of the CPR model's INNER DEV split (training questions that neither
training nor calibration saw), every model runs TreeG (B = A = 32) and is measured on the
candidate sequences it retrieves:
- Hits@1 (the best answer is gold) and seq@1 (the best sequence reaches a gold answer);
- the rank of the best gold-reaching sequence among all candidates (median, mean of 1/rank);
- the top sequence's length against the question's hop count (shorter / longer) and the
  number of entities it reaches (broad sequences make large answer sets);
- per pair of models, the questions where the first model's top sequence is wrong and the
  second's right, and how often the first's is then shorter than the hop count.
Default models: the newest CPR and Abl.2 (w/o PUCT) models for the hop filter (0 = mixed);
ratios are against the last model listed.
"""

from __future__ import annotations

import argparse
import random
import statistics
from dataclasses import dataclass

from cpr_neo4j.graph import records
from cpr_neo4j.graph.neighbours import Neo4jNeighbours
from cpr_neo4j.graph.store import GraphStore
from cpr_neo4j.model.encoder import TextEncoder
from cpr_neo4j.model.store import load_scorer, read_config
from cpr_neo4j.search.base import CachedNeighbours
from cpr_neo4j.search.treeg import retrieve
from cpr_neo4j.training import questions as qsel

DATASET = "metaqa"


@dataclass
class Seen:
    hits1: bool
    seq1: bool
    gold_rank: float  # 1-based rank of the best gold-reaching sequence; inf if none
    top_len: int
    top_ends: int


def look(source, scorer, q: qsel.Question, depth: int) -> Seen:
    r = retrieve(source, scorer, scorer.question(q.masked), q.topics, depth)
    gold = set(q.answers)
    cands = sorted(r.candidates(), key=lambda c: (c.cost, c.path))
    ranked = r.ranked_answers()
    rank = next((i + 1 for i, c in enumerate(cands) if gold & c.ends.keys()), float("inf"))
    top = cands[0] if cands else None
    return Seen(
        bool(ranked) and ranked[0][0] in gold,
        rank == 1,
        rank,
        len(top.path) if top else 0,
        len(top.ends) if top else 0,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hops", type=int, default=0, help="Hop filter; 0 = mixed.")
    ap.add_argument("--questions", type=int, default=500)
    ap.add_argument("--models", help="Comma-separated model ids (default: CPR, Abl.2).")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    hop_filter = args.hops or records.ALL_HOPS
    with GraphStore() as store:
        if args.models:
            ids = args.models.split(",")
        else:
            ids = [
                m["id"]
                for neg in ("puct", "random")
                if (m := records.latest_model(store, DATASET, neg, hops_filter=hop_filter))
            ]
        metas = [read_config(i)["meta"] for i in ids]
        pool = qsel.load(
            store, DATASET, metas[0]["split"], args.hops or None, set(metas[0]["inner_dev_ids"])
        )
        qs = random.Random(args.seed).sample(pool, min(args.questions, len(pool)))
        source = CachedNeighbours(Neo4jNeighbours(store, DATASET))
        encoder = TextEncoder()
        seen: dict[str, list[Seen]] = {}
        for model_id, meta in zip(ids, metas, strict=True):
            scorer = load_scorer(model_id, encoder)
            scorer.questions([q.masked for q in qs])
            negatives = meta["settings"]["negatives"]
            extra = "+retrieval" if meta["settings"].get("retrieval_negatives") else ""
            extra += "+random" if meta["settings"].get("random_negatives") else ""
            name = f"{model_id} ({negatives}{extra})"
            seen[name] = [look(source, scorer, q, meta["hops"]) for q in qs]
    print(f"{len(qs)} inner-dev questions (hop filter {args.hops or 'mixed'})")
    print(
        "| model | Hits@1 | seq@1 | gold-seq rank median | MRR | top shorter | top longer "
        "| top ends (mean) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    hops = [q.hops or 0 for q in qs]
    base = list(seen)[-1]
    for name, s in seen.items():
        n = len(s)
        h1 = sum(x.hits1 for x in s) / n
        ratio = h1 / max(sum(x.hits1 for x in seen[base]) / n, 1e-9)
        print(
            f"| {name} | {h1:.3f} ({ratio:.2f}x) | {sum(x.seq1 for x in s) / n:.3f} | "
            f"{statistics.median(x.gold_rank for x in s):g} | "
            f"{sum(1 / x.gold_rank for x in s) / n:.3f} | "
            f"{sum(x.top_len < h for x, h in zip(s, hops, strict=True)) / n:.1%} | "
            f"{sum(x.top_len > h for x, h in zip(s, hops, strict=True)) / n:.1%} | "
            f"{statistics.mean(x.top_ends for x in s):.1f} |"
        )
    names = list(seen)
    for a in names:
        for b in names:
            if a == b:
                continue
            lost = [i for i in range(len(qs)) if not seen[a][i].seq1 and seen[b][i].seq1]
            short = sum(seen[a][i].top_len < hops[i] for i in lost)
            print(
                f"- top sequence wrong for {a}, right for {b}: {len(lost)} questions; "
                f"{short} of them with {a}'s top sequence shorter than the hop count"
            )


if __name__ == "__main__":
    main()
