"""Threads per operation for the scoring stack, set in one place.

ONNX Runtime's intra-op pool (the encoder reads `threads()` when it opens a session), numpy's
BLAS (the RCVNet forward) and torch when something already imported it. A CLI process uses
every core; `cpr serve` (requests already run in parallel) and forked workers (N processes
on N cores) ask for one thread each, or the cores are oversubscribed N x N.
CPR_THREADS=n in the environment sets the default in place of every core (CI runs the
numeric tests under 1 and 2 ONNX Runtime threads with it; numpy's BLAS reads its own
OPENBLAS_NUM_THREADS). Scores do not depend on it: docs/method.md.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_asked: int | None = None  # None: CPR_THREADS, else every core this process may use


def cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def threads() -> int:
    return _asked or _from_env() or cores()


def _from_env() -> int | None:
    value = os.environ.get("CPR_THREADS", "").strip()
    return max(1, int(value)) if value.isdigit() else None


def set_threads(n: int | None) -> None:
    """Threads per operation from now on (None: every core for ONNX Runtime; BLAS and
    torch then keep theirs). An open encoder session reopens with it on its next call."""
    global _asked
    _asked = n
    if n is not None:
        _limit_blas(n)
        torch = sys.modules.get("torch")  # never imported for this: only when already there
        if torch is not None:
            torch.set_num_threads(n)


@contextmanager
def limited(n: int) -> Iterator[None]:
    """Threads per operation set to `n` for the block, then what was there before."""
    global _asked
    before = _asked
    torch = sys.modules.get("torch")
    torch_before = torch.get_num_threads() if torch is not None else None
    _asked = n
    blas = _limit_blas(n)
    if torch is not None:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        _asked = before
        if blas is not None:
            blas.restore_original_limits()
        if torch is not None and torch_before is not None:
            torch.set_num_threads(torch_before)


def _limit_blas(n: int) -> Any:
    """BLAS pools (numpy's OpenBLAS) limited to n; the limiter, to restore them, or None.
    numpy is imported first: threadpoolctl limits only the libraries already loaded, so
    called before numpy it limited nothing, and OpenBLAS later ran its default threads,
    one of them spinning a core between products (every caller loads numpy anyway)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # then BLAS keeps its own default
        return None
    import numpy  # noqa: F401  # loads OpenBLAS, so that the limit reaches it

    return threadpool_limits(limits=n, user_api="blas")
