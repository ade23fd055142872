"""Flag counts of the calibration-vs-test diagnostics, before (5e0108f) and after, on the
same candidate tables.

    python experiments/flag_counts.py NAME=CAL.npz,TEST.npz [NAME=TABLE.npz ...] [--alphas ...]

A NAME=TABLE.npz entry (e.g. inner-dev.npz) is cut into halves by a hash of the question
id (calibration: even hash, as the inner dev halves). Per set and CPR variant (the shipped
guarantee: surprisal, grouped, PAC 0.05; and marginal, one threshold, empty sets allowed,
each diagnosed as `cpr eval` diagnoses CPR), over the alphas:
- before: diagnostics.miscoverage_test (Fisher's exact test of the calibration questions'
  in-sample miss rate against the test's, OR the binomial test of test misses against
  alpha, 5% each, no correction; KS was shown, never flagged);
- exact: evaluation/shift.py's exact test, Holm across the alphas;
- permutation (what `cpr eval` flags now): the template-stratified permutation test, Holm.
Prints a markdown table of flagged alphas per cell.
"""

from __future__ import annotations

import argparse
import sys
import zlib
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cpr_neo4j.conformal.guarantee import Calibrated  # noqa: E402
from cpr_neo4j.conformal.sets import SetCounter, slack  # noqa: E402
from cpr_neo4j.evaluation.deployed import Variant, deployed, table_scores  # noqa: E402
from cpr_neo4j.evaluation.diagnostics import miscoverage_test  # noqa: E402
from cpr_neo4j.evaluation.table import CandidateTable  # noqa: E402


def tables(arg: str) -> tuple[str, CandidateTable, CandidateTable]:
    name, files = arg.split("=", 1)
    parts = files.split(",")
    if len(parts) == 2:
        return name, CandidateTable.load(parts[0]), CandidateTable.load(parts[1])
    t = CandidateTable.load(parts[0])
    even = np.array([zlib.crc32(q.encode()) % 2 == 0 for q in t.qids])
    return name, t.subset(np.flatnonzero(even)), t.subset(np.flatnonzero(~even))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sets", nargs="+")
    ap.add_argument("--alphas", default="0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8")
    args = ap.parse_args()
    alphas = [float(a) for a in args.alphas.split(",")]
    print("| set (calibration / test questions) | variant | before | exact (Holm) | "
          "permutation (Holm, flags) |\n|---|---|---:|---:|---:|")  # fmt: skip
    totals = np.zeros(3, int)
    for arg in args.sets:
        name, c, t = tables(arg)
        spec = {"family": "surprisal", "T": c.temperature}
        variants = [
            Variant("CPR", "CPR", spec, 0.05, diagnose=True),
            Variant("CPR, marginal (delta 0)", "CPR", spec, None, diagnose=True),
            Variant("CPR, one threshold for all", "CPR", spec, 0.05, grouped=False, diagnose=True),
            Variant("CPR, empty sets allowed", "CPR", spec, 0.05, allow_empty=True, diagnose=True),
        ]
        res = deployed({"CPR": c}, {"CPR": t}, variants, alphas, {}, boot=50, draws=5)
        calibrated = Calibrated.from_flat(c.qidx, table_scores(c, spec), c.gold, c.n_gold,
                                          c.group, {})  # fmt: skip
        s_t = SetCounter(t.qidx, table_scores(t, spec), t.gold, t.n).score
        for v, d in zip(variants, res.diagnoses, strict=True):
            before = 0
            for a in alphas:
                req = v.request(a)
                miss_c = ~(calibrated.scores <= slack(calibrated.thresholds(req, c.group)))
                miss_t = ~(s_t <= slack(calibrated.thresholds(req, t.group)))
                before += miscoverage_test(miss_c, miss_t, a).flag
            exact = sum(m["flag_exact"] for m in d.miscoverage)
            perm = sum(m["flag"] for m in d.miscoverage)
            totals += [before, exact, perm]
            print(f"| {name} ({c.n} / {t.n}) | {v.name} | {before} of {len(alphas)} | "
                  f"{exact} of {len(alphas)} | {perm} of {len(alphas)} |")  # fmt: skip
    print(f"| all | | {totals[0]} | {totals[1]} | {totals[2]} |")


if __name__ == "__main__":
    main()
