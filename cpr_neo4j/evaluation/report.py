"""Evaluation report: markdown tables, one JSON file and two PNG plots.

The deployed protocol is the headline; its diagnostics and the pooled view follow.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

from cpr_neo4j.evaluation.deployed import DeployedResults, Diagnosis, Row

DASH = "–"


def _num(x: float | None, fmt: str = ".3f") -> str:
    return DASH if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, fmt)


def _ci(lo: float, hi: float) -> str:
    return DASH if math.isnan(lo) else f"{lo:.3f}–{hi:.3f}"


def _taus(r: Row) -> str:
    parts = [f"g{g}: {'+inf' if math.isinf(t) else f'{t:.3g}'}" for g, t in sorted(r.tau.items())]
    return ", ".join(parts)


def ecr_cell(r: Row) -> str:
    """ECR, '!' when its whole interval lies below target; unattainable alphas shown as
    what they are (some group's threshold is +inf: every candidate for those questions)."""
    mark = " !" if r.below_target and r.risk == "coverage" else ""
    text = f"{r.ecr:.3f}{mark}"
    return text if r.attainable else f"{text} (unattainable for some group)"


def hops_cell(r: Row, key: str) -> str:
    return " / ".join(f"{x[key]:.3f}" for _, x in sorted(r.by_hops.items())) or DASH


def coverage_table(results: DeployedResults) -> str:
    lines = [
        "| method | alpha | ECR | 95% CI (templates) | 95% CI (cal+test) | APSS | median / p90 "
        "| empty | recall | precision | F1 | Hits@1 | ECR by hop count | thresholds |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in results.rows:
        if r.risk != "coverage":
            continue
        m = r.metrics
        lines.append(
            f"| {r.method} | {r.alpha:g} | {ecr_cell(r)} | {_ci(r.ecr_lo, r.ecr_hi)} | "
            f"{_ci(r.ecr_lo_cal, r.ecr_hi_cal)} | {r.apss:.2f} | "
            f"{_num(m['size_median'], 'g')} / {_num(m['size_p90'], 'g')} | "
            f"{m['empty_rate']:.3f} | {m['recall']:.3f} | {m['precision']:.3f} | {m['f1']:.3f} | "
            f"{_num(m['hits1'])} | {hops_cell(r, 'ecr')} | {_taus(r)} |"
        )
    return "\n".join(lines)


def fnr_table(results: DeployedResults) -> str:
    lines = [
        "| method | alpha | FNR | 95% CI (templates) | FNR by hop count | APSS | precision | F1 "
        "| ECR |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results.rows:
        mark = " !" if r.risk == "fnr" and r.below_target else ""
        lines.append(
            f"| {r.method} | {r.alpha:g} | {r.fnr:.3f}{mark} "
            f"| {_ci(r.fnr_lo, r.fnr_hi)} | {hops_cell(r, 'fnr')} | {r.apss:.2f} | "
            f"{r.metrics['precision']:.3f} | {r.metrics['f1']:.3f} | {r.ecr:.3f} |"
        )
    return "\n".join(lines)


def gold_table(results: DeployedResults) -> str:
    lines = [
        "| method | alpha | ECR, 1 gold answer | 2-5 | more than 5 | single-answer APSS |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in results.rows:
        m = r.metrics
        lines.append(
            f"| {r.method} | {r.alpha:g} | {_num(m['ecr_gold_1'])} (n={m['n_gold_1']}) | "
            f"{_num(m['ecr_gold_2_5'])} (n={m['n_gold_2_5']}) | {_num(m['ecr_gold_gt5'])} "
            f"(n={m['n_gold_gt5']}) | {_num(r.single['apss'], '.2f')} |"
        )
    return "\n".join(lines)


def diagnosis_table(results: DeployedResults) -> str:
    lines = [
        "| method | KS p | recall cal / test | alpha | test misses / expected (n) | exact p "
        "(Holm) | template permutation p (Holm) | flag | CI width question / template |",
        "|---|---:|---:|---:|---:|---:|---:|---|---:|",
    ]
    for d in results.diagnoses:
        for m in d.miscoverage:
            w = d.widths.get(m["alpha"], {})
            lines.append(
                f"| {d.method} | {d.ks_p:.3g} | {d.recall_cal:.3f} / {d.recall_test:.3f} | "
                f"{m['alpha']:g} | {m['miss_test']} / {m['expected']:.1f} ({m['n_test']}) | "
                f"{_num(m['p'], '.3g')} ({_num(m['p_holm'], '.3g')}) | "
                f"{_num(m.get('p_perm', math.nan), '.3g')} "
                f"({_num(m.get('p_perm_holm', math.nan), '.3g')}) | "
                f"{'**yes**' if m['flag'] else 'no'} "
                f"| {_num(w.get('question'))} / {_num(w.get('template'))} |"
            )
    return "\n".join(lines)


def pooled_table(results: DeployedResults) -> str:
    lines = [
        "| method | alpha | ECR mean | ECR 5th pct | calibration draws reaching 1 - alpha |",
        "|---|---:|---:|---:|---:|",
    ]
    for r in results.rows:
        if r.pooled:
            p = r.pooled
            lines.append(
                f"| {r.method} | {r.alpha:g} | {p['ecr_mean']:.3f} | {p['ecr_p5']:.3f} | "
                f"{p['held']:.0%} |"
            )
    return "\n".join(lines)


def commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10
        )
        return out.stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def markdown_report(h: DeployedResults, title: str = "") -> str:
    notes = "".join(f"\n- {n}" for n in dict.fromkeys(h.notes))
    return f"""# Coverage report{f": {title}" if title else ""}

Commit `{commit()}`; {h.n_cal} calibration and {h.n_test} evaluation questions.

## Deployed protocol: coverage (headline)

Thresholds from the calibration questions alone, as `cpr calibrate` stores them; every
evaluation question answered with its group's threshold. 95% intervals: percentile
bootstrap ({h.boot} replicates) resampling question TEMPLATES (the question with its topic
masked; outcomes cluster by template), with the thresholds fixed, and redrawing the
calibration templates too (thresholds recomputed). `!`: the whole template interval lies
below 1 - alpha. Answer metrics as RoG / GNN-RAG report them (recall = share of a
question's gold answers in its set, precision, per-question F1, all averaged over
questions); APSS = mean set size; empty = share of empty sets.

{coverage_table(h)}

## Answer recall (false-negative rate)

FNR = 1 - answer recall, averaged over questions; rows controlling it (FNR mode) promise
an expected FNR of at most alpha. Every row is listed: coverage rows show what their sets
miss.

{fnr_table(h)}

## Coverage by number of gold answers

{gold_table(h)}

## Diagnostics: calibration vs evaluation questions

Two-sample KS on the scores S (+inf = no gold answer among the candidates; shown, never
flagged); per alpha two one-sided tests of the evaluation split's misses (evaluation/shift.py).
The flag: a template-stratified permutation test (side labels reshuffled within every
question template, thresholds recomputed with their pools re-planned; valid whatever the
template mix and however a template's outcomes correlate), flagged when Holm's adjustment
across the alphas is below 5%. Shown beside it: the exact test against the law of misses
under question-level exchangeability, a convolution over pools of BetaBinomial(n_t, n + 1
- k, k) (questions under the all-questions fallback and unattainable pools left out),
which also reacts to a different template mix. Then retrieval recall on each side, and
the width of the test interval resampling questions against resampling templates.

{diagnosis_table(h)}

## Pooled view (second view)

Calibration and evaluation questions pooled and re-split at random {h.draws} times into a
calibration share of the same size and the rest: mean and 5th percentile of ECR, and the
share of calibration draws whose coverage on the rest reached 1 - alpha (a PAC threshold
promises at least 1 - delta of them; the plain one about half).

{pooled_table(h)}

{hop_level_section(h)}## Notes
{notes}
"""


def hop_level_section(h: DeployedResults) -> str:
    """What the hop-level run says about itself: calibration questions with a canonical
    gold sequence, cap binds, how often open expansion reached a gold answer."""
    if not h.hop_level:
        return ""
    d = h.hop_level
    cal, test = d.get("calibration", {}), d.get("test", {})
    lines = [
        "## Hop-level baseline: what it ran on",
        "",
        f"- caps: {json.dumps(d.get('caps', {}))}",
        f"- calibration: {cal.get('with_gold')} of {cal.get('questions')} questions have a "
        f"canonical gold sequence (lengths {json.dumps(cal.get('gold_length', {}))}); cap "
        f"binds {json.dumps(cal.get('cap_bound', {}))}",
        f"- test: gold reachable for {test.get('gold_reachable')} of {test.get('questions')}, "
        f"open expansion reached a gold answer for {test.get('reached_gold')} "
        f"({_num(test.get('reached_share'))}); expansions capped {test.get('capped')}, cap "
        f"binds {json.dumps(test.get('cap_bound', {}))}, fan-out cuts {test.get('fanout_cut')}",
        "",
    ]
    return "\n".join(lines) + "\n"


CPR = "CPR"
# CPR is drawn in black, thicker, in every panel; every other row of a report has a colour
# and a marker of its own, the same in both figures (Okabe and Ito's colour-blind-safe
# palette first, then matplotlib's tab10 for the rest).
COLOURS = ("#E69F00", "#0072B2", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#8C564B",
           "#9467BD", "#BCBD22", "#17BECF", "#7F7F7F")  # fmt: skip
MARKERS = ("s", "^", "D", "v", "P", "X", "<", ">", "p", "h", "*")


@dataclass(frozen=True)
class Panel:
    title: str
    methods: tuple[str, ...]  # CPR first when the report has it


def panels(methods: list[str]) -> list[Panel]:
    """The few rows a reader compares, one panel each: CPR against the baselines (other
    models, the hop-level method), against its variants (CPR's scores, one rule changed),
    and against conformal top-k on its ranking. The table has every row."""
    kinds: dict[str, list[str]] = {"baselines": [], "variants": [], "top-k": []}
    for m in methods:
        if m != CPR:
            variant, top_k = m.startswith(f"{CPR},"), m.startswith("top-k")
            kinds["variants" if variant else "top-k" if top_k else "baselines"].append(m)
    titles = {
        "baselines": "CPR against the baselines",
        "variants": "CPR against its variants",
        "top-k": "CPR against conformal top-k",
    }
    head = (CPR,) if CPR in methods else ()
    out = [Panel(titles[k], head + tuple(ms)) for k, ms in kinds.items() if ms]
    return out or [Panel(CPR, head)]


def styles(methods: list[str]) -> dict[str, dict]:
    """Line and marker keywords per method."""
    out = {CPR: {"color": "black", "marker": "o", "lw": 2.6, "ms": 7, "zorder": 2}}
    # zorder: CPR under the others, so that a row equal to it still shows on its line
    others = [m for p in panels(methods) for m in p.methods if m != CPR]  # baselines first
    for i, m in enumerate(others):
        out[m] = {"color": COLOURS[i % len(COLOURS)], "marker": MARKERS[i % len(MARKERS)],
                  "lw": 1.3, "ms": 5, "zorder": 3}  # fmt: skip
    return out


def _label(method: str) -> str:
    return textwrap.fill(method, 44, subsequent_indent="  ")


def _legend_below(ax) -> None:
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.13), fontsize=8, frameon=False)


def plot(results: DeployedResults, out_dir: Path) -> list[Path]:
    """ecr.png and apss.png: one panel per kind of comparison (panels), CPR in each."""
    import matplotlib

    matplotlib.use("Agg")  # headless: never needs a display
    import matplotlib.pyplot as plt

    def rows_of(m: str, keep) -> list[Row]:
        return sorted((r for r in results.rows if r.method == m and keep(r)), key=lambda r: r.alpha)

    def figure(kept: list[Panel], suptitle: str):
        fig, axes = plt.subplots(1, len(kept), figsize=(4.6 * len(kept), 4.4), sharey=True,
                                 squeeze=False)  # fmt: skip
        fig.suptitle(suptitle)
        return fig, axes[0]

    def save(fig, name: str) -> Path:
        path = out_dir / name
        fig.savefig(path, dpi=120, bbox_inches="tight")
        plt.close(fig)
        return path

    def coverage(r: Row) -> bool:
        return r.risk == "coverage"

    def sized(r: Row) -> bool:
        return r.apss > 0  # a log axis

    style = styles(results.methods)
    alphas = sorted({r.alpha for r in results.rows}) or [0.5]
    lo, hi = 1 - alphas[-1] - 0.05, 1 - alphas[0] + 0.05
    kept = [p for p in panels(results.methods) if any(rows_of(m, coverage) for m in p.methods)]
    fig, axes = figure(kept, "Coverage: ECR with its 95% interval (templates resampled)")
    for ax, panel in zip(axes, kept, strict=True):
        ax.plot([0, 1], [0, 1], color="0.4", ls="--", lw=1, zorder=1, label="target: 1 - alpha")
        ax.text(lo + 0.04, lo + 0.06, "target 1 - alpha", color="0.3", fontsize=8, rotation=45,
                rotation_mode="anchor", transform_rotates_text=True)  # fmt: skip
        drawn = [m for m in panel.methods if rows_of(m, coverage)]
        for i, m in enumerate(drawn):
            rs = rows_of(m, coverage)
            dodge = (i - (len(drawn) - 1) / 2) * 0.008  # tied rows side by side, not on top
            err = [[r.ecr - r.ecr_lo for r in rs], [r.ecr_hi - r.ecr for r in rs]]
            ax.errorbar([1 - r.alpha + dodge for r in rs], [r.ecr for r in rs], yerr=err,
                        capsize=2, label=_label(m), **style[m])  # fmt: skip
        ax.set(xlim=(lo, hi), xlabel="1 - alpha", title=panel.title)
        ax.grid(alpha=0.3)
        _legend_below(ax)
    axes[0].set(ylabel="ECR (share of questions whose set holds a gold answer)")
    bottom = min([r.ecr_lo for r in results.rows if coverage(r) and r.ecr_lo == r.ecr_lo] + [lo])
    axes[0].set_ylim(max(0.0, bottom - 0.03), 1.01)
    paths = [save(fig, "ecr.png")]
    kept = [p for p in panels(results.methods) if any(rows_of(m, sized) for m in p.methods)]
    fig, axes = figure(kept, "Set size: APSS (mean answers per set, log scale)")
    for ax, panel in zip(axes, kept, strict=True):
        for m in panel.methods:
            rs = rows_of(m, sized)
            if rs:
                ax.plot([r.alpha for r in rs], [r.apss for r in rs], label=_label(m),
                        **style[m])  # fmt: skip
        ax.set_yscale("log")
        ax.set(xlabel="alpha", title=panel.title)
        ax.grid(alpha=0.3, which="both")
        _legend_below(ax)
    axes[0].set(ylabel="APSS (mean answer-set size)")
    paths.append(save(fig, "apss.png"))
    return paths


def results_of(path: Path) -> DeployedResults:
    """A report's results.json read back (JSON keeps no int keys: groups and hop counts come
    back as strings), enough to draw its plots again without re-running the evaluation."""
    d = json.loads(path.read_text(encoding="utf-8"))["deployed"]
    rows = [Row(**r) for r in d["rows"]]
    diagnoses = [Diagnosis(**x) for x in d["diagnoses"]]
    return DeployedResults(**{**d, "rows": rows, "diagnoses": diagnoses})


def write_report(headline: DeployedResults, out_dir: str | Path, title: str = "") -> dict:
    """results.json, report.md, ecr.png, apss.png under out_dir."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files = {"json": out / "results.json", "markdown": out / "report.md"}
    data = {"title": title, "commit": commit(), "deployed": headline.to_dict()}
    files["json"].write_text(json.dumps(data, indent=2, default=str), encoding="utf-8")
    files["markdown"].write_text(markdown_report(headline, title), encoding="utf-8")
    files["ecr_plot"], files["apss_plot"] = plot(headline, out)
    return files


def main(argv: list[str] | None = None) -> int:
    """`python -m cpr_neo4j.evaluation.report --replot DIR ...`: ecr.png and apss.png drawn
    again from each DIR's results.json (the tables and report.md are left as they are)."""
    ap = argparse.ArgumentParser(prog="python -m cpr_neo4j.evaluation.report")
    ap.add_argument("--replot", nargs="+", type=Path, required=True, metavar="DIR",
                    help="report folders written by `cpr eval --out DIR`")  # fmt: skip
    args = ap.parse_args(argv)
    missing = [str(d) for d in args.replot if not (d / "results.json").is_file()]
    if missing:
        print(f"error: no results.json in {', '.join(missing)}: give folders that "
              "`cpr eval --out` wrote", file=sys.stderr)  # fmt: skip
        return 2
    for d in args.replot:
        for path in plot(results_of(d / "results.json"), d):
            print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
