"""Evaluation report: markdown tables, one JSON file and two PNG plots.

The deployed protocol (one calibration, every test question answered with its tau) is
the headline; the pooled re-split is the second, clearly labelled view.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from cpr_neo4j.conformal.deployed import DeployedResults, DeployedRow
from cpr_neo4j.conformal.evaluate import EvalResults, Row

DASH = "–"


def _missed(row: Row, repeats: int) -> bool:
    """Pooled view: like the paper, no set size is credited when coverage misses its target.

    A valid method's mean ECR sits at 1 - alpha in expectation, so half the time it dips
    below by Monte-Carlo noise alone; a miss is a mean more than 2 standard errors of the
    mean (over the random draws) below 1 - alpha.
    """
    se = row.ecr_std / math.sqrt(max(repeats, 1))
    return row.ecr_mean < 1 - row.alpha - 2 * se - 1e-12


def _tau(tau: float | list[float]) -> str:
    if isinstance(tau, list):
        return "(" + ", ".join(_tau(t) for t in tau) + ")"
    return "+inf" if math.isinf(tau) else f"{tau:.3f}"


def _ci(lo: float, hi: float) -> str:
    return DASH if math.isnan(lo) else f"{lo:.3f}–{hi:.3f}"


def _num(x: float, fmt: str = ".3f") -> str:
    return DASH if x is None or math.isnan(x) else format(x, fmt)


def _ecr(r: DeployedRow) -> str:
    """ECR, '!' when its whole test interval is below target; an unattainable alpha (tau =
    +inf: every candidate answered) shows the coverage it got as what it is, recall."""
    if not r.attainable:
        return f"unattainable ({r.ecr:.3f} = recall)"
    return f"{r.ecr:.3f}{' !' if r.below_target else ''}"


def deployed_table(results: DeployedResults) -> str:
    """One row per (method, alpha)."""
    lines = [
        "| method | hints | alpha | ECR | 95% CI (test) | 95% CI (cal+test) | held | APSS | CE "
        "| Hits@1 | recall (cal / test) | tau |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results.rows:
        lines.append(
            f"| {r.method} | {r.hints} | {r.alpha:g} | {_ecr(r)} | "
            f"{_ci(r.ecr_lo, r.ecr_hi)} | {_ci(r.ecr_lo_cal, r.ecr_hi_cal)} | "
            f"{_num(r.held, '.0%')} | {r.apss:.2f} | {_num(r.ce)} | {_num(r.hits1)} | "
            f"{_num(r.recall_cal)} / {_num(r.recall)} | {_tau(r.tau)} |"
        )
    return "\n".join(lines)


def exchangeability_table(results: DeployedResults) -> str:
    lines = [
        "| method | KS D | p-value | recall (cal) | recall (test) |",
        "|---|---:|---:|---:|---:|",
    ]
    for x in results.exchangeability:
        lines.append(
            f"| {x.method} | {x.ks_statistic:.3f} | {x.p_value:.3g} | "
            f"{x.recall_cal:.3f} | {x.recall_test:.3f} |"
        )
    return "\n".join(lines)


def pooled_table(results: EvalResults) -> str:
    head = (
        "| method | alpha | ECR mean | ECR min | ECR p5 | held | APSS | CE | Hits@1 | recall "
        "| tau=inf |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    )
    lines = [head]
    for r in results.rows:
        missed = _missed(r, results.repeats)
        apss = DASH if missed else f"{r.apss:.2f}"
        ce = DASH if missed or math.isnan(r.ce) else f"{r.ce:.3f}"
        lines.append(
            f"| {r.method} | {r.alpha:g} | {r.ecr_mean:.3f} | {r.ecr_min:.3f} | "
            f"{r.ecr_p5:.3f} | {_num(r.held, '.0%')} | {apss} | {ce} | {r.hits1:.3f} | "
            f"{r.recall:.3f} | {r.inf_tau:.0%} |"
        )
    return "\n".join(lines)


def markdown_report(headline: DeployedResults, pooled: EvalResults, title: str = "") -> str:
    notes = "".join(f"\n- {n}" for n in dict.fromkeys([*headline.notes, *pooled.notes]))
    return f"""# Coverage report{f": {title}" if title else ""}

## Deployed protocol (headline)

One calibration on the {headline.n_cal} questions held out from training (what
`cpr calibrate` uses), then all {headline.n_test} evaluation questions answered with that
tau, gold topic entities given. 95% intervals: percentile bootstrap ({headline.boot}
replicates) over test questions with tau fixed, and over both the calibration share and
the test questions (tau recomputed each time). `!` marks an ECR whose whole test interval
lies below 1 - alpha; "unattainable" marks an alpha whose tau is +inf (fewer calibration
questions than k have a gold answer among the candidates: recall or n caps coverage), so
the set is every candidate and its coverage is the recall. "held": share of bootstrap
redraws of the calibration share whose tau covers 1 - alpha of the whole evaluation split
(PAC rows promise at least 1 - delta).
CE = ECR / APSS. Hop-level rows report the per-hop taus; their
Hits@1 and recall do not apply.

{deployed_table(headline)}

### Exchangeability check: calibration share vs evaluation split

Two-sample Kolmogorov-Smirnov test between the calibration questions' scores and the
evaluation questions' scores (+inf = no gold answer among the candidates). The guarantee
assumes exchangeable questions; a small p-value says the two differ, so coverage on this
split may miss 1 - alpha even with a correct implementation.

{exchangeability_table(headline)}

## Pooled view (second view)

The calibration share and the evaluation split pooled, then {pooled.repeats} random
re-splits into {pooled.n_cal} calibration / {pooled.n_test} test questions (seed
{pooled.seed}). Mean ECR >= 1 - alpha holds here by construction for any fixed scorer;
min and 5th percentile show the spread over draws, "held" the share of draws whose ECR
reached 1 - alpha. APSS and CE show {DASH} where mean ECR
< 1 - alpha by more than 2 standard errors of the mean over the draws.

{pooled_table(pooled)}

## Notes
{notes}
"""


def plot(results: DeployedResults, out_dir: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")  # headless: never needs a display
    import matplotlib.pyplot as plt

    def rows_of(m: str) -> list[DeployedRow]:
        return sorted((r for r in results.rows if r.method == m), key=lambda r: r.alpha)

    paths = []
    fig, ax = plt.subplots(figsize=(5.5, 4.5))
    ax.plot([0, 1], [0, 1], "k--", lw=1, label="target 1 - alpha")
    for m in results.methods:
        rs = rows_of(m)
        x = [1 - r.alpha for r in rs]
        y = [r.ecr for r in rs]
        err = [[r.ecr - r.ecr_lo for r in rs], [r.ecr_hi - r.ecr for r in rs]]
        ax.errorbar(x, y, yerr=err, fmt="o-", ms=3, capsize=2, label=m)
    ax.set(xlabel="1 - alpha", ylabel="ECR on the test split (95% CI)", title="Coverage")
    ax.legend(fontsize=6)
    fig.tight_layout()
    paths.append(out_dir / "ecr.png")
    fig.savefig(paths[-1], dpi=120)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(5.5, 4.5))
    for m in results.methods:
        rs = [r for r in rows_of(m) if r.apss > 0]
        ax.plot([r.alpha for r in rs], [r.apss for r in rs], "o-", ms=3, label=m)
    ax.set_yscale("log")
    ax.set(xlabel="alpha", ylabel="APSS (mean answer-set size)", title="Set size")
    ax.legend(fontsize=6)
    fig.tight_layout()
    paths.append(out_dir / "apss.png")
    fig.savefig(paths[-1], dpi=120)
    plt.close(fig)
    return paths


def write_report(
    headline: DeployedResults, pooled: EvalResults, out_dir: str | Path, title: str = ""
) -> dict[str, Path]:
    """results.json, report.md, ecr.png, apss.png under out_dir."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files = {"json": out / "results.json", "markdown": out / "report.md"}
    data = {"title": title, "deployed": headline.to_dict(), "pooled": pooled.to_dict()}
    # NaN/inf are written as JSON's common extensions (NaN, Infinity), which json.loads reads
    files["json"].write_text(json.dumps(data, indent=2), encoding="utf-8")
    files["markdown"].write_text(markdown_report(headline, pooled, title), encoding="utf-8")
    files["ecr_plot"], files["apss_plot"] = plot(headline, out)
    return files
