"""One call for many waiting threads: what lets concurrent requests share a batch.

A thread that submits while no call runs becomes the leader: it takes everything queued so
far and runs the batch function once; the others wait for their result. Under load this
turns N encoder calls or N write transactions into one (one commit instead of N)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class _Job(Generic[T, R]):
    __slots__ = ("item", "result", "error", "done")

    def __init__(self, item: T):
        self.item = item
        self.result: R | None = None
        self.error: BaseException | None = None
        self.done = False


class Coalescer(Generic[T, R]):
    """submit(item) -> run(items)[i]; run sees every item queued while the last call ran.
    A failed run fails every item of its batch (they shared the call)."""

    def __init__(self, run: Callable[[list[T]], Sequence[R]]):
        self._batch = run
        self._queue_lock = threading.Lock()
        self._run_lock = threading.Lock()  # one batch at a time
        self._queue: list[_Job[T, R]] = []

    def submit(self, item: T) -> R:
        job: _Job[T, R] = _Job(item)
        with self._queue_lock:
            self._queue.append(job)
        with self._run_lock:
            if not job.done:  # nobody took it yet: run everything queued so far
                with self._queue_lock:
                    jobs, self._queue = self._queue, []
                self._run(jobs)
        if job.error is not None:
            raise job.error
        return job.result  # type: ignore[return-value]

    def _run(self, jobs: list[_Job[T, R]]) -> None:
        try:
            results = self._batch([j.item for j in jobs])
            for j, r in zip(jobs, results, strict=True):
                j.result = r
        except BaseException as exc:  # every waiting caller sees the failure
            for j in jobs:
                j.error = exc
        for j in jobs:
            j.done = True
