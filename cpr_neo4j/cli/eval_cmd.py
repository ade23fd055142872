"""`cpr eval DATASET`: the deployed protocol (headline), the pooled view, and plots."""

from __future__ import annotations

import click

from cpr_neo4j.cli.calibrate_cmd import parse_alphas
from cpr_neo4j.cli.common import (
    err_console,
    hint_options,
    hints_from,
    open_store,
    progress_bar,
    scope_option,
)
from cpr_neo4j.conformal import DEFAULT_DELTA
from cpr_neo4j.evaluation.eval_tables import SPLITS
from cpr_neo4j.evaluation.evaluate import METHODS, EvalSettings, run
from cpr_neo4j.evaluation.report import coverage_table, diagnosis_table, fnr_table


@click.command("eval")
@click.argument("dataset")
@click.option("--alphas", default="0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8", show_default=True)
@click.option(
    "--methods",
    default="cpr,abl1,abl2",
    show_default=True,
    help=f"Comma-separated, of {', '.join(METHODS)} (top-k and margin score come with cpr).",
)
@click.option("--hops", type=int, help="Questions of this hop count (default: every hop count).")
@click.option("--model", "model_id", help="CPR model id (default: newest CPR model for --hops).")
@click.option(
    "--split",
    type=click.Choice(SPLITS),
    default="test",
    show_default=True,
    help="test: the test split's working half (compare variants here, never choose on it); "
    "final: its other half (the release table only); inner-dev: training questions the model "
    "never saw, halved into calibration and measurement (choose defaults there).",
)
@click.option("--max-questions", type=int, help="Subsample the evaluation split (seeded).")
@click.option("--hop-level/--no-hop-level", default=True, show_default=True)
@click.option(
    "--hop-level-questions",
    default=1000,
    show_default=True,
    help="Evaluation questions for the hop-level baselines (0 = all).",
)
@click.option("--draws", default=500, show_default=True, help="Pooled view: random re-splits.")
@click.option("--boot", default=1000, show_default=True, help="Bootstrap replicates per interval.")
@hint_options()
@click.option(
    "--delta",
    default=DEFAULT_DELTA,
    show_default=True,
    type=click.FloatRange(0, 1, max_open=True),
    help="CPR's guarantee as `cpr ask` gives it by default (PAC with this delta; 0: marginal).",
)
@click.option(
    "--linking",
    type=click.Choice(["text", "gold"]),
    default=None,
    help="Topic entities: linked from the question text, or the dataset's gold ones. "
    "Default: as `cpr calibrate` decides (text when it finds the gold topics for at least half "
    "of up to 500 training questions), so linking misses count as `cpr ask` meets them.",
)
@click.option(
    "--variants/--no-variants",
    default=True,
    show_default=True,
    help="CPR's one-change-at-a-time rows (marginal, one threshold, empty sets, the paper's).",
)
@click.option("--out", "out_dir", type=click.Path(file_okay=False), help="Report folder.")
@click.option("--seed", default=0, show_default=True)
@click.option(
    "--workers",
    type=click.IntRange(1),
    help="Processes that share the questions (default: one per core; 1 = this one only).",
)
@scope_option("the model's")
def eval_(
    dataset: str,
    alphas: str,
    methods: str,
    hops: int | None,
    model_id: str | None,
    split: str,
    max_questions: int | None,
    hop_level: bool,
    hop_level_questions: int,
    draws: int,
    boot: int,
    llm_url: str | None,
    llm_model: str | None,
    llm_parallel: int,
    llm_timeout: float,
    llm: str | None,
    hint_beta: float,
    delta: float,
    linking: str | None,
    variants: bool,
    out_dir: str | None,
    seed: int,
    workers: int | None,
    scope: str | None,
) -> None:
    """Evaluate CPR, its ablations and the baselines on DATASET, as `cpr ask` would answer."""
    chosen = tuple(m.strip() for m in methods.split(",") if m.strip())
    unknown = [m for m in chosen if m not in METHODS]
    if unknown or not chosen:
        raise click.BadParameter(f"unknown method(s) {unknown}; choose from {list(METHODS)}")
    if boot < 100 or draws < 1:
        raise click.BadParameter("--boot must be >= 100 and --draws >= 1")
    hints = hints_from(llm_url, llm_model, llm, llm_parallel, llm_timeout)
    settings = EvalSettings(
        dataset=dataset,
        alphas=parse_alphas(alphas),
        methods=chosen,
        hops=hops,
        split=split,
        model_id=model_id,
        max_questions=max_questions,
        hop_level=hop_level,
        hop_level_questions=hop_level_questions or None,
        hints=hints,
        hint_beta=hint_beta if hints else 0.0,
        boot=boot,
        draws=draws,
        delta=delta or None,
        linking=linking,
        variants=variants,
        seed=seed,
        scope=scope,
        **({} if workers is None else {"workers": workers}),
    )
    with open_store() as store, progress_bar() as bar:

        def progress(name: str, total: int):
            task = bar.add_task(name, total=total)
            return lambda: bar.advance(task)

        out = run(store, settings, say=err_console.print, progress=progress, out_dir=out_dir)
    # plain echo: markdown tables must not be wrapped at the terminal's width
    click.echo("Deployed protocol: coverage")
    click.echo(coverage_table(out.deployed))
    click.echo("\nAnswer recall (FNR)")
    click.echo(fnr_table(out.deployed))
    click.echo("\nDiagnostics (calibration vs evaluation questions)")
    click.echo(diagnosis_table(out.deployed))
    for note in out.deployed.notes:
        click.echo(f"- {note}")
    if hints:
        click.echo(f"- {hints.stats.line()}; hint mode {hints.mode}, prompt {hints.prompt}")
    for kind, path in out.files.items():
        click.echo(f"{kind}: {path}")
