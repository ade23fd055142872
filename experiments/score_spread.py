"""How far a path's cost moves when it is recomputed another way: the evidence for the
tolerance of the answer-set cut (conformal.threshold.TOLERANCE) and for the canary.

    python experiments/score_spread.py [--model ID] [--questions 200]

Takes the candidate paths TreeG scores for `--questions` calibration questions of the
model, then recomputes every (question, path) cost: with one thread instead of all cores,
one path per call instead of whole batches, a fresh encoder embedding one text per call
(no cache), and the torch backend on the CPU (what `--device cuda` runs, on a CPU). Prints
the largest absolute and relative (|a - b| / (1 + |a|)) difference of each against the
reference, the largest surprisal move it allows (2 d / T at the model's temperature) and
whether the canary (stages/canary.py) would serve or refuse it.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cpr_neo4j.conformal.threshold import TOLERANCE  # noqa: E402
from cpr_neo4j.graph import records  # noqa: E402
from cpr_neo4j.graph.store import GraphStore  # noqa: E402
from cpr_neo4j.model import threads  # noqa: E402
from cpr_neo4j.model.encoder import TextEncoder  # noqa: E402
from cpr_neo4j.model.store import load_scorer, read_config  # noqa: E402
from cpr_neo4j.stages.canary import score_per_cost  # noqa: E402
from cpr_neo4j.stages.retrieval import RetrievalSettings, Retriever  # noqa: E402
from cpr_neo4j.training import questions as qsel  # noqa: E402


class OneByOne(TextEncoder):
    """Embeds each text alone, never from a cache: another batch composition."""

    def encode(self, texts, cache: bool = True):
        return (
            np.concatenate([self._embedder.embed([t]) for t in texts])
            if texts
            else (np.zeros((0, 384), np.float32))
        )


def costs(scorer, pairs, one_call: bool) -> np.ndarray:
    if one_call:
        return np.concatenate([scorer.score(scorer.question(q), [p]) for q, p in pairs])
    out = []
    for q in dict.fromkeys(q for q, _ in pairs):
        paths = [p for qq, p in pairs if qq == q]
        out.append((q, scorer.score(scorer.question(q), paths)))
    order = {q: c for q, c in out}
    seen: dict[str, int] = {}
    flat = []
    for q, _ in pairs:
        i = seen.get(q, 0)
        flat.append(order[q][i])
        seen[q] = i + 1
    return np.array(flat)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="metaqa")
    ap.add_argument("--model")
    ap.add_argument("--questions", type=int, default=200)
    args = ap.parse_args()
    with GraphStore() as store:
        model = args.model or records.latest_model(store, args.dataset, negatives="puct")["id"]
        meta = read_config(model)["meta"]
        qs = qsel.load(store, args.dataset, meta["split"], meta.get("hops_filter"),
                       set(meta["calibration_ids"]))  # fmt: skip
        qs = random.Random(0).sample(qs, min(args.questions, len(qs)))
        ref = load_scorer(model)
        r = Retriever(store, args.dataset, ref, RetrievalSettings(hops=meta["hops"]))
        pairs = []
        for q in qs:
            for c in r.run(q.masked, q.topics, q.text, q.id).candidates():
                pairs.append((q.masked, c.path))
    print(f"model {model}: {len(pairs)} (question, path) pairs from {len(qs)} calibration "
          f"questions; tolerance {TOLERANCE:g} x (1 + |tau|)")  # fmt: skip
    base = costs(ref, pairs, one_call=False)
    ways = {}
    with threads.limited(1):
        ways["one thread"] = costs(load_scorer(model), pairs, one_call=False)
    ways["one path per call"] = costs(load_scorer(model), pairs, one_call=True)
    fresh = load_scorer(model, OneByOne())
    ways["each text embedded alone, no cache"] = costs(fresh, pairs, one_call=False)
    try:
        ways["torch backend (CPU)"] = costs(load_scorer(model, backend="torch"), pairs, False)
    except ImportError as exc:
        print(f"torch backend skipped: {exc}")
    t = meta.get("temperature")
    per_cost = score_per_cost({"family": "surprisal", "T": t} if t else None)
    print(f"score units: a cost change d moves a surprisal by at most 2 d / T, T = {t or 0.02}")
    print("| recomputed with | max abs diff | max relative diff | max score move | canary |")
    print("|---|---:|---:|---:|---|")
    for name, c in ways.items():
        d = np.abs(c.astype(float) - base.astype(float))
        rel = d / (1 + np.abs(base.astype(float)))
        move = d.max() * per_cost
        verdict = "serves" if move <= TOLERANCE else "refuses"
        print(f"| {name} | {d.max():.3g} | {rel.max():.3g} | {move:.3g} | {verdict} |")


if __name__ == "__main__":
    main()
