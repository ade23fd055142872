"""`cpr serve --workers 2` when every client connection lands on one worker, with and
without closing connections after N responses (`--keepalive-requests`).

    python bench/serve_split.py [--rounds 2] [--questions 1200] [--limits 0,20,50]

The workers share one listening socket, and asyncio accepts every queued connection at
once, so clients that connect together can all land on one worker. This forces that
split: one worker is stopped (SIGSTOP) while 8 clients connect, then resumed, and the 8
closed-loop clients ask `metaqa-plain` test questions of every hop count. Prints
questions/s and each worker's CPU seconds per setting, alternating settings per round,
and the ratio of each limit's mean questions/s to no limit's (0) in the same run.
"""

from __future__ import annotations

import argparse
import itertools
import os
import signal
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.serve import (  # noqa: E402
    _children,
    cpu_seconds,
    free_port,
    run_clients,
    server_log,
    start_server,
)
from cpr_neo4j.graph import records  # noqa: E402
from cpr_neo4j.graph.store import GraphStore  # noqa: E402

DATASET = "metaqa-plain"
CLIENTS = 8


def workers_of(pid: int) -> list[int]:
    """uvicorn's worker processes (spawned children, not multiprocessing's tracker)."""
    out = []
    for child in _children(pid):
        cmd = Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ")
        if b"resource_tracker" not in cmd:
            out.append(child)
    return out


def one_run(limit: int, bodies: list[dict], warm: list[dict]) -> tuple[float, list[float]]:
    """(questions/s, each worker's CPU seconds) with every connection on one worker."""
    port = free_port()
    extra = ("--workers", "2", "--keepalive-requests", str(limit))
    proc = start_server(port, 4, server_log(port, "split"), extra=extra)
    url = f"http://127.0.0.1:{port}/ask"
    try:
        workers = workers_of(proc.pid)
        if len(workers) != 2:
            sys.exit(f"expected 2 workers, found {workers}")
        for _ in range(3):  # new connections each time: both workers load their models
            run_clients(url, warm, CLIENTS)
        local = threading.local()

        def connect(_: int) -> None:
            local.session = requests.Session()
            local.session.post(url, json=warm[0], timeout=120).raise_for_status()

        def ask(body: dict) -> int:
            return local.session.post(url, json=body, timeout=300).status_code

        with ThreadPoolExecutor(CLIENTS) as pool:
            os.kill(workers[1], signal.SIGSTOP)
            try:
                list(pool.map(connect, range(CLIENTS)))  # every connection on workers[0]
            finally:
                os.kill(workers[1], signal.SIGCONT)
            before = [cpu_seconds(w) for w in workers]
            began = time.perf_counter()
            codes = list(pool.map(ask, bodies))
            wall = time.perf_counter() - began
            used = [cpu_seconds(w) - b for w, b in zip(workers, before, strict=True)]
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    failed = len(codes) - codes.count(200)
    if failed:
        print(f"  {failed} requests failed", flush=True)
    return len(bodies) / wall, used


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--questions", type=int, default=1200)
    ap.add_argument("--limits", default="0,20,50", help="--keepalive-requests values; 0 first")
    args = ap.parse_args()
    limits = [int(v) for v in args.limits.split(",")]
    with GraphStore() as store:
        by_hops = {h: records.questions(store, DATASET, "test", h) for h in (1, 2, 3)}
    rows = [r for group in itertools.zip_longest(*by_hops.values()) for r in group if r]
    body = [{"question": q.text, "dataset": DATASET, "alpha": 0.1} for q in rows]
    bodies, warm = body[: args.questions], body[-5 * CLIENTS :]
    qps: dict[int, list[float]] = {n: [] for n in limits}
    for r in range(args.rounds):
        for n in limits:
            rate, used = one_run(n, bodies, warm)
            qps[n].append(rate)
            cpu = " / ".join(f"{u:.1f}" for u in used)
            print(f"round {r + 1}, --keepalive-requests {n}: {rate:.1f} questions/s, worker CPU "
                  f"{cpu} s (the first worker took every connection)", flush=True)  # fmt: skip
    base = statistics.mean(qps[limits[0]])
    for n in limits[1:]:
        mean = statistics.mean(qps[n])
        print(f"--keepalive-requests {n}: mean {mean:.1f} questions/s, {mean / base:.2f}x "
              f"--keepalive-requests {limits[0]}'s {base:.1f}")  # fmt: skip


if __name__ == "__main__":
    main()
