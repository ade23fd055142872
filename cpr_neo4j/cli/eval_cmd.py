"""`cpr eval DATASET`: ECR / APSS / coverage efficiency per alpha and method, with plots."""

from __future__ import annotations

import click

from cpr_neo4j.cli.calibrate_cmd import parse_alphas
from cpr_neo4j.cli.common import console, err_console, open_store, progress_bar
from cpr_neo4j.conformal.report import markdown_table
from cpr_neo4j.stages.evaluate import METHODS, EvalSettings, run


@click.command("eval")
@click.argument("dataset")
@click.option("--alphas", default="0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8", show_default=True)
@click.option("--repeats", default=20, show_default=True, help="Random calibration draws.")
@click.option(
    "--methods",
    default="cpr,abl1,abl2",
    show_default=True,
    help=f"Comma-separated, of {', '.join(METHODS)} (baselines come with cpr).",
)
@click.option("--hops", type=int, help="Evaluate the CPR model trained at this depth.")
@click.option("--split", default="test", show_default=True)
@click.option("--max-questions", type=int, help="Subsample the test split (seeded).")
@click.option("--seed", default=0, show_default=True)
def eval_(
    dataset: str,
    alphas: str,
    repeats: int,
    methods: str,
    hops: int | None,
    split: str,
    max_questions: int | None,
    seed: int,
) -> None:
    """Evaluate CPR, its ablations and the baselines on DATASET's test questions."""
    chosen = tuple(m.strip() for m in methods.split(",") if m.strip())
    unknown = [m for m in chosen if m not in METHODS]
    if unknown or not chosen:
        raise click.BadParameter(f"unknown method(s) {unknown}; choose from {list(METHODS)}")
    settings = EvalSettings(
        dataset, parse_alphas(alphas), repeats, chosen, hops, split, max_questions, seed=seed
    )
    with open_store() as store, progress_bar() as bar:

        def progress(name: str, total: int):
            task = bar.add_task(name, total=total)
            return lambda: bar.advance(task)

        results, files = run(store, settings, say=err_console.print, progress=progress)
    console.print(markdown_table(results))
    for note in results.notes:
        console.print(f"- {note}")
    for kind, path in files.items():
        console.print(f"{kind}: {path}")
