"""How much the score temperature T moves the sets of few-label models (issue 57): the
models of experiments/few_labels.py's inner-dev results (trained at `cpr train`'s 6
epochs), re-evaluated at fixed T values against the T fitted at training: on the 10% of
real training questions held out (3 at 30 labels, 10 at 100), or, for models trained on
generated questions alone before `cpr train` fixed their T, on held-out generated ones.
Inner dev split only; the test split is not read.

    R=experiments/results/few_labels
    python experiments/temperature_check.py --results $R/metaqa-plain-dev-mix.jsonl \\
        --points 100:200,30:270 --temperatures 0.05,0.3,1,3 \\
        --out $R/metaqa-plain-dev-temperature.jsonl
    python experiments/temperature_check.py --table $R/metaqa-plain-dev-temperature.jsonl

Each model keeps its calibration questions and its inner dev split (the results row's
settings); only the T of CPR's surprisal changes. Rows are appended as they finish; a rerun
skips those done."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "experiments"))

from few_labels import EPOCHS, _evaluate  # noqa: E402 (found through the path above)
from few_labels import _load as _rows  # noqa: E402

ALPHAS = ("0.1", "0.3", "0.5")


def run(a) -> None:
    from cpr_neo4j.config import Neo4jSettings
    from cpr_neo4j.graph.store import GraphStore

    wanted = {tuple(int(v) for v in p.split(":")) for p in a.points.split(",")}
    temps = [float(t) for t in a.temperatures.split(",")]
    out = Path(a.out)
    done = {(r["model_id"], r["T"]) for r in _rows(out)}
    models = [
        r
        for f in a.results
        for r in _rows(Path(f))
        if (r["size"], r["generated"]) in wanted
        and r["settings"].get("dev")
        and r["settings"].get("epochs", EPOCHS) == EPOCHS
        and not r["settings"].get("real_share")
        and not r["settings"].get("anchor_real")
        and not r["settings"].get("llm_model")
    ]
    with GraphStore(Neo4jSettings.load()) as store:
        for r in models:
            st = r["settings"]
            args = SimpleNamespace(dataset=st["dataset"], max_test=st["max_test"], boot=200,
                                   dev=st["dev"])  # fmt: skip
            for t in temps:
                if (r["model_id"], t) in done:
                    continue
                began = time.monotonic()
                ev = _evaluate(store, args, r["model_id"], ("cpr",), temperature=t)
                row = {
                    "dataset": st["dataset"],
                    "size": r["size"],
                    "generated": r["generated"],
                    "seed": r["seed"],
                    "model_id": r["model_id"],
                    "T_fitted": r["trained"]["temperature"],
                    "T": t,
                    "fitted": r["methods"]["CPR"],
                    **ev,
                }
                with out.open("a") as f:
                    f.write(json.dumps(row) + "\n")
                print(f"{r['size']}+{r['generated']} seed {r['seed']} T={t}: "
                      f"{time.monotonic() - began:.0f} s", flush=True)  # fmt: skip


def _cell(vals: list[dict]) -> str:
    att = [v["apss"] for v in vals if v["attainable"]]
    if not att:
        return f"not attainable ({len(vals)})"
    note = "" if len(att) == len(vals) else f" ({len(att)} of {len(vals)})"
    return f"{statistics.mean(att):.2f}{note}"


def table(path: Path) -> str:
    rows = _rows(path)
    lines = [
        "| real + generated | T | "
        + " | ".join(f"APSS alpha {x}" for x in ALPHAS)
        + " | ECR 0.1 / 0.3 / 0.5 |",
        "|---|---|" + "---:|" * (len(ALPHAS) + 1),
    ]
    for size, gen in sorted({(r["size"], r["generated"]) for r in rows}, reverse=True):
        mine = [r for r in rows if (r["size"], r["generated"]) == (size, gen)]
        fitted = {r["model_id"]: r for r in mine}.values()  # one fitted row a model
        ts = ", ".join(f"{r['T_fitted']:.2f}" for r in fitted)
        series = [(f"fitted ({ts})", [r["fitted"] for r in fitted])]
        for t in sorted({r["T"] for r in mine}):
            series.append((f"{t:g}", [r["methods"]["CPR"] for r in mine if r["T"] == t]))
        for label, ms in series:
            ecr = " / ".join(f"{statistics.mean(m[a]['ecr'] for m in ms):.3f}" for a in ALPHAS)
            cells = " | ".join(_cell([m[a] for m in ms]) for a in ALPHAS)
            lines.append(f"| {size} + {gen} | {label} | {cells} | {ecr} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", nargs="+", default=[])
    ap.add_argument("--points", default="100:200,30:270", help="size:generated pairs")
    ap.add_argument("--temperatures", default="0.05,0.3,1,3")
    ap.add_argument("--out")
    ap.add_argument("--table", metavar="JSONL")
    a = ap.parse_args()
    if a.table:
        print(table(Path(a.table)))
        return
    run(a)
    print(table(Path(a.out)))


if __name__ == "__main__":
    main()
