"""Linking decided by the search, measured with a trained model on questions outside its
calibration share and its training questions (inner dev: the dataset's dev split and the
training split's questions the model never used).

    python bench/linking_search.py webqsp-names --model rcv-... [--runners-up 0,1,3]

For each setting of linking/resolve.py RUNNERS_UP (readings beyond the tied ones that the
search also tries), prints the share of questions whose taken reading is the gold topic,
and retrieval recall (a gold answer among the candidates), as `cpr calibrate` and
`cpr ask` would link and search them."""

from __future__ import annotations

import argparse

from cpr_neo4j.config import Neo4jSettings
from cpr_neo4j.graph import fingerprint, records
from cpr_neo4j.graph.neighbours import Neo4jNeighbours
from cpr_neo4j.graph.store import GraphStore
from cpr_neo4j.linking import resolve
from cpr_neo4j.linking.readings import link_readings, search_readings
from cpr_neo4j.model.store import load_scorer, read_config
from cpr_neo4j.search.adjacency_cache import CachedAdjacency
from cpr_neo4j.stages.retrieval import RetrievalSettings, Retriever
from cpr_neo4j.stages.scoring import columns
from cpr_neo4j.training import questions as qsel


def issue_sample() -> list:
    import random
    from types import SimpleNamespace

    from cpr_neo4j.loaders.metaqa import load_metaqa

    rows = load_metaqa(splits=("test",)).questions.select("text", "topics", "answers").rows()
    random.seed(0)
    return [
        SimpleNamespace(id=None, text=t.replace("[", "").replace("]", ""), topics=tp, answers=an)
        for t, tp, an in random.sample(rows, 600)
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dataset")
    ap.add_argument("--model", required=True)
    ap.add_argument("--runners-up", default="0,1,3")
    ap.add_argument(
        "--issue-sample",
        action="store_true",
        help="metaqa-plain: the issue's 600 MetaQA test questions (random.seed(0) over the "
        "loader's test rows, as bench/linking.py), brackets removed, instead of inner dev",
    )
    ap.add_argument(
        "--every-question",
        action="store_true",
        help="every question of the dataset (train, dev and test), for the linking counts",
    )
    a = ap.parse_args()
    meta = read_config(a.model)["meta"]
    used = set(meta["calibration_ids"]) | set(meta["training_ids"])
    with GraphStore(Neo4jSettings.load()) as store:
        qs = [
            q
            for split in ("dev", meta["split"])
            for q in qsel.load(store, a.dataset, split, meta.get("hops_filter"))
            if q.id not in used
        ]
        if a.every_question:
            qs = [q for s in ("train", "dev", "test") for q in qsel.load(store, a.dataset, s, None)]
        if a.issue_sample:
            qs = issue_sample()
        ta = records.topic_answers(store, a.dataset)
        settings = RetrievalSettings(hops=meta["hops"], topic_answers=ta)
        source = CachedAdjacency(Neo4jNeighbours(store, a.dataset, settings.fanout_cap))
        retriever = Retriever(store, a.dataset, load_scorer(a.model), settings, None, source)
        graph = fingerprint.current(store, a.dataset)
        spec = {"family": "surprisal", "T": 1.0}
        print(f"{len(qs)} questions of {a.dataset} (model {a.model})")
        for k in [int(x) for x in a.runners_up.split(",")]:
            resolve.RUNNERS_UP = k
            gold = reached = refused = other_reaching = 0
            for q in qs:
                readings = link_readings(store, a.dataset, q.text, graph)
                refused += not readings
                found, (ids, _) = search_readings(retriever, readings, q)
                gold += set(ids) == set(q.topics)
                if found is not None:
                    hit = bool(set(columns(found, spec, ta).ids) & set(q.answers))
                    reached += hit
                    other_reaching += hit and set(ids) != set(q.topics)
            n = len(qs)
            other = n - gold - refused
            print(
                f"runners-up {k}: gold topic taken {gold} ({gold / n:.3f}), another {other} "
                f"({other_reaching} of them with a gold answer among the candidates), refused "
                f"{refused}; recall {reached / n:.3f}"
            )


if __name__ == "__main__":
    main()
