"""Which calibration questions set a small alpha's threshold: the tail of the inner dev split.

    python experiments/alpha_tail.py --dataset metaqa-plain MODEL [MODEL ...] [--top 12]

For each model (trained with `--dev`, experiments/few_labels.py), the calibration half of its
inner dev split is searched and scored as `cpr eval --split inner-dev` does (text linking);
each question's nonconformity is its gold answers' least surprisal (inf: the beam never
reaches one). Printed: per score group the 80th / 90th / 95th percentiles (with ~150
questions a group, alpha 0.1 at delta 0.05 sets its threshold near the 95th), then each
model's worst questions of group 1 (reached by the beam) with every other model's value for
the same question, and how many of the model's labelled training questions had the same
masked wording. Nothing is tuned on its output: it says where the sets come from.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cpr_neo4j.config import Neo4jSettings  # noqa: E402
from cpr_neo4j.conformal.guarantee import Calibrated  # noqa: E402
from cpr_neo4j.evaluation import evaluate  # noqa: E402
from cpr_neo4j.evaluation.eval_tables import INNER_DEV  # noqa: E402
from cpr_neo4j.graph.store import GraphStore  # noqa: E402
from cpr_neo4j.model.store import read_config  # noqa: E402
from cpr_neo4j.training import questions as qsel  # noqa: E402


def calibration_table(store, dataset: str, model_id: str):
    s = evaluate.EvalSettings(
        dataset, alphas=(0.1,), methods=("cpr",), model_id=model_id, split=INNER_DEV,
        max_questions=600, hop_level=False, variants=False, boot=0, draws=1,
        linking="text", seed=0, workers=1,
    )  # fmt: skip
    return evaluate.searched(store, s, say=lambda m: None).cal["CPR"]


def nonconformity(t) -> np.ndarray:
    """Each question's score as calibration computes it (conformal/guarantee.py)."""
    flat = Calibrated.from_flat(t.qidx, t.surprisal.astype(float), t.gold, t.n_gold, t.group, {})
    return flat.scores


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="+")
    ap.add_argument("--dataset", default="metaqa-plain")
    ap.add_argument("--top", type=int, default=12)
    a = ap.parse_args()
    with GraphStore(Neo4jSettings.load()) as store:
        split = qsel.training_split(store, a.dataset)
        masked = {q.id: q.masked for q in qsel.load(store, a.dataset, split, None)}
        runs = {}
        for model in a.models:
            t = calibration_table(store, a.dataset, model)
            runs[model] = (t, nonconformity(t))
    by_id = {m: dict(zip(t.qids, nc, strict=True)) for m, (t, nc) in runs.items()}
    for model, (t, nc) in runs.items():
        trained = read_config(model)["meta"].get("training_ids") or []
        print(f"== {model}: {len(trained)} labelled training questions, T = {t.temperature:.3g}")
        for g in sorted(set(t.group.tolist())):
            v = np.sort(nc[t.group == g])
            q = [v[min(int(p * len(v)), len(v) - 1)] for p in (0.8, 0.9, 0.95)]
            gone = int(np.isinf(v).sum())
            print(f"   group {g}: {len(v)} questions, 80/90/95th percentile "
                  f"{q[0]:.2f} / {q[1]:.2f} / {q[2]:.2f}, unreached {gone}")  # fmt: skip
        worst = [i for i in np.argsort(-nc) if t.group[i] == 1 and np.isfinite(nc[i])][: a.top]
        seen = [masked[i] for i in trained if i in masked]
        for i in worst:
            text = t.templates[t.template[i]]
            others = " ".join(f"{by_id[m].get(t.qids[i], np.nan):.2f}" for m in runs if m != model)
            same = sum(1 for w in seen if w == text)
            print(f"   {nc[i]:6.2f}  others {others:<22} same wording trained {same}  {text}")


if __name__ == "__main__":
    main()
