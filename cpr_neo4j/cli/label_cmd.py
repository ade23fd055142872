"""`cpr label NAME questions.txt -o labelled.jsonl`: label plain questions in the terminal."""

from __future__ import annotations

from pathlib import Path

import click

PAGE = 15
HELP = (
    "mark the right answers by number (1 3 5-7), m = more candidates, /TEXT = find by "
    "name, a TEXT = a right answer not listed, s = skip, q = save and quit"
)


@click.command()
@click.argument("dataset")
@click.argument("questions", type=click.Path(path_type=Path))
@click.option(
    "-o",
    "--out",
    type=click.Path(path_type=Path),
    required=True,
    help="Labels file (questions.jsonl); appended to, so a rerun resumes where it stopped.",
)
@click.option(
    "--page", default=PAGE, show_default=True, type=click.IntRange(1), help="Candidates a page."
)
def label(dataset: str, questions: Path, out: Path, page: int) -> None:
    """Label plain questions (one a line in QUESTIONS) against DATASET's graph.

    Each question shows EVERY candidate answer the search finds, with its path, best-ranked
    first and none pre-selected (labels must not depend on a threshold). Mark the right
    ones by number (`/TEXT` lists the candidates whose name holds TEXT, with their
    numbers, wherever they rank); type one the graph lacks with `a TEXT` (the question
    then counts as a miss at calibration); or skip it (saved to OUT.skipped; skip only what
    you cannot judge, not what is hard: skipped questions are not calibrated on). Questions
    come in an order fixed by a hash of their text, so wherever you stop, the labelled ones
    are a random sample of QUESTIONS, as calibration needs. Then:

    \b
        cpr ingest DATASET --questions OUT     # add the labels to the dataset
        cpr train DATASET                      # splits the labels: calibration first
        cpr calibrate DATASET
    """
    from cpr_neo4j.cli.common import open_store
    from cpr_neo4j.training import labelling as lab
    from cpr_neo4j.training.labels import needs_text

    texts = lab.read_questions(questions)
    done = lab.done_ids(out)
    todo = lab.labelling_order([t for t in texts if lab.question_id(t) not in done])
    click.echo(
        f"{len(texts)} question(s) in {questions}: {len(texts) - len(todo)} already in "
        f"{out}, {len(todo)} to label"
    )
    if not todo:
        _next_steps(dataset, out, lab, needs_text)
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    with open_store() as store:
        find = lab.Candidates(store, dataset)
        click.echo(f"candidates from {find.scorer_name}, paths of 1-{find.hops} hops")
        for k, text in enumerate(todo, 1):
            shown = find(text)
            if _ask(shown, k, len(todo), out, lab, page) == "quit":
                click.echo(f"saved; rerun the same command to resume ({out})")
                return
    _next_steps(dataset, out, lab, needs_text)


def _ask(shown, k: int, total: int, out: Path, lab, size: int) -> str:
    click.echo("")
    click.echo(f"[{k}/{total}] {shown.text}")
    if shown.topic_names:
        click.echo(f"entity: {', '.join(shown.topic_names)}")
    else:
        click.echo("no entity of the graph found in this question: a TEXT, s or q")
    n = len(shown.choices)
    click.echo(f"{n} candidate answer(s), best-ranked first; none is pre-selected")
    shown_upto = 0

    def page() -> int:
        end = min(n, shown_upto + size)
        for i in range(shown_upto, end):
            c = shown.choices[i]
            click.echo(f"  {i + 1:>3}. {c.name}    {c.path}")
        if end < n:
            click.echo(f"  ... {n - end} more (m)")
        return end

    shown_upto = page()
    while True:
        reply = click.prompt(HELP, default="", show_default=False, prompt_suffix="\n> ")
        if reply.strip().lower() in ("q", "quit"):
            return "quit"
        if reply.strip().lower() in ("m", "more"):
            if shown_upto >= n:
                click.echo("no more candidates")
            else:
                shown_upto = page()
            continue
        if reply.strip().startswith("/"):
            hits = lab.find(shown.choices, reply.strip()[1:])
            for i in hits:
                c = shown.choices[i]
                click.echo(f"  {i + 1:>3}. {c.name}    {c.path}")
            word = reply.strip()[1:].strip()
            click.echo(
                f"{len(hits)} candidate(s) named with {word!r}"
                if word
                else "type part of a name after / (e.g. /ridley scott)"
            )
            continue
        parsed = lab.parse(reply, n)
        if isinstance(parsed, str):
            click.echo(parsed)
            continue
        lab.save(out, shown, parsed)
        what = {
            "marked": f"saved {len(parsed.numbers)} answer(s)",
            "typed": "saved a typed answer (counts as a miss: the graph lacks it)",
            "skipped": "skipped",
        }[parsed.kind]
        click.echo(what)
        return parsed.kind


def _next_steps(dataset: str, out: Path, lab, needs_text) -> None:
    labelled = len(lab.done_ids(out)) - _count(lab.skipped_path(out))
    from cpr_neo4j.training.labels import calibration_count

    cal = calibration_count(labelled, None)
    click.echo(
        f"{labelled} labelled question(s) in {out}: `cpr train` keeps {cal} for calibration "
        f"(never trained on) and trains on {labelled - cal} plus questions generated from the "
        "graph"
    )
    click.echo(needs_text(cal))
    click.echo(
        f"next: cpr ingest {dataset} --questions {out}, then cpr train {dataset} "
        f"and cpr calibrate {dataset}"
    )


def _count(path: Path) -> int:
    if not path.exists():
        return 0
    return sum(1 for line in path.read_text(encoding="utf-8").splitlines() if line.strip())
