"""Helpers shared by CLI commands: the store, progress bars, tables."""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

if TYPE_CHECKING:
    from cpr_neo4j.graph.store import GraphStore

console = Console()
err_console = Console(stderr=True)


def open_store() -> GraphStore:
    from cpr_neo4j.graph.store import GraphStore  # the driver import costs ~0.5 s: only when used

    return GraphStore()


@contextmanager
def progress_bar(transient: bool = False):
    """A rich progress bar on stderr (quiet when stderr is not a terminal)."""
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console,
        transient=transient,
        disable=not err_console.is_terminal,
    ) as bar:
        yield bar


def table(title: str, columns: list[str], rows: list[list]) -> Table:
    t = Table(title=title)
    for c in columns:
        t.add_column(c, justify="right" if c != columns[0] else "left")
    for r in rows:
        t.add_row(*[str(x) for x in r])
    return t
