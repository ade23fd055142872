"""`cpr use NAME`: the dataset `cpr ask` and `cpr serve` answer when a request names none."""

from __future__ import annotations

import click

from cpr_neo4j.cli.common import console, open_store

NONE = "no default dataset: the most recently calibrated one answers, else the newest ingested"


@click.command()
@click.argument("name", required=False)
@click.option("--clear", is_flag=True, help="Forget the default (the newest calibrated answers).")
def use(name: str | None, clear: bool) -> None:
    """Set the dataset asked when none is named (kept under CPR_HOME; CPR_DATASET wins)."""
    from cpr_neo4j.config import cpr_home
    from cpr_neo4j.stages.session import DATASET_ENV, DEFAULT_FILE, default_choice

    path = cpr_home() / DEFAULT_FILE
    if clear:
        path.unlink(missing_ok=True)
        console.print(NONE)
        return
    if name is None:
        chosen, where = default_choice()
        console.print(f"default dataset: {chosen} (set by {where})" if chosen else NONE)
        return
    from cpr_neo4j.graph import records

    with open_store() as store:
        records.require_dataset(store, name)  # unknown: the known ones listed
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(name + "\n", encoding="utf-8")
    console.print(f"default dataset: {name} (kept in {path})")
    import os

    if os.environ.get(DATASET_ENV) not in (None, "", name):
        console.print(f"note: {DATASET_ENV}={os.environ[DATASET_ENV]} is set and wins over it")
