"""`cpr ask "question"`: an answer set with paths and a coverage guarantee."""

from __future__ import annotations

import json
import math
from dataclasses import asdict

import click

from cpr_neo4j.cli.common import console, err_console, open_store, table
from cpr_neo4j.errors import BadInput

SHOWN = 25


@click.command()
@click.argument("question")
@click.option(
    "--alpha",
    default=0.1,
    show_default=True,
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    help="Risk level: the set holds a right answer with prob. >= 1-alpha.",
)
@click.option("--dataset", help="Dataset to ask (default: the most recently calibrated).")
@click.option("--entity", help="Topic entity id or name (skips entity linking).")
@click.option(
    "--model", "model_id", help="Use the calibration of this scoring model (default: newest CPR)."
)
@click.option("--hops", type=int, help="Use the newest CPR model trained on N-hop questions.")
@click.option("--beam", "beam_width", type=int, help="Must equal the calibrated B.")
@click.option("--active", type=int, help="Must equal the calibrated A.")
@click.option("--llm-url", help="Hint server; must match the calibration's hint mode.")
@click.option("--llm-model", default="Qwen/Qwen3-8B", show_default=True)
@click.option(
    "--delta",
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    help="Calibration-conditional (PAC) guarantee: coverage >= 1-alpha with probability "
    ">= 1-delta over the calibration draw (a larger tau than the plain one).",
)
@click.option(
    "--all-candidates",
    is_flag=True,
    help="At an alpha the calibration cannot honour, answer with every candidate (no "
    "guarantee) instead of refusing.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def ask(
    question: str,
    alpha: float,
    dataset: str | None,
    entity: str | None,
    model_id: str | None,
    hops: int | None,
    beam_width: int | None,
    active: int | None,
    llm_url: str | None,
    llm_model: str,
    delta: float | None,
    all_candidates: bool,
    as_json: bool,
) -> None:
    """Answer QUESTION with a conformal answer set and the paths behind it."""
    if not question.strip():  # before the heavy imports: a usage error answers at once
        raise BadInput('empty question: cpr ask "which movies did [Ridley Scott] direct"')
    from cpr_neo4j.stages.ask import ask as run_ask  # torch, scipy: only when asking
    from cpr_neo4j.stages.retrieval import hint_provider

    hints = hint_provider(llm_url, llm_model) if llm_url else None
    with open_store() as store:
        r = run_ask(
            store,
            question,
            alpha,
            dataset,
            entity,
            model_id,
            beam_width,
            active,
            hints,
            hops_filter=hops,
            delta=delta,
            all_candidates=all_candidates,
        )
    if as_json:
        click.echo(json.dumps(asdict(r), default=lambda x: None if x is None else str(x), indent=2))
        return
    for note in r.notes:
        colour = "bold red" if note.startswith("NO GUARANTEE") else "yellow"
        err_console.print(f"[{colour}]{note}[/{colour}]")
    topics = ", ".join(t["name"] for t in r.topics)
    rows = [[a.rank, a.name, f"{a.cost:.3f}", a.path] for a in r.answers[:SHOWN]]
    console.print(
        table(f"{r.question}  (topic: {topics})", ["#", "answer", "score", "best path"], rows)
    )
    if len(r.answers) > SHOWN:
        console.print(f"... and {len(r.answers) - SHOWN} more answers in the set")
    if r.best_outside:
        b = r.best_outside
        console.print(
            f"the set is empty at alpha={r.alpha:g}; best candidate: {b.name} "
            f"(score {b.cost:.3f}, {b.path})"
        )
    tau = "+inf" if math.isinf(r.tau) else f"{r.tau:.4f}"
    pac = "" if r.delta is None else f", delta = {r.delta:g}"
    console.print(
        f"{len(r.answers)} answer(s), tau = {tau} (alpha = {r.alpha:g}{pac}, "
        f"n = {r.n} calibration questions, model {r.model_id})"
    )
    if r.guarantee:
        console.print(f"Guarantee: {r.guarantee}.")
    else:
        err_console.print("[bold red]No coverage guarantee holds for this set.[/bold red]")
    console.print(f"Recorded as (:Ask {{id: '{r.ask_id}'}}).")
    if r.browser_url:
        console.print(f"Browse the paths: {r.browser_url}", soft_wrap=True)
    else:
        console.print(f"Browse the paths in Neo4j Browser with:\n{r.cypher}")
