"""One job's shares run on every core: the parent and forked copies of it.

A worker is a fork of the prepared parent (scorers loaded, question embeddings and hints in
memory), so nothing is pickled on the way in and only the job's result (numbers) comes
back. The parent runs share 0 itself, keeping what that share warmed (e.g. its neighbour
cache) for whatever it does next; shares 1..N-1 run in forked processes, which must open
their own Neo4j driver (a forked socket is the parent's connection) and their own ONNX
Runtime session (the encoder reopens it in a new process). Every process runs one thread
per operation while the shares run (model.threads: ONNX Runtime, BLAS, and torch if it is
loaded): N processes on N cores, not N x N threads.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import queue
import sys
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from typing import Any, TypeVar

from cpr_neo4j.graph.store import GraphStore
from cpr_neo4j.model import threads

T = TypeVar("T")
Tick = Callable[[str], None]  # tick(key): one item of `key` done
Job = Callable[[int, int, Tick], T]  # job(share, shares, tick) -> that share's result

_JOB: Job | None = None  # what a forked worker runs: set just before the fork
_TICKS: Any = None  # multiprocessing queue of the workers' ticks


def default_workers() -> int:
    """One per core this process may use."""
    return threads.cores()


def can_fork() -> bool:
    """Forking needs the 'fork' start method and no CUDA context (a forked child cannot
    use its parent's; on a GPU the scoring is not what a second core would speed up).
    torch is asked only when something already loaded it."""
    if "fork" not in mp.get_all_start_methods():
        return False
    from cpr_neo4j.model.embedder import cuda_opened

    torch = sys.modules.get("torch")
    return not cuda_opened() and not (torch is not None and torch.cuda.is_initialized())


def run_shares(job: Job[T], workers: int, tick: Tick) -> list[T]:
    """[job(k, n, tick) for k in range(n)]: share 0 in this process, the others in forked
    workers whose ticks reach `tick` here; n = 1 when `workers` < 2 or forking is unsafe."""
    n = workers if workers > 1 and can_fork() else 1
    if n == 1:
        return [job(0, 1, tick)]
    global _JOB, _TICKS
    ctx = mp.get_context("fork")
    _JOB, _TICKS = job, ctx.Queue()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # no fork warning from tokenizers
    try:
        with threads.limited(1), ProcessPoolExecutor(n - 1, mp_context=ctx) as pool:
            futures = [pool.submit(_child, k, n) for k in range(1, n)]
            mine = job(0, n, lambda key: (tick(key), _drain(tick, 0)))
            while not all(f.done() for f in futures):
                _drain(tick, 0.2)
            results = [mine, *(f.result() for f in futures)]
        _drain(tick, 0)  # the last ticks, flushed as the workers exited
        return results
    finally:
        _JOB, _TICKS = None, None


def interleave(parts: Sequence[Sequence[T]]) -> list[T]:
    """Share k's items back at positions k, k + n, ... (share k took items[k::n])."""
    out: list[Any] = [None] * sum(map(len, parts))
    for k, part in enumerate(parts):
        out[k :: len(parts)] = part
    return out


@contextmanager
def share_store(store: GraphStore, share: int) -> Iterator[GraphStore]:
    """The store a share queries: the parent's for share 0; a forked worker's own driver,
    closed after (a forked socket is still the parent's connection)."""
    if share == 0:
        yield store
        return
    own = GraphStore(store.settings)
    try:
        yield own
    finally:
        own.close()


def _drain(tick: Tick, timeout: float) -> None:
    """Pass on the workers' ticks waiting in the queue (waiting up to `timeout` for one)."""
    while True:
        try:
            key = _TICKS.get(timeout=timeout) if timeout else _TICKS.get_nowait()
        except queue.Empty:
            return
        timeout = 0
        tick(key)


def _child(share: int, shares: int) -> Any:
    threads.set_threads(1)
    assert _JOB is not None  # set by run_shares before the fork
    return _JOB(share, shares, _TICKS.put)
