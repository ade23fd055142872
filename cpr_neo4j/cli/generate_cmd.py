"""`cpr generate NAME -o FILE`: questions generated from the graph, to read or reuse."""

from __future__ import annotations

import json
from pathlib import Path

import click

from cpr_neo4j.cli.common import console, open_store


@click.command()
@click.argument("dataset")
@click.option("-n", "count", default=20, show_default=True, help="Questions to generate.")
@click.option("--hops", type=click.IntRange(1, 4), help="Longest relation path [the model's H].")
@click.option("--seed", default=0, show_default=True)
@click.option("-o", "--out", type=click.Path(path_type=Path), help="Write them as JSON lines here.")
@click.option("--llm-url", help="OpenAI-compatible server that paraphrases each question.")
@click.option("--llm-model", help="Model name the --llm-url server serves.")
def generate(
    dataset: str,
    count: int,
    hops: int | None,
    seed: int,
    out: Path | None,
    llm_url: str | None,
    llm_model: str | None,
) -> None:
    """Generate training questions from DATASET's graph: relation paths of 1..H hops from
    sampled entities, worded from the relation names, answers read off the graph.

    What `cpr train --generated N` adds to its training questions (the same generator).
    They are training data only: their split is `generated`, which `cpr ingest` refuses,
    and `cpr calibrate` refuses any generated question.
    """
    from cpr_neo4j.graph import records
    from cpr_neo4j.training import questions as qsel
    from cpr_neo4j.training.generate import generate as make
    from cpr_neo4j.training.generate import labelled_splits
    from cpr_neo4j.training.paraphrase import Paraphraser

    rewrite = Paraphraser(llm_url, llm_model) if llm_url else None
    with open_store() as store:
        records.require_dataset(store, dataset)
        have = labelled_splits(store, dataset)
        depth = hops or (qsel.default_hops(store, dataset, qsel.training_split(store, dataset))
                         if have else 2)  # fmt: skip
        made = make(
            store,
            dataset,
            count,
            depth,
            records.relation_text(store, dataset),
            seed=seed,
            topic_answers=records.topic_answers(store, dataset),
            paraphrase=rewrite,
        )
    for g in made[:10]:
        more = f" (+{len(g.answers) - 3})" if len(g.answers) > 3 else ""
        console.print(
            f"{g.text}  [dim]{' then '.join(s.key() for s in g.path)} -> "
            f"{', '.join(g.answers[:3])}{more}[/dim]",
            highlight=False,
        )
    said = f"{len(made)} question(s) generated"
    if rewrite:
        said += f", {rewrite.stats.rewritten} paraphrased ({rewrite.stats.failed} kept as worded)"
    if out:
        out.write_text("".join(json.dumps(g.to_json(), ensure_ascii=False) + "\n" for g in made))
        said += f", written to {out}"
    console.print(said)
