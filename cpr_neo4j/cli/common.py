"""Helpers shared by CLI commands: the store, progress bars, tables, hint options."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

if TYPE_CHECKING:
    from cpr_neo4j.graph.store import GraphStore
    from cpr_neo4j.hints.base import HintProvider

F = TypeVar("F", bound=Callable[..., Any])

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


def hint_options(beta: bool = True) -> Callable[[F], F]:
    """The hint provider options shared by calibrate, ask, eval and serve: --llm-url
    [--llm-model] (any OpenAI-compatible server), --llm vllm:MODEL (in-process, GPU), or
    neither (no hints); --hint-beta where the command sets the weight."""
    from cpr_neo4j.hints.base import DEFAULT_HINT_BETA, DEFAULT_LLM_MODEL

    options = [
        click.option(
            "--llm-url",
            help="OpenAI-compatible server for relation hints (`vllm serve`, llama.cpp's "
            "server: `cpr llm start`, ...).",
        ),
        click.option(
            "--llm-model", help=f"Model name the --llm-url server serves [{DEFAULT_LLM_MODEL}]."
        ),
        click.option(
            "--llm-parallel",
            default=1,
            show_default=True,
            type=click.IntRange(1, 64),
            help="Hint requests in flight at once (a vLLM server batches them; llama.cpp's "
            "answers one at a time, so keep 1 there).",
        ),
        click.option(
            "--llm-timeout",
            default=30.0,
            show_default=True,
            type=click.FloatRange(1),
            help="Seconds to wait for one hint reply (a CPU server under load can need more).",
        ),
        click.option(
            "--llm",
            metavar="vllm:MODEL|none",
            help="In-process vLLM hints (needs a GPU and the `llm` extra); none: no hints.",
        ),
    ]
    if beta:
        options.append(
            click.option(
                "--hint-beta",
                default=DEFAULT_HINT_BETA,
                show_default=True,
                type=click.FloatRange(0),
                help="Hint weight beta in V' = V - beta x hint similarity (with an LLM).",
            )
        )

    def apply(f: F) -> F:
        for option in reversed(options):
            f = option(f)
        return f

    return apply


def hints_from(
    llm_url: str | None,
    llm_model: str | None,
    llm: str | None,
    parallel: int = 1,
    timeout: float = 30.0,
) -> HintProvider | None:
    """stages/retrieval.py `hints_from`, imported when called (the CLI starts light)."""
    from cpr_neo4j.stages.retrieval import hints_from as provider

    return provider(llm_url, llm_model, llm, parallel, timeout)


def scope_option(default_text: str) -> Callable[[F], F]:
    """--scope subgraph|graph (train, calibrate, eval): answer each question inside its own
    subgraph (the paper's WebQSP/CWQ setting) or over the whole graph (what `cpr ask` does)."""
    return click.option(
        "--scope",
        type=click.Choice(["subgraph", "graph"]),
        default=None,
        help="Search each question's own subgraph (IN_SUBGRAPH members) or the whole graph "
        f"(`cpr ask` needs a graph-scope calibration). Default: {default_text}.",
    )
