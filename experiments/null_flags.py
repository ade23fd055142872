"""False-flag rate of the calibration-vs-test diagnostics when nothing is shifted.

    python experiments/null_flags.py TABLE.npz [--splits 200] [--alphas 0.1,...,0.8]

One candidate table (e.g. experiments/records.py's inner-dev.npz) is cut at random into a
calibration half and a test half, `--splits` times; nothing is shifted, so every flag is a
false one. Per split, with the shipped guarantee (surprisal, grouped, PAC delta 0.05,
raw scores) as `cpr eval` diagnoses it:
- before (commit 5e0108f): Fisher's exact test of the calibration questions' in-sample
  miss rate against the test's, OR the binomial test of test misses against alpha, at 5%
  each, OR-ed over the alphas with no correction (diagnostics.miscoverage_test);
- exact: evaluation/shift.py's exact test of the test misses, Holm across the alphas;
- permutation (what `cpr eval` flags): shift.permutation_tests, side labels reshuffled
  within question templates (`--perms` per split), Holm across the alphas.
Prints the share of splits with any flag, its binomial standard error sqrt(p(1-p)/splits)
at the nominal 5% (the tolerance: a rate is within it when <= 5% + 2 SE), and per alpha.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cpr_neo4j.conformal.guarantee import Calibrated, Request  # noqa: E402
from cpr_neo4j.conformal.sets import SetCounter, slack  # noqa: E402
from cpr_neo4j.evaluation.deployed import table_scores  # noqa: E402
from cpr_neo4j.evaluation.diagnostics import miscoverage_test  # noqa: E402
from cpr_neo4j.evaluation.shift import holm, miss_test, permutation_tests  # noqa: E402
from cpr_neo4j.evaluation.table import CandidateTable  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("table")
    ap.add_argument("--splits", type=int, default=200)
    ap.add_argument("--alphas", default="0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--perms", type=int, default=399)
    args = ap.parse_args()
    t = CandidateTable.load(args.table)
    alphas = [float(a) for a in args.alphas.split(",")]
    spec = {"family": "surprisal", "T": t.temperature}
    score = table_scores(t, spec)
    s_all = SetCounter(t.qidx, score, t.gold, t.n).score
    rng = np.random.default_rng(args.seed)
    old = np.zeros((args.splits, len(alphas)), bool)
    new = np.zeros((args.splits, len(alphas)), bool)
    prm = np.zeros((args.splits, len(alphas)), bool)
    reqs = [Request(a) for a in alphas]
    if len(alphas) / (args.perms + 1) >= 0.05:  # Holm's smallest adjusted p: m / (perms + 1)
        sys.exit(f"--perms {args.perms} cannot flag over {len(alphas)} alphas at 5%: raise it")
    for d in range(args.splits):
        perm = rng.permutation(t.n)
        cal, test = np.sort(perm[: t.n // 2]), np.sort(perm[t.n // 2 :])
        c = t.subset(cal)
        calibrated = Calibrated.from_flat(c.qidx, table_scores(c, spec), c.gold, c.n_gold,
                                          c.group, {})  # fmt: skip
        tests = []
        p_perm = permutation_tests(
            calibrated.scores, calibrated.groups, t.template[cal], s_all[test],
            calibrated.label(t.group[test]), t.template[test], reqs, args.perms, d,
        )  # fmt: skip
        for j, a in enumerate(alphas):
            req = reqs[j]
            miss_c = ~(calibrated.scores <= slack(calibrated.thresholds(req, c.group)))
            miss_t = ~(s_all[test] <= slack(calibrated.thresholds(req, t.group[test])))
            old[d, j] = miscoverage_test(miss_c, miss_t, a).flag
            tests.append(miss_test(calibrated, req, t.group[test], miss_t))
            tests[-1].p_perm = p_perm[j]
        holm(tests)
        new[d] = [x.flag_exact for x in tests]
        prm[d] = [x.flag for x in tests]
        print(f"split {d + 1}/{args.splits}", file=sys.stderr, flush=True)
    se = (0.05 * 0.95 / args.splits) ** 0.5
    print(f"{args.table}: {t.n} questions, {args.splits} random half splits, nothing shifted; "
          f"{args.perms} template permutations per split")  # fmt: skip
    print(f"splits with any flag: before {old.any(axis=1).mean():.1%}, exact test "
          f"{new.any(axis=1).mean():.1%}, template permutation {prm.any(axis=1).mean():.1%} "
          f"(nominal 5% family-wise for the last two; binomial SE at 5%: {se:.1%}, "
          f"tolerance 5% + 2 SE = {0.05 + 2 * se:.1%})")  # fmt: skip
    print("| alpha | flagged before | exact | permutation |\n|---:|---:|---:|---:|")
    for j, a in enumerate(alphas):
        print(f"| {a:g} | {old[:, j].mean():.1%} | {new[:, j].mean():.1%} | "
              f"{prm[:, j].mean():.1%} |")  # fmt: skip


if __name__ == "__main__":
    main()
