"""Other score families under the shipped guarantee, on few-label models' inner dev splits.

    python experiments/score_family.py --dataset metaqa-plain MODEL [MODEL ...] \
        [--out results.jsonl] [--table results.jsonl]

For each model (trained with `--dev`, experiments/few_labels.py) the inner dev split is
searched and scored once, as `cpr eval --split inner-dev` does (text linking, half
calibrates, half is measured), and the same candidate tables are then calibrated under
several score families, each with the guarantee's rules (one threshold per score group, PAC
delta 0.05, never empty; conformal/guarantee.py): the surprisal (the default), distinct
score levels ranked (top-k levels), single answers ranked (top-k), and RAPS at the model's
temperature. The question it answers: at alpha 0.1, where a few-label model's sets are set
by a few confident misses (experiments/alpha_tail.py), does a rank-based score, which caps
what a confident miss costs, give smaller sets than the surprisal?
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cpr_neo4j.config import Neo4jSettings  # noqa: E402
from cpr_neo4j.evaluation import evaluate  # noqa: E402
from cpr_neo4j.evaluation.deployed import Variant, deployed  # noqa: E402
from cpr_neo4j.evaluation.eval_tables import INNER_DEV  # noqa: E402
from cpr_neo4j.graph.store import GraphStore  # noqa: E402

ALPHAS = (0.05, 0.1, 0.3, 0.5)


def tables(store, dataset: str, model_id: str, max_questions: int) -> evaluate.Searched:
    s = evaluate.EvalSettings(
        dataset, alphas=ALPHAS, methods=("cpr",), model_id=model_id, split=INNER_DEV,
        max_questions=max_questions, hop_level=False, variants=False, boot=0, draws=1,
        linking="text", seed=0, workers=1,
    )  # fmt: skip
    return evaluate.searched(store, s, say=lambda m: None)


def families(default: Variant) -> list[Variant]:
    """The default and the rank-based families, each under the default's rules."""
    t = float(default.spec["T"])
    specs = {
        "surprisal (default)": default.spec,
        "top-k levels": {"family": "level"},
        "top-k answers": {"family": "id_rank"},
        "RAPS lam 0.1 k 1": {"family": "raps", "T": t, "lam": 0.1, "k_reg": 1},
        "RAPS lam 1 k 1": {"family": "raps", "T": t, "lam": 1.0, "k_reg": 1},
    }
    method, delta = default.method, default.delta
    return [Variant(name=n, method=method, spec=s, delta=delta) for n, s in specs.items()]


def measure(store, dataset: str, model_id: str, max_questions: int) -> list[dict]:
    x = tables(store, dataset, model_id, max_questions)
    # boot only sizes the ECR intervals, which are not recorded here (0 is refused)
    res = deployed(x.cal, x.test, families(x.variants[0]), ALPHAS, x.population, boot=20, draws=1)
    return [
        {
            "model_id": model_id,
            "family": r.method,
            "alpha": r.alpha,
            "attainable": r.attainable,
            "ecr": r.ecr,
            "apss": r.apss,
            "n_cal": res.n_cal,
            "n_test": res.n_test,
        }
        for r in res.rows
    ]


def table(rows: list[dict]) -> str:
    models = sorted({r["model_id"] for r in rows})
    names = list(dict.fromkeys(r["family"] for r in rows))
    out = [
        f"{len(models)} models; each cell: ECR / APSS, mean over the models that attain alpha "
        "(attained in k of n)",
        "",
        "| score family | " + " | ".join(f"α={a}" for a in ALPHAS) + " |",
        "|---|" + "---:|" * len(ALPHAS),
    ]
    for name in names:
        cells = []
        for a in ALPHAS:
            got = [r for r in rows if r["family"] == name and r["alpha"] == a and r["attainable"]]
            if not got:
                cells.append(f"not attainable ({len(models)})")
                continue
            ecr = statistics.mean(r["ecr"] for r in got)
            apss = statistics.mean(r["apss"] for r in got)
            tail = "" if len(got) == len(models) else f", {len(got)} of {len(models)}"
            cells.append(f"{ecr:.3f} / {apss:.2f}{tail}")
        out.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*")
    ap.add_argument("--dataset", default="metaqa-plain")
    ap.add_argument("--max-questions", type=int, default=600)
    ap.add_argument("--out", type=Path, help="append each model's rows (jsonl)")
    ap.add_argument("--table", type=Path, nargs="+", help="print the table of results files")
    a = ap.parse_args()
    rows: list[dict] = []
    for path in a.table or []:
        rows += [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    if a.models:
        with GraphStore(Neo4jSettings.load()) as store:
            for model in a.models:
                got = measure(store, a.dataset, model, a.max_questions)
                rows += got
                if a.out:
                    with a.out.open("a", encoding="utf-8") as fh:
                        fh.writelines(json.dumps(r) + "\n" for r in got)
                print(f"{model}: done", flush=True)
    print(table(rows))


if __name__ == "__main__":
    main()
