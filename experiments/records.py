"""Dump every candidate answer of a model's question sets as CandidateTable .npz files.

    python experiments/records.py [--model ID | --hops H] [--sets cal,inner-dev,test,train]
                            [--max-test N] [--out DIR]

For experiments on score families, thresholds and metrics without re-running TreeG: one
TreeG run per question (gold topic entities, the model's settings, B = A = 32), each
question's answers as columns (search/answers.py), and the sequence-softmax surprisal
(-log mass) at a temperature fitted here on the model's held-out TRAINING questions
(never calibration, inner dev or test). Files: DIR/<model>/{train,cal,inner-dev,test}.npz.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cpr_neo4j.evaluation.table import CandidateTable, TableBuilder  # noqa: E402
from cpr_neo4j.graph import records  # noqa: E402
from cpr_neo4j.graph.neighbours import Neo4jNeighbours  # noqa: E402
from cpr_neo4j.graph.store import GraphStore  # noqa: E402
from cpr_neo4j.model.store import load_scorer, read_config  # noqa: E402
from cpr_neo4j.search.adjacency_cache import CachedAdjacency  # noqa: E402
from cpr_neo4j.search.answers import answer_columns  # noqa: E402
from cpr_neo4j.stages.retrieval import RetrievalSettings, Retriever  # noqa: E402
from cpr_neo4j.stages.scoring import fit_temperature  # noqa: E402
from cpr_neo4j.stages.workers import interleave, run_shares, share_store  # noqa: E402
from cpr_neo4j.training import questions as qsel  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="metaqa")
    ap.add_argument("--model")
    ap.add_argument("--hops", type=int, default=0, help="0: the every-hop-count model")
    ap.add_argument("--sets", default="cal,inner-dev,test")
    ap.add_argument("--max-test", type=int, default=0, help="0: the whole test split")
    ap.add_argument("--train-questions", type=int, default=400)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", default="/work/exp")
    args = ap.parse_args()
    with GraphStore() as store:
        model = (
            args.model
            or records.latest_model(store, args.dataset, negatives="puct", hops_filter=args.hops)[
                "id"
            ]
        )
        meta = read_config(model)["meta"]
        scorer = load_scorer(model)
        settings = RetrievalSettings(hops=meta["hops"])
        hops = meta.get("hops_filter")
        split = meta["split"]
        sets = {
            "cal": qsel.load(store, args.dataset, split, hops, set(meta["calibration_ids"])),
            "inner-dev": qsel.load(store, args.dataset, split, hops, set(meta["inner_dev_ids"])),
            "train": qsel.load(store, args.dataset, split, hops, set(meta["training_ids"])),
        }
        wanted = args.sets.split(",")
        if "test" in wanted:
            test = qsel.load(store, args.dataset, "test", hops)
            if args.max_test and len(test) > args.max_test:
                test = random.Random(0).sample(test, args.max_test)
            sets["test"] = test

        def cached(mine: GraphStore) -> CachedAdjacency:  # one neighbour cache per process
            return CachedAdjacency(Neo4jNeighbours(mine, args.dataset, settings.fanout_cap))

        source = cached(store)
        retriever = Retriever(store, args.dataset, scorer, settings, None, source)
        train = random.Random(1).sample(
            sets["train"], min(args.train_questions, len(sets["train"]))
        )
        scorer.questions([q.masked for qs in sets.values() for q in qs])
        t0 = time.time()
        found = [retriever.run(q.masked, q.topics, q.text, q.id) for q in train]
        temp = fit_temperature(found, [set(q.answers) for q in train])
        print(
            f"temperature {temp:.4f} fitted on {len(train)} training questions "
            f"({time.time() - t0:.0f} s)"
        )
        out = Path(args.out) / model
        out.mkdir(parents=True, exist_ok=True)
        for name in wanted:
            qs = sets[name]
            t0 = time.time()

            def share(k: int, n: int, tick, qs=qs, temp=temp) -> CandidateTable:
                with share_store(store, k) as mine:
                    own = cached(mine) if k else source
                    r = Retriever(mine, args.dataset, scorer, settings, None, own)
                    b = TableBuilder(temp)
                    for q in qs[k::n]:
                        found = r.run(q.masked, q.topics, q.text, q.id)
                        cols = answer_columns(found, temp, settings.topic_answers)
                        b.add(
                            q.id,
                            q.hops,
                            q.masked,
                            frozenset(q.answers),
                            cols.ids,
                            cols.cost,
                            cols.surprisal,
                            cols.group,
                        )
                    return b.build()

            parts = run_shares(share, args.workers, lambda key: None)
            # share k took questions k, k + n, ...: put them back in question order
            pos = interleave([list(range(len(p.qids))) for p in parts])
            owner = interleave([[k] * len(p.qids) for k, p in enumerate(parts)])
            offset = np.cumsum([0] + [len(p.qids) for p in parts])
            table = CandidateTable.concat(parts).subset(
                [offset[o] + i for o, i in zip(owner, pos, strict=True)]
            )
            table.save(out / f"{name}.npz")
            print(
                f"{name}: {table.n} questions, {len(table.cost)} candidates, "
                f"{time.time() - t0:.0f} s -> {out / (name + '.npz')}"
            )


if __name__ == "__main__":
    main()
