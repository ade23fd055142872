"""`cpr llm start|stop|status`: a local llama.cpp hint server (SmolLM2, CPU only)."""

from __future__ import annotations

import click

from cpr_neo4j.hints import server as llm_server


@click.group()
def llm() -> None:
    """Run a local OpenAI-compatible hint server on the CPU (llama.cpp + SmolLM2-135M)."""


def _use(url: str) -> str:
    return f"--llm-url {url} --llm-model {llm_server.MODEL_ALIAS}"


@llm.command()
@click.option("--port", default=llm_server.DEFAULT_PORT, show_default=True)
@click.option("--host", default="127.0.0.1", show_default=True, help="Loopback only.")
def start(port: int, host: str) -> None:
    """Start the server in the background (installs nothing: needs the llm-cpu extra)."""
    r = llm_server.start(host, port)
    click.echo(f"llama.cpp server (pid {r.pid}) with {llm_server.MODEL_ALIAS} on {r.url}")
    click.echo(f"use it with: cpr calibrate metaqa --hops 2 {_use(r.url)}")


@llm.command()
def stop() -> None:
    """Stop the server `cpr llm start` started."""
    r = llm_server.stop()
    click.echo(f"stopped the llama.cpp server (pid {r.pid})" if r else "no server was running")


@llm.command()
def status() -> None:
    """Whether the server runs, and the options that use it."""
    r = llm_server.running()
    if r is None:
        click.echo("not running: `cpr llm start`")
        raise SystemExit(1)
    up = "answering" if llm_server.ready(r.url) else "NOT answering"
    click.echo(f"pid {r.pid}, {r.url}, {up}; use {_use(r.url)}")
