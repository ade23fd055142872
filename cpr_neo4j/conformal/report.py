"""Evaluation report: markdown table, JSON dump and two PNG plots."""

from __future__ import annotations

import json
import math
from pathlib import Path

from cpr_neo4j.conformal.evaluate import EvalResults, Row

DASH = "–"


def _missed(row: Row, repeats: int) -> bool:
    """Like the paper, no set size is credited when coverage misses its target.

    A valid method's mean ECR sits at 1 - alpha in expectation, so half the time it dips
    below by Monte-Carlo noise alone; a miss is a mean more than 2 standard errors of the
    mean (over the random draws) below 1 - alpha.
    """
    se = row.ecr_std / math.sqrt(max(repeats, 1))
    return row.ecr_mean < 1 - row.alpha - 2 * se - 1e-12


def markdown_table(results: EvalResults) -> str:
    head = (
        "| method | alpha | 1-alpha | ECR mean | ECR min | APSS | CE | Hits@1 | recall "
        "| tau=inf |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    )
    lines = [head]
    for r in results.rows:
        missed = _missed(r, results.repeats)
        apss = DASH if missed else f"{r.apss:.2f}"
        ce = DASH if missed or math.isnan(r.ce) else f"{r.ce:.3f}"
        lines.append(
            f"| {r.method} | {r.alpha:g} | {1 - r.alpha:g} | {r.ecr_mean:.3f} | "
            f"{r.ecr_min:.3f} | {apss} | {ce} | {r.hits1:.3f} | {r.recall:.3f} | {r.inf_tau:.0%} |"
        )
    return "\n".join(lines)


def markdown_report(results: EvalResults) -> str:
    intro = (
        f"{results.n_questions} questions; {results.repeats} random splits into "
        f"{results.n_cal} calibration / {results.n_test} test (seed {results.seed}). "
        "Candidate paths: the relation sequences TreeG retained at every hop 1..H. "
        f"APSS and CE show {DASH} where mean ECR < 1 - alpha by more than 2 standard errors "
        "of the mean over the draws. CE = ECR / APSS. "
        "tau=inf: share of splits whose threshold was +inf (see notes)."
    )
    notes = "".join(f"\n\nNote: {n}." for n in results.notes)
    return f"# Coverage report\n\n{intro}{notes}\n\n{markdown_table(results)}\n"


def plot(results: EvalResults, out_dir: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")  # headless: never needs a display
    import matplotlib.pyplot as plt

    paths = []
    fig, ax = plt.subplots(figsize=(5, 4))
    ax.plot([0, 1], [0, 1], "k--", lw=1, label="target")
    for m in results.methods:
        rows = sorted((r for r in results.rows if r.method == m), key=lambda r: r.alpha)
        ax.plot([1 - r.alpha for r in rows], [r.ecr_mean for r in rows], "o-", label=m)
    ax.set(xlabel="1 - alpha", ylabel="ECR (mean over splits)", title="Coverage")
    ax.legend(fontsize=7)
    fig.tight_layout()
    paths.append(out_dir / "ecr.png")
    fig.savefig(paths[-1], dpi=120)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(5, 4))
    for m in results.methods:
        rows = sorted(
            (r for r in results.rows if r.method == m and r.apss > 0), key=lambda r: r.alpha
        )
        ax.plot([r.alpha for r in rows], [r.apss for r in rows], "o-", label=m)
    ax.set_yscale("log")
    ax.set(xlabel="alpha", ylabel="APSS (mean answer-set size)", title="Set size")
    ax.legend(fontsize=7)
    fig.tight_layout()
    paths.append(out_dir / "apss.png")
    fig.savefig(paths[-1], dpi=120)
    plt.close(fig)
    return paths


def write_report(results: EvalResults, out_dir: str | Path) -> dict[str, Path]:
    """results.json, report.md, ecr.png, apss.png under out_dir."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files = {"json": out / "results.json", "markdown": out / "report.md"}
    # NaN/inf are written as JSON's common extensions (NaN, Infinity), which json.loads reads
    files["json"].write_text(json.dumps(results.to_dict(), indent=2), encoding="utf-8")
    files["markdown"].write_text(markdown_report(results), encoding="utf-8")
    ecr, apss = plot(results, out)
    files["ecr_plot"], files["apss_plot"] = ecr, apss
    return files
