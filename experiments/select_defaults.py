"""Compare score families and guarantee variants on the INNER DEV split only.

    python experiments/select_defaults.py DIR [--splits 100] [--alphas 0.1,0.3,0.5]
        [--families centred:0.97,level,raps] [--hops 1,2,3]

DIR holds experiments/records.py's dumps of one model (inner-dev.npz; train.npz for fitting the
softmax temperature on training questions). The inner dev split is cut at random into a
calibration half and a measurement half, `--splits` times (seeded): thresholds come from
the first half, metrics from the second, so neither the model's calibration share nor any
test question is looked at. Prints one markdown table per alpha: ECR, APSS, answer
recall, precision, F1, empty-set rate, ECR per hop count, and ECR / APSS on single-answer
questions; the standard error of the mean over splits is given for ECR and APSS.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cpr_neo4j.conformal.mondrian import Mondrian  # noqa: E402
from cpr_neo4j.conformal.risk import FnrCurve, GroupedFnr  # noqa: E402
from cpr_neo4j.conformal.scores import family_scores  # noqa: E402
from cpr_neo4j.conformal.sets import SetCounter  # noqa: E402
from cpr_neo4j.conformal.temperature import fit_temperature  # noqa: E402
from cpr_neo4j.conformal.threshold import rank  # noqa: E402
from cpr_neo4j.evaluation.table import CandidateTable  # noqa: E402


@dataclass(frozen=True)
class Variant:
    name: str
    family: str
    params: tuple = ()
    nonempty: bool = True
    grouped: bool = False
    delta: float | None = None
    risk: str = "coverage"


def scores_of(t: CandidateTable, v: Variant, temps: dict) -> np.ndarray:
    q, p = t.qidx, dict(v.params)
    if v.family == "id_rank":
        return (np.arange(len(t.cost)) - t.start[:-1][q] + 1).astype(float)
    if v.family == "mass":
        return t.surprisal.astype(float)
    if "T" in p and p["T"] == "fit":
        p["T"] = temps["entity"]
    return family_scores(q, t.cost, v.family, **p)


def run(t: CandidateTable, variants: list[Variant], alphas, splits: int, temps: dict, seed=0):
    rng = np.random.default_rng(seed)
    perms = [rng.permutation(t.n) for _ in range(splits)]
    top_correct = None
    out = {}
    q = t.qidx
    for v in variants:
        score = scores_of(t, v, temps)
        sc = SetCounter(q, score, t.gold, t.n)
        if top_correct is None:
            first = t.start[:-1][t.sizes > 0]
            top_correct = np.zeros(t.n, bool)
            top_correct[t.sizes > 0] = t.gold[first]
        for a in alphas:
            rows = []
            for perm in perms:
                cal, test = perm[: t.n // 2], perm[t.n // 2 :]
                tau_q = _taus(t, q, score, sc, cal, a, v)
                size, hit = sc.counts(tau_q, v.nonempty)
                rows.append(_metrics(t, test, size, hit, top_correct))
            out[(v.name, a)] = np.array(rows)
    return out


def _taus(t, q, score, sc: SetCounter, cal, alpha, v: Variant) -> np.ndarray:
    if v.risk == "fnr":
        in_cal = np.zeros(t.n, bool)
        in_cal[cal] = True
        sel = in_cal[q]
        ids = np.flatnonzero(in_cal)  # calibration questions in table order
        qc = np.searchsorted(ids, q[sel])
        if v.grouped:
            g = GroupedFnr.from_flat(qc, score[sel], t.gold[sel], t.n_gold[ids], t.group[ids])
            return g.lams(alpha, t.group)
        lam = FnrCurve.from_flat(qc, score[sel], t.gold[sel], t.n_gold[ids]).lam(alpha)
        return np.full(t.n, lam)
    s_cal = sc.score[cal]
    if v.grouped:
        m = Mondrian.from_scores(s_cal, t.group[cal])
        return m.taus(alpha, v.delta, t.group)
    k = rank(len(s_cal), alpha, v.delta)
    s = np.sort(s_cal)
    return np.full(t.n, s[k - 1] if k <= len(s) else math.inf)


COLS = ["ECR", "APSS", "recall", "precision", "F1", "empty", "FNR", "ECR1", "ECR2", "ECR3",
        "ECR single", "APSS single", "FNR1", "FNR2", "FNR3"]  # fmt: skip


def _metrics(t, test, size, hit, top) -> list[float]:
    size, hit, ng = size[test], hit[test], t.n_gold[test]
    cov = hit > 0
    rec = hit / np.maximum(ng, 1)
    prec = np.divide(hit, size, out=np.zeros(len(size)), where=size > 0)
    both = rec + prec
    f1 = np.divide(2 * rec * prec, both, out=np.zeros(len(size)), where=both > 0)
    hops = t.hops[test]
    single = ng == 1

    def m(x, sel=None):
        x = x if sel is None else x[sel]
        return float(x.mean()) if len(x) else math.nan

    return [m(cov), m(size), m(rec), m(prec), m(f1), m(size == 0), 1 - m(rec),
            m(cov, hops == 1), m(cov, hops == 2), m(cov, hops == 3),
            m(cov, single), m(size, single),
            1 - m(rec, hops == 1), 1 - m(rec, hops == 2), 1 - m(rec, hops == 3)]  # fmt: skip


def parse_variants(text: str, temps: dict) -> list[Variant]:
    out = []
    for item in text.split(";"):
        item = item.strip()
        if not item:
            continue
        name, _, spec = item.partition("=")
        parts = dict(kv.split(":") for kv in spec.split(",")) if spec else {}
        fam = parts.pop("family")
        flags = {
            "nonempty": parts.pop("nonempty", "1") == "1",
            "grouped": parts.pop("grouped", "0") == "1",
            "delta": float(parts.pop("delta")) if "delta" in parts else None,
            "risk": parts.pop("risk", "coverage"),
        }
        params = tuple(
            (k, v if v == "fit" else (int(v) if k == "k_reg" else float(v)))
            for k, v in parts.items()
        )
        out.append(Variant(name, fam, params, **flags))
    return out


DEFAULT_VARIANTS = (
    "centred .97=family:centred,centre:0.97;"
    "centred .97 allow-empty=family:centred,centre:0.97,nonempty:0;"
    "top-k (id)=family:id_rank;"
    "top-k (levels)=family:level;"
    "aps=family:aps,T:fit;"
    "raps l.01 k1=family:raps,T:fit,lam:0.01,k_reg:1;"
    "raps l.1 k1=family:raps,T:fit,lam:0.1,k_reg:1;"
    "raps l1 k1=family:raps,T:fit,lam:1,k_reg:1;"
    "raps l.1 k2=family:raps,T:fit,lam:0.1,k_reg:2;"
    "mass=family:mass"
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir")
    ap.add_argument("--splits", type=int, default=50)
    ap.add_argument("--alphas", default="0.05,0.1,0.3,0.5")
    ap.add_argument("--variants", default=DEFAULT_VARIANTS)
    ap.add_argument("--table", default="inner-dev")
    args = ap.parse_args()
    d = Path(args.dir)
    t = CandidateTable.load(d / f"{args.table}.npz")
    temps = {"sequence": t.temperature}
    if (d / "train.npz").exists() and "T:fit" in args.variants:
        tr = CandidateTable.load(d / "train.npz")
        temps["entity"] = fit_temperature(tr.qidx, tr.cost, tr.gold).T
    print(f"{args.table}: {t.n} questions, {len(t.cost)} candidates; temperatures {temps}")
    variants = parse_variants(args.variants, temps)
    alphas = [float(a) for a in args.alphas.split(",")]
    res = run(t, variants, alphas, args.splits, temps)
    for a in alphas:
        print(f"\n### alpha = {a:g} ({args.splits} inner-dev half splits; ± = s.e. of the mean)")
        print("| variant | " + " | ".join(COLS) + " |")
        print("|---|" + "---:|" * len(COLS))
        for v in variants:
            r = res[(v.name, a)]
            mean, se = r.mean(0), r.std(0) / math.sqrt(len(r))
            cells = [f"{mean[0]:.3f}±{se[0]:.3f}", f"{mean[1]:.2f}±{se[1]:.2f}"]
            cells += [f"{x:.3f}" for x in mean[2:10]] + [f"{mean[10]:.3f}", f"{mean[11]:.2f}"]
            cells += [f"{x:.3f}" for x in mean[12:15]]
            print(f"| {v.name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
