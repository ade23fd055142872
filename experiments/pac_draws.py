"""How often one user's calibration under-covers, plain against PAC, at the calibration
sizes users have, and what PAC costs in set size.

    python experiments/pac_draws.py DIR [--sizes 100,300,1000,1500] [--draws 500] [--delta 0.05]

DIR holds experiments/records.py's inner-dev.npz of one model (training questions the model
never saw; nothing here touches the calibration share or the test split). Per size n and
alpha: `--draws` random calibration draws of n questions from the pool, the rest as the
test; the share of draws whose test coverage falls below 1 - alpha for the plain and the
PAC threshold (the default score, one threshold per group, sets never empty; draws where
some group is too small for a finite threshold are refused, as `cpr ask` refuses them, and
counted apart), and the mean set size of each. --allow-empty: the paper's sets, where the
plain threshold's coverage sits at 1 - alpha and one draw can fall below it.
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
from cpr_neo4j.evaluation.table import CandidateTable  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir")
    ap.add_argument("--sizes", default="100,300,1000,1500")
    ap.add_argument("--alphas", default="0.1,0.2,0.3")
    ap.add_argument("--draws", type=int, default=500)
    ap.add_argument("--delta", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--allow-empty", action="store_true", help="the paper's sets (no top answer added)"
    )
    args = ap.parse_args()
    t = CandidateTable.load(Path(args.dir) / "inner-dev.npz")
    score = t.surprisal.astype(float)
    q = t.qidx
    counter = SetCounter(q, score, t.gold, t.n)
    rng = np.random.default_rng(args.seed)
    print(f"{t.n} inner dev questions; score surprisal (T = {t.temperature:.3g}); "
          f"{args.draws} calibration draws per size; delta {args.delta:g}; "
          f"sets {'may be empty' if args.allow_empty else 'never empty'}")  # fmt: skip
    print("| n | alpha | plain: draws under 1 - alpha | PAC: draws under | PAC refused "
          "(a group too small) | plain APSS | PAC APSS | PAC cost |")  # fmt: skip
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n in (int(x) for x in args.sizes.split(",")):
        if n >= t.n:
            continue
        for a in (float(x) for x in args.alphas.split(",")):
            under = {None: 0, args.delta: 0}
            refused = {None: 0, args.delta: 0}  # some group's threshold +inf: ask refuses
            size = {None: [], args.delta: []}
            for _ in range(args.draws):
                perm = rng.permutation(t.n)
                cal, test = np.sort(perm[:n]), perm[n:]
                keep = np.isin(q, cal)
                local = np.searchsorted(cal, q[keep])
                c = Calibrated.from_flat(local, score[keep], t.gold[keep], t.n_gold[cal],
                                         t.group[cal], {"n": n})  # fmt: skip
                for d in (None, args.delta):
                    req = Request(a, d, allow_empty=args.allow_empty)
                    taus = c.thresholds(req, t.group)
                    if not np.isfinite(taus[test]).all():
                        refused[d] += 1
                        continue
                    s, hit = counter.counts(taus, nonempty=not args.allow_empty)
                    under[d] += (hit[test] > 0).mean() < 1 - a - 1e-12
                    size[d].append(s[test].mean())
            plain, pac = (np.mean(size[d]) if size[d] else math.nan for d in (None, args.delta))
            ok = {d: max(args.draws - refused[d], 1) for d in under}
            gone = refused[args.delta] / args.draws
            print(f"| {n} | {a:g} | {under[None] / ok[None]:.1%} | "
                  f"{under[args.delta] / ok[args.delta]:.1%} | {gone:.0%} "
                  f"| {plain:.2f} | {pac:.2f} | {pac / plain - 1:+.1%} |")  # fmt: skip


if __name__ == "__main__":
    main()
