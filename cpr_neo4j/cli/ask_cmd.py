"""`cpr ask "question"`: an answer set with paths and a coverage guarantee."""

from __future__ import annotations

import json
import math
from typing import Any, TextIO

import click

from cpr_neo4j.cli.common import (
    console,
    err_console,
    hint_options,
    hints_from,
    open_store,
    progress_bar,
    table,
)
from cpr_neo4j.conformal import DEFAULT_DELTA, refuse_fnr_delta
from cpr_neo4j.errors import EMPTY_QUESTION, BadInput, CprError
from cpr_neo4j.options import AskOptions

SHOWN = 25
DEFAULT = click.core.ParameterSource.DEFAULT
# --file: a line names its topic in its own `entity` field, not with --entity
FILE_FIELDS = {"entity": "the line's `entity` field"}


@click.command()
@click.argument("question", required=False)
@click.option(
    "--file",
    "questions_file",
    type=click.File("r"),
    help="Answer many questions: a JSON Lines file ('-' for stdin), one {\"question\": ..., "
    '"entity": ..., "id": ...} object or one plain question per line; writes JSON lines.',
)
@click.option(
    "--output",
    type=click.File("w"),
    default="-",
    help="Where --file writes its JSON lines (default: stdout).",
)
@click.option(
    "--alpha",
    default=0.1,
    show_default=True,
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    help="Risk level: the set holds a right answer with prob. >= 1-alpha.",
)
@click.option(
    "--dataset",
    help="Dataset to ask (default: $CPR_DATASET, else the one `cpr use` set, else the most "
    "recently calibrated, else the most recently ingested).",
)
@click.option(
    "--entity",
    "entities",
    multiple=True,
    help="Topic entity id or name, in any case or spelling (skips linking from the text; "
    "answered under the calibration's curves for named topics); repeat it for several.",
)
@click.option(
    "--model", "model_id", help="Use the calibration of this scoring model (default: newest CPR)."
)
@click.option(
    "--hops",
    type=int,
    help="Answer as an N-hop question, under a calibration for N-hop questions (default: the "
    "calibration for every hop count).",
)
@click.option("--beam", "beam_width", type=int, help="Must equal the calibrated B.")
@click.option("--active", type=int, help="Must equal the calibrated A.")
@hint_options(beta=False)  # beta, model and prompt version: the calibration's, checked
@click.option(
    "--delta",
    default=DEFAULT_DELTA,
    show_default=True,
    type=click.FloatRange(0, 1, max_open=True),
    help="A guarantee for this calibration (PAC): coverage >= 1-alpha with probability "
    ">= 1-delta over the calibration draw, for the question's group and this alpha; 0 gives "
    "the marginal guarantee (on average over calibration draws, a smaller set). Coverage "
    "only: refused with --risk fnr, whose guarantee is marginal.",
)
@click.option(
    "--risk",
    type=click.Choice(["coverage", "fnr"]),
    default="coverage",
    show_default=True,
    help="coverage: the set holds a correct answer with prob. >= 1-alpha; fnr: averaged over "
    "questions with a correct answer and over calibration draws, at least 1-alpha of the "
    "correct answers are in the set (all the answers, not one; no --delta).",
)
@click.option(
    "--allow-empty",
    is_flag=True,
    help="The paper's sets: empty when nothing scores within tau (default: the top-ranked "
    "answers are always in the set, a superset with the same guarantee).",
)
@click.option(
    "--effective-scores",
    is_flag=True,
    help="Calibrate never-empty sets on effective scores (a calibration question whose "
    "top-ranked answers hold a correct one counts as covered at any threshold): the same "
    "guarantee with smaller sets, but fewer of a question's correct answers.",
)
@click.option(
    "--ungrouped",
    is_flag=True,
    help="One threshold for all questions (marginal over kinds of question) instead of one "
    "per group of questions whose best path has the same hop count.",
)
@click.option(
    "--all-candidates",
    is_flag=True,
    help="At an alpha the calibration cannot honour, answer with every candidate (no "
    "guarantee) instead of refusing.",
)
@click.option(
    "--allow-stale",
    is_flag=True,
    help="Answer with a calibration made before the graph changed (no guarantee holds).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def ask(
    question: str | None,
    questions_file: TextIO | None,
    output: TextIO,
    alpha: float,
    dataset: str | None,
    entities: tuple[str, ...],
    model_id: str | None,
    hops: int | None,
    beam_width: int | None,
    active: int | None,
    llm_url: str | None,
    llm_model: str | None,
    llm_parallel: int,
    llm_timeout: float,
    llm: str | None,
    delta: float,
    risk: str,
    allow_empty: bool,
    effective_scores: bool,
    ungrouped: bool,
    all_candidates: bool,
    allow_stale: bool,
    as_json: bool,
) -> None:
    """Answer QUESTION (or every question of --file) with a conformal answer set and the
    paths behind it."""
    if (question is None) == (questions_file is None):
        raise BadInput('give one QUESTION or --file FILE: cpr ask "which movies did [X] direct"')
    if question is not None and not question.strip():  # before the heavy imports
        raise BadInput(EMPTY_QUESTION)
    ctx = click.get_current_context()
    if questions_file is None and ctx.get_parameter_source("output") is not DEFAULT:
        raise BadInput("--output is where --file writes its answers: give --file FILE too")
    items = read_questions(questions_file) if questions_file else None
    explicit = ctx.get_parameter_source("delta") is not DEFAULT
    if explicit:
        refuse_fnr_delta(risk, delta, "--delta")
    options = AskOptions(
        alpha=alpha,
        delta=delta if explicit else None,
        risk=risk,
        dataset=dataset,
        model=model_id,
        hops=hops,
        entity=entities or None,
        beam_width=beam_width,
        active=active,
        allow_empty=allow_empty,
        grouped=not ungrouped,
        effective_scores=effective_scores,
        all_candidates=all_candidates,
        allow_stale=allow_stale,
    )
    from cpr_neo4j.stages.ask import answer  # torch, scipy: only when asking
    from cpr_neo4j.stages.session import UNCALIBRATED

    hints = hints_from(llm_url, llm_model, llm, llm_parallel, llm_timeout)
    with open_store() as store:
        session = options.open(store, hints)
        if items is not None:
            failed = answer_file(session, items, output)
            if failed:
                raise CprError(f"{failed} of {len(items)} questions failed (see their lines)")
            return
        try:
            r = answer(session, question or "", options.entities)
        except CprError as exc:  # a dataset the user did not name: say which one failed
            if not session.chosen:
                raise
            raise type(exc)(
                f"{exc} (asked dataset {session.dataset!r}, {session.chosen}; --dataset NAME "
                "asks another)"
            ) from exc
    if as_json:  # the schema `cpr serve` answers with (docs/usage.md, "One answer's JSON")
        from cpr_neo4j.serve.schemas import response

        click.echo(response(r).model_dump_json(indent=2))
        return
    for note in r.notes:
        colour = "bold red" if "NO GUARANTEE" in note else "yellow"
        err_console.print(f"[{colour}]{note}[/{colour}]")
    topics = ", ".join(t["name"] for t in r.topics)
    rows = [[a.rank, a.name, f"{a.cost:.3f}", a.path] for a in r.answers[:SHOWN]]
    console.print(
        table(f"{r.question}  (topic: {topics})", ["#", "answer", "score", "best path"], rows)
    )
    if len(r.answers) > SHOWN:
        where = "candidates" if r.calibration_id == UNCALIBRATED else "answers in the set"
        console.print(f"... and {len(r.answers) - SHOWN} more {where}")
    if r.best_outside:
        b = r.best_outside
        console.print(
            f"the set is empty at alpha={r.alpha:g}; best candidate: {b.name} "
            f"(score {b.cost:.3f}, {b.path})"
        )
    tau = f"{r.tau:.4g}"  # surprisal taus can be ~1e-7
    if math.isinf(r.tau):  # -inf: effective scores, the top-ranked answers only
        tau = "+inf" if r.tau > 0 else "-inf (the top-ranked answers only)"
    pac = "" if r.delta is None else f", delta = {r.delta:g}"
    what = "lambda" if r.risk == "fnr" else "tau"
    if r.calibration_id == UNCALIBRATED:
        console.print(
            f"{len(r.answers)} candidate(s), ranked (no calibration: no threshold; model "
            f"{r.model_id})"
        )
    else:
        console.print(
            f"{len(r.answers)} answer(s), {what} = {tau} (alpha = {r.alpha:g}{pac}, group "
            f"{r.group}: n = {r.n} calibration questions, model {r.model_id})"
        )
    if r.guarantee:
        console.print(f"Guarantee: {r.guarantee}.")
    else:
        err_console.print("[bold red]No coverage guarantee holds for this set.[/bold red]")
    if session.chosen:  # the request named no dataset: say which answered, and why
        console.print(
            f"Answered from dataset {r.dataset!r} ({session.chosen}; --dataset NAME asks "
            "another, `cpr use NAME` sets the default)."
        )
    console.print(f"Recorded as (:Ask {{id: '{r.ask_id}'}}).")
    from cpr_neo4j.neo4j_server.browser import local_link

    if r.browser_url:  # the local server: a link with the connection and the query filled in
        _, hint = local_link(r.ask_id)
        console.print(f"Browse the paths: {r.browser_url}", soft_wrap=True)
        if hint:
            console.print(hint)
    else:
        print_cypher(r.cypher)
        console.print("(`cpr browser-style` prints a :style command for a readable picture)")


def print_cypher(cypher: str) -> None:
    """The Cypher to paste into Browser, as text: rich would read `[r:TOPIC|ANSWER]` as markup."""
    console.print("Browse the paths in Neo4j Browser with:")
    console.print(cypher, markup=False, highlight=False, soft_wrap=True)


def read_questions(lines: TextIO) -> list[tuple[int, dict]]:
    """(line number, {question, entity?, id?}) per non-blank line; a malformed line becomes
    {"error": ...} so that it fails alone."""
    items = []
    for number, line in enumerate(lines, 1):
        text = line.strip()
        if not text:
            continue
        if not text.startswith("{"):
            items.append((number, {"question": text}))
            continue
        try:
            row = json.loads(text)
        except ValueError as exc:
            row = {"error": f"line {number} is not a question object: {exc}"}
        if not isinstance(row, dict):
            row = {"error": f"line {number} is not a question object: not a JSON object"}
        elif "error" not in row and not isinstance(row.get("question"), str):
            # keep the line's id, so the reply can be matched to what was asked
            kept = {"id": row["id"]} if "id" in row else {}
            row = kept | {
                "error": f'line {number} is not a question object: needs a "question" string'
            }
        items.append((number, row))
    if not items:
        raise BadInput("the questions file has no questions")
    return items


def answer_file(session: Any, items: list[tuple[int, dict]], output: TextIO) -> int:
    """Answer every item in order, one JSON line each as it comes; returns how many failed."""
    from cpr_neo4j.serve.schemas import response
    from cpr_neo4j.stages.ask import ask_many

    session.fields = {**session.fields, **FILE_FIELDS}
    good = ((row["question"], row.get("entity")) for _, row in items if "error" not in row)
    results = ask_many(session, good)
    failed = 0
    with progress_bar() as bar:
        task = bar.add_task("questions", total=len(items))
        for n, row in items:
            key = {"line": n} | ({"id": row["id"]} if "id" in row else {})
            r = row["error"] if "error" in row else next(results)
            if isinstance(r, str):
                out = key | {"error": r, "type": "BadInput"}
            elif isinstance(r, CprError):
                out = key | {"question": row["question"], "error": str(r), "type": type(r).__name__}
            else:
                out = key | json.loads(response(r).model_dump_json())  # infinities: null
            failed += "error" in out
            output.write(json.dumps(out, allow_nan=False) + "\n")
            output.flush()
            bar.advance(task)
    return failed
