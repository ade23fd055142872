"""`cpr neo4j install|start|stop|status|logs`: the local server without Docker."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any, TypeVar

import click

from cpr_neo4j.config import credentials_file
from cpr_neo4j.neo4j_server import install as installer
from cpr_neo4j.neo4j_server import server

F = TypeVar("F", bound=Callable[..., Any])


@click.group()
def neo4j() -> None:
    """Manage the local Neo4j Community server (loopback only, auth on)."""


def _show(info: server.ServerInfo, elapsed: float | None = None) -> None:
    took = f" (ready in {elapsed:.1f} s)" if elapsed is not None else ""
    click.echo(f"Neo4j {info.version} running{took}")
    click.echo(f"  bolt:    {info.uri}")
    click.echo(f"  browser: {info.browser}  (user neo4j, password in {credentials_file()})")
    click.echo(f"  pid:     {info.pid}")
    if info.memory:
        click.echo(f"  memory:  heap {info.memory.heap}, page cache {info.memory.pagecache}")
    click.echo(f"  log:     {info.log}")


def memory_options(f: F) -> F:
    """--heap / --pagecache, shared by install and start."""
    f = click.option(
        "--pagecache",
        help="Page cache size, e.g. 4g: ideally the store's size on disk (see the README's "
        "Large graphs). Default: as last set, else $CPR_NEO4J_PAGECACHE, else 1/12 of RAM.",
    )(f)
    return click.option(
        "--heap",
        help="JVM heap, e.g. 2g. Default: as last set, else $CPR_NEO4J_HEAP, else 1/12 of "
        "RAM (1-4g). Kept in neo4j.conf.",
    )(f)


@neo4j.command()
@click.option("--bolt-port", type=int, help="Default 7687, or $CPR_NEO4J_BOLT_PORT.")
@click.option("--http-port", type=int, help="Default 7474, or $CPR_NEO4J_HTTP_PORT.")
@memory_options
def install(
    bolt_port: int | None, http_port: int | None, heap: str | None, pagecache: str | None
) -> None:
    """Fetch Neo4j jars from Maven Central and write config + a random password."""
    installer.install(bolt_port, http_port, echo=click.echo, heap=heap, pagecache=pagecache)
    click.echo(f"Installed Neo4j {installer.NEO4J_VERSION} in {server.home()}")
    click.echo(f"Credentials (0600): {credentials_file()}")


@neo4j.command()
@click.option("--timeout", default=120.0, show_default=True, help="Seconds to wait for Bolt.")
@memory_options
def start(timeout: float, heap: str | None, pagecache: str | None) -> None:
    """Start the server (installs first if needed); waits until Bolt answers."""
    began = time.monotonic()
    info = server.start(timeout=timeout, echo=click.echo, heap=heap, pagecache=pagecache)
    _show(info, time.monotonic() - began)


@neo4j.command()
def stop() -> None:
    """Stop the server."""
    click.echo("Neo4j stopped" if server.stop() else "Neo4j was not running")


@neo4j.command()
def status() -> None:
    """Say whether the server runs; exit 1 when it does not."""
    info = server.status()
    if info is None:
        state = "not installed" if not server.is_installed() else "not running"
        click.echo(f"Neo4j is {state} (start it with `cpr neo4j start`)")
        sys.exit(1)
    _show(info)


@neo4j.command()
@click.option("-n", "--lines", default=40, show_default=True)
def logs(lines: int) -> None:
    """Print the end of the server logs."""
    click.echo(server.log_tail(lines))
