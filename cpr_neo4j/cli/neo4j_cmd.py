"""`cpr neo4j install|start|stop|status|logs`: the local server without Docker."""

from __future__ import annotations

import sys
import time

import click

from cpr_neo4j.config import credentials_file
from cpr_neo4j.neo4j_server import server


@click.group()
def neo4j() -> None:
    """Manage the local Neo4j Community server (loopback only, auth on)."""


def _show(info: server.ServerInfo, elapsed: float | None = None) -> None:
    took = f" (ready in {elapsed:.1f} s)" if elapsed is not None else ""
    click.echo(f"Neo4j {info.version} running{took}")
    click.echo(f"  bolt:    {info.uri}")
    click.echo(f"  browser: {info.browser}  (user neo4j, password in {credentials_file()})")
    click.echo(f"  pid:     {info.pid}")
    click.echo(f"  log:     {info.log}")


@neo4j.command()
@click.option("--bolt-port", type=int, help="Default 7687, or $CPR_NEO4J_BOLT_PORT.")
@click.option("--http-port", type=int, help="Default 7474, or $CPR_NEO4J_HTTP_PORT.")
def install(bolt_port: int | None, http_port: int | None) -> None:
    """Fetch Neo4j jars from Maven Central and write config + a random password."""
    server.install(bolt_port, http_port, echo=click.echo)
    click.echo(f"Installed Neo4j {server.NEO4J_VERSION} in {server.home()}")
    click.echo(f"Credentials (0600): {credentials_file()}")


@neo4j.command()
@click.option("--timeout", default=120.0, show_default=True, help="Seconds to wait for Bolt.")
def start(timeout: float) -> None:
    """Start the server (installs first if needed); waits until Bolt answers."""
    began = time.monotonic()
    info = server.start(timeout=timeout, echo=click.echo)
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
