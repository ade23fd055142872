"""Raw vs effective-score calibration of never-empty sets: inner dev halves, or the test split.

    python experiments/effective_scores.py DIR [--splits 100] [--alphas 0.1,0.2,0.3,0.5]
    python experiments/effective_scores.py DIR --test   # after the decision: the working half

DIR holds experiments/records.py's inner-dev.npz of one model. The inner dev questions are cut
at random into a calibration half and a measurement half, `--splits` times (seeded); the
calibration half is calibrated exactly as `cpr calibrate` does (conformal/guarantee.py
Calibrated.from_flat on the table's surprisal column, the shipped score), and the other
half answered with each question's group threshold as `cpr ask` does, sets never empty.
Rows: coverage (PAC delta 0.05, the default; and delta 0) and FNR, each with raw and
effective scores (conformal/effective.py). Columns: mean over splits of ECR, APSS, F1 and
FNR, with the standard error of the mean for ECR and APSS.

--test (reporting only, after the default was chosen on inner dev): calibrate on DIR's
cal.npz (the model's calibration share, as `cpr calibrate` does) and answer the test
split's working half (evaluation/eval_tables.half(id) == 0) of DIR's test.npz; one split, the
standard errors are over questions (binomial for ECR).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cpr_neo4j.conformal.guarantee import Calibrated, Request  # noqa: E402
from cpr_neo4j.conformal.sets import SetCounter  # noqa: E402
from cpr_neo4j.evaluation.deployed import table_scores  # noqa: E402
from cpr_neo4j.evaluation.table import CandidateTable  # noqa: E402

MODES = [("coverage", 0.05), ("coverage", None), ("fnr", None)]


def set_metrics(size: np.ndarray, hit: np.ndarray, n_gold: np.ndarray) -> list[float]:
    """[ECR, APSS, F1, FNR] of sets with `size` answers of which `hit` are gold (F1 and
    recall per question as RoG reports them; FNR over questions with a gold answer)."""
    rec = hit / np.maximum(n_gold, 1)
    prec = np.divide(hit, size, out=np.zeros(len(size)), where=size > 0)
    f1 = np.divide(2 * rec * prec, rec + prec, out=np.zeros(len(size)), where=rec + prec > 0)
    ecr = float((hit > 0).mean())
    return [ecr, float(size.mean()), float(f1.mean()), float(1 - rec[n_gold > 0].mean())]


def table_rows(alphas):
    """(alpha, risk, delta, effective?, the row's label cells) in the printed tables' order."""
    for a in alphas:
        for risk, delta in MODES:
            mode = risk if risk == "fnr" else f"coverage, delta {delta or 0:g}"
            for eff in (False, True):
                yield a, risk, delta, eff, f"| {a:g} | {mode} | {'effective' if eff else 'raw'} |"


def measure(t: CandidateTable, alphas, splits: int, seed: int = 0) -> dict:
    spec = {"family": "surprisal", "T": t.temperature}
    score = table_scores(t, spec)
    counter = SetCounter(t.qidx, score, t.gold, t.n)
    rng = np.random.default_rng(seed)
    out: dict = {}
    for _ in range(splits):
        perm = rng.permutation(t.n)
        cal, test = np.sort(perm[: t.n // 2]), perm[t.n // 2 :]
        c = t.subset(cal)
        sc = table_scores(c, spec)
        calibrated = Calibrated.from_flat(c.qidx, sc, c.gold, c.n_gold, c.group, {})
        for a in alphas:
            for risk, delta in MODES:
                for eff in (False, True):
                    req = Request(a, delta, risk, effective=eff)
                    tau = calibrated.thresholds(req, t.group)
                    size, hit = counter.counts(tau, nonempty=True)
                    fin = bool((tau[test] < math.inf).all())  # -inf: the top level
                    row = [*set_metrics(size[test], hit[test], t.n_gold[test]), fin]
                    out.setdefault((a, risk, delta, eff), []).append(row)
    return {k: np.array(v, dtype=float) for k, v in out.items()}


def on_test(cal: CandidateTable, test: CandidateTable, alphas) -> dict:
    """Deployed protocol: thresholds from the calibration share, each test question cut at
    its group's; per (alpha, risk, delta, effective): [ECR, APSS, F1, FNR, finite, se ECR,
    se APSS]."""
    spec = {"family": "surprisal", "T": cal.temperature}
    calibrated = Calibrated.from_flat(
        cal.qidx, table_scores(cal, spec), cal.gold, cal.n_gold, cal.group, {}
    )
    counter = SetCounter(test.qidx, table_scores(test, spec), test.gold, test.n)
    out: dict = {}
    for a in alphas:
        for risk, delta in MODES:
            for eff in (False, True):
                tau = calibrated.thresholds(Request(a, delta, risk, effective=eff), test.group)
                s, h = counter.counts(tau, nonempty=True)
                ecr, apss, f1, fnr = set_metrics(s, h, test.n_gold)
                out[(a, risk, delta, eff)] = [
                    ecr, apss, f1, fnr, float((tau < math.inf).all()),
                    math.sqrt(ecr * (1 - ecr) / len(s)), s.std() / math.sqrt(len(s)),
                ]  # fmt: skip
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir")
    ap.add_argument("--splits", type=int, default=100)
    ap.add_argument("--alphas", default="0.1,0.2,0.3,0.5")
    ap.add_argument("--test", action="store_true", help="cal.npz -> test.npz's working half")
    args = ap.parse_args()
    alphas = [float(a) for a in args.alphas.split(",")]
    if args.test:
        from cpr_neo4j.evaluation.eval_tables import half

        cal = CandidateTable.load(Path(args.dir) / "cal.npz")
        whole = CandidateTable.load(Path(args.dir) / "test.npz")
        test = whole.subset(np.flatnonzero([half(q) == 0 for q in whole.qids]))
        res = on_test(cal, test, alphas)
        print(f"test working half: {test.n} questions (of {whole.n} in test.npz), thresholds "
              f"from the {cal.n} calibration-share questions, sets never empty\n")  # fmt: skip
        print("| alpha | mode | scores | ECR | APSS | F1 | FNR | every tau < +inf |")
        print("|---:|---|---|---|---|---|---|---:|")
        for a, risk, delta, eff, label in table_rows(alphas):
            m = res[(a, risk, delta, eff)]
            print(
                f"{label} {m[0]:.3f} ± {m[5]:.3f} | {m[1]:.2f} ± {m[6]:.2f} | {m[2]:.3f} | "
                f"{m[3]:.3f} | {'yes' if m[4] else 'no'} |"
            )
        return
    t = CandidateTable.load(Path(args.dir) / "inner-dev.npz")
    res = measure(t, alphas, args.splits)
    print(f"inner dev: {t.n} questions, {args.splits} half splits, sets never empty\n")
    print("| alpha | mode | scores | ECR | APSS | F1 | FNR | splits with every tau < +inf |")
    print("|---:|---|---|---|---|---|---|---:|")
    for a, risk, delta, eff, label in table_rows(alphas):
        x = res[(a, risk, delta, eff)]
        se = x.std(axis=0) / math.sqrt(len(x))
        m = x.mean(axis=0)
        print(
            f"{label} {m[0]:.3f} ± {se[0]:.3f} | {m[1]:.2f} ± {se[1]:.2f} | "
            f"{m[2]:.3f} | {m[3]:.3f} | {m[4]:.0%} |"
        )


if __name__ == "__main__":
    main()
