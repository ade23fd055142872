"""`cpr calibrate DATASET`: query-level conformal thresholds written to Neo4j."""

from __future__ import annotations

import math

import click

from cpr_neo4j.cli.common import (
    console,
    err_console,
    hint_options,
    hints_from,
    open_store,
    progress_bar,
    scope_option,
    table,
)
from cpr_neo4j.conformal import DEFAULT_DELTA
from cpr_neo4j.model.costs import TABLE
from cpr_neo4j.stages.calibrate import AUTO, DEFAULT_ALPHAS, GOLD, TEXT
from cpr_neo4j.stages.calibrate import calibrate as run_calibrate


def _tau(t: float) -> str:
    return "+inf (unattainable)" if math.isinf(t) else f"{t:.4f}"


def calibration_table(dataset: str, result, levels: tuple[float, ...]):
    """Thresholds per alpha and group: coverage (with the default delta) and FNR."""
    from cpr_neo4j.conformal.guarantee import request

    groups = sorted(g for g in result.groups if g)
    cal = result.calibrated
    rows = []
    for a in levels:
        cov = request(a, result.delta)
        fnr = request(a, None, "fnr")
        rows.append(
            [f"{a:g}", f"{1 - a:.0%}"]
            + [_tau(cal.threshold(cov, g).value) for g in groups]
            + [_tau(cal.threshold(fnr, g).value) for g in groups]
        )
    pac = f"delta={result.delta:g}" if result.delta else "marginal"
    return table(
        f"{dataset}: n = {result.n} calibration questions, model {result.model_id}",
        ["alpha", "coverage"]
        + [f"tau g{g} ({pac})" for g in groups]
        + [f"FNR lambda g{g}" for g in groups],
        rows,
    )


def parse_alphas(text: str) -> tuple[float, ...]:
    try:
        alphas = tuple(float(a) for a in text.split(",") if a.strip())
    except ValueError as exc:
        raise click.BadParameter(f"not a comma-separated list of numbers: {text}") from exc
    if not alphas or not all(0 < a < 1 for a in alphas):
        raise click.BadParameter("every alpha must lie strictly between 0 and 1")
    return alphas


@click.command()
@click.argument("dataset")
@click.option(
    "--alpha",
    "alphas",
    default=",".join(map(str, DEFAULT_ALPHAS)),
    show_default=True,
    help="Risk levels to precompute (any other is served from the stored scores).",
)
@click.option(
    "--model", "model_id", help="Scoring model id (default: the newest CPR model for --hops)."
)
@click.option("--hops", type=int, help="Pick the newest CPR model trained on N-hop questions.")
@click.option("--beam", "beam_width", default=32, show_default=True, help="TreeG branch-out B.")
@click.option("--active", default=32, show_default=True, help="TreeG active set A.")
@hint_options()
@click.option(
    "--delta",
    default=DEFAULT_DELTA,
    show_default=True,
    type=click.FloatRange(0, 1, max_open=True),
    help="The default `cpr ask` guarantee for this calibration (PAC: coverage >= 1-alpha "
    "with probability >= 1-delta over the calibration draw); 0: marginal. Any delta can be "
    "asked later: the scores are stored.",
)
@click.option(
    "--linking",
    type=click.Choice([AUTO, TEXT, GOLD]),
    default=AUTO,
    show_default=True,
    help="Topic entities of calibration questions: 'text' links the question text as "
    "`cpr ask` does (its guarantee then covers linking errors), 'gold' uses the dataset's "
    "(then `cpr ask` needs --entity); 'auto' is text when it finds the gold topics for at "
    "least half the questions.",
)
@scope_option("the model's (subgraph when it was trained so)")
def calibrate(
    dataset: str,
    alphas: str,
    model_id: str | None,
    hops: int | None,
    beam_width: int,
    active: int,
    llm_url: str | None,
    llm_model: str | None,
    llm_parallel: int,
    llm_timeout: float,
    llm: str | None,
    hint_beta: float,
    delta: float,
    linking: str,
    scope: str | None,
) -> None:
    """Calibrate tau on DATASET's held-out calibration questions."""
    levels = parse_alphas(alphas)
    hints = hints_from(llm_url, llm_model, llm, llm_parallel, llm_timeout)
    with open_store() as store, progress_bar() as bar:
        task = bar.add_task("calibration questions", total=None)
        result = run_calibrate(
            store,
            dataset,
            model_id,
            levels,
            beam_width,
            active,
            hints,
            hint_beta if hints else 0.0,
            tick=lambda: bar.advance(task),
            on_questions=lambda n: bar.update(task, total=n),
            hops_filter=hops,
            delta=delta or None,
            linking=linking,
            scope=scope,
        )
    if hints:
        console.print(f"{hints.stats.line()}; hint mode {hints.mode}, prompt {hints.prompt}")
    for w in dict.fromkeys(result.warnings):
        err_console.print(f"[yellow]note: {w}[/yellow]")
    console.print(calibration_table(dataset, result, levels))
    console.print(
        f"retrieval recall on calibration questions: {result.recall:.1%}; groups (hop count "
        "of the best answer's path): "
        + ", ".join(f"{g}: {n} questions" for g, n in sorted(result.groups.items()))
        + f"; score: {result.spec.get('family')} (T = {result.spec.get('T', 0):.3g}); "
        "`cpr ask` refuses an alpha whose threshold is +inf for the question's group"
    )
    how = {TEXT: "linked from the question text, as `cpr ask` does", GOLD: "the gold ones"}
    console.print(
        f"entity linking: the question text finds the gold topic entities for "
        f"{result.linking_accuracy:.1%} of up to 500 training questions (what --linking auto "
        f"decides on; a tie counts when the search could take the gold one); calibrated with "
        f"topic entities {how[result.linking]}"
        + (
            f" (the search took the gold ones for {result.linked_calibration:.1%} of "
            "calibration questions)"
            if result.linking == TEXT
            else ""
        )
        + (" (so `cpr ask` needs --entity)" if result.linking == GOLD else "")
    )
    if result.costs_kept:
        console.print(
            f"path costs kept for `cpr serve` (questions of a form met here skip the net): "
            f"{result.costs_kept} in the model's {TABLE}"
        )
    nxt = f'cpr ask "..." --dataset {dataset} --alpha 0.1'
    if result.scope == "subgraph":
        console.print(
            "scope: each question answered inside its own subgraph; `cpr ask` refuses this "
            f"calibration (a new question has none): `cpr calibrate {dataset} --scope graph`"
        )
        nxt = f"cpr eval {dataset} --scope subgraph"
    console.print(f"calibration {result.id} written to Neo4j; next: {nxt}")
