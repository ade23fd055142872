"""`cpr drop NAME`: remove a dataset from Neo4j, with what was made from it as chosen."""

from __future__ import annotations

import shutil

import click

from cpr_neo4j.cli.common import console, open_store


@click.command()
@click.argument("name")
@click.option(
    "--asks",
    type=click.Choice(["keep", "delete"]),
    default="keep",
    show_default=True,
    help="The dataset's (:Ask) records: keep them (their properties; their links to the "
    "deleted entities go) or delete them.",
)
@click.option(
    "--models",
    type=click.Choice(["stale", "delete"]),
    default="stale",
    show_default=True,
    help="Scoring models trained on it and calibrations made on it: keep them marked stale "
    "(never served for a later ingest of NAME) or delete them (nodes and model folders "
    "under CPR_HOME).",
)
@click.option("--yes", is_flag=True, help="Do it without asking.")
def drop(name: str, asks: str, models: str, yes: bool) -> None:
    """Remove dataset NAME from Neo4j: its entities, triples, relations, questions and
    dataset record. Other datasets and nodes cpr did not make are not touched."""
    from cpr_neo4j.graph import records
    from cpr_neo4j.graph.ingest import counts
    from cpr_neo4j.graph.ingest import drop as drop_dataset
    from cpr_neo4j.model.store import model_dir

    with open_store() as store:
        records.require_dataset(store, name)
        before = counts(store, name)
        if not yes:
            click.confirm(
                f"delete dataset {name} ({before['entities']} entities, {before['triples']} "
                f"triples, {sum(before['questions'].values())} questions)?",
                abort=True,
                err=True,
            )
        done = drop_dataset(store, name, asks=asks == "delete", models=models == "delete")
    folders = 0
    if done.models_deleted:
        for mid in done.models:
            path = model_dir(mid)
            if path.is_dir():
                shutil.rmtree(path)
                folders += 1
    console.print(
        f"dropped {name}: {before['entities']} entities, {before['triples']} triples, "
        f"{sum(before['questions'].values())} questions ({done.nodes} nodes deleted)"
    )
    console.print(
        f"(:Ask) records: {done.asks} deleted" if asks == "delete" else "(:Ask) records kept"
    )
    what = f"{len(done.models)} scoring model(s) and {len(done.calibrations)} calibration(s)"
    console.print(
        f"{what} deleted ({folders} model folder(s) removed)"
        if done.models_deleted
        else f"{what} kept, marked stale (`cpr drop {name} --models delete` removes them)"
    )
