"""`cpr serve`: answer questions over HTTP; models load once and stay in memory."""

from __future__ import annotations

import json
import os

import click

from cpr_neo4j.cli.common import hint_options, hints_from
from cpr_neo4j.serve.auth import TOKEN_ENV, check_bind

MAX_DEFAULT_WORKERS = 4
KEEPALIVE_REQUESTS = 20  # with workers; bench/serve_split.py: 1.67x the q/s of none, 50 1.56x


@click.command()
@click.option(
    "--host", default="127.0.0.1", show_default=True, help=f"Other hosts need ${TOKEN_ENV}."
)
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535))
@click.option(
    "--scorers",
    default=4,
    show_default=True,
    type=click.IntRange(1, 64),
    help="Scorers per model in memory: questions to one model answered at the same time.",
)
@click.option(
    "--warm/--no-warm",
    default=True,
    show_default=True,
    help="Load each dataset's newest calibrated model before accepting requests.",
)
@click.option(
    "--threads",
    "--torch-threads",  # its name before the encoder and scorer left torch
    "threads",
    default=1,
    show_default=True,
    type=click.IntRange(1, 256),
    help="Threads per encoder / scorer operation (ONNX Runtime, BLAS); requests already run "
    "in parallel, and more threads per operation oversubscribe the cores.",
)
@click.option(
    "--batch/--no-batch",
    default=True,
    show_default=True,
    help="Concurrent requests to one model search together (one Neo4j round trip per hop "
    "for the batch) rather than each alone.",
)
@click.option(
    "--preload/--no-preload",
    default=True,
    show_default=True,
    help="Read a graph of at most 200k entities whole into memory at start-up (MetaQA: "
    "~2 s, ~20 MB), so searches make no neighbour query; else rows are read and kept as "
    "questions need them.",
)
@click.option(
    "--workers",
    default=None,
    type=click.IntRange(1, 64),
    help="Server processes behind the port, sharing nothing but Neo4j (each loads its own "
    "models and rows: memory times N). Default: one per core, at most 4 (one process is "
    "bound by Python's GIL to about one core; on 2 cores, 2 answer 1.8x the questions/s).",
)
@click.option(
    "--keepalive-requests",
    default=None,
    type=click.IntRange(0),
    help=f"Close a client's connection after this many responses (0: never), so that clients "
    f"connected at once spread over the workers again. Default: {KEEPALIVE_REQUESTS} with "
    "several workers, 0 with one.",
)
@click.option("--access-log/--no-access-log", default=False, show_default=True)
@hint_options(beta=False)  # every request uses the calibration's beta; mode and prompt checked
def serve(
    host: str,
    port: int,
    scorers: int,
    warm: bool,
    threads: int,
    batch: bool,
    preload: bool,
    workers: int | None,
    keepalive_requests: int | None,
    access_log: bool,
    llm_url: str | None,
    llm_model: str | None,
    llm_parallel: int,
    llm_timeout: float,
    llm: str | None,
) -> None:
    """Answer questions over HTTP: POST /ask and /ask/batch, GET /health; docs at /docs."""
    token = os.environ.get(TOKEN_ENV) or None
    check_bind(host, token)
    hints = hints_from(llm_url, llm_model, llm, llm_parallel, llm_timeout)
    import uvicorn  # the server stack and the stages: only when serving

    shown = f"[{host}]" if ":" in host else host
    auth = f"bearer token from ${TOKEN_ENV} required" if token else "none (loopback only)"
    click.echo(f"cpr serve on http://{shown}:{port}  (API docs: /docs; auth: {auth})", err=True)
    if hints:
        click.echo(f"relation hints: {hints.mode} (prompt {hints.prompt})", err=True)
    options = dict(
        scorers=scorers, warm=warm, threads=threads, batch=batch, preload=preload,
        llm_url=llm_url, llm_model=llm_model, llm=llm, llm_parallel=llm_parallel,
        llm_timeout=llm_timeout,
    )  # fmt: skip
    from cpr_neo4j.serve.workers import OPTIONS_ENV, app_from_environment

    workers = workers or default_workers()
    if keepalive_requests is None:  # several workers: clients re-spread over them
        keepalive_requests = KEEPALIVE_REQUESTS if workers > 1 else 0
    options["keepalive"] = keepalive_requests or None
    os.environ[OPTIONS_ENV] = json.dumps(options)  # each worker builds its app from them
    run = dict(host=host, port=port, log_level="info", access_log=access_log)
    if workers == 1:
        uvicorn.run(app_from_environment(hints), **run)
        return
    closing = (
        f"; a connection closes after {keepalive_requests} responses" if keepalive_requests else ""
    )
    click.echo(f"{workers} worker processes, sharing nothing but Neo4j{closing}", err=True)
    app = "cpr_neo4j.serve.workers:app_from_environment"
    uvicorn.run(app, factory=True, workers=workers, **run)  # type: ignore[arg-type]


def default_workers() -> int:
    """One server process per core this process may run on, at most MAX_DEFAULT_WORKERS
    (bench/serve.py on 2 cores: 4 processes answered fewer questions/s than 2)."""
    affinity = getattr(os, "sched_getaffinity", None)  # Linux; elsewhere every core
    cores = len(affinity(0)) if affinity else (os.cpu_count() or 1)
    return max(1, min(MAX_DEFAULT_WORKERS, cores))
