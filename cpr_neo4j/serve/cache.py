"""Scorers loaded once per model and lent to one request at a time.

Loading a scorer costs seconds (encoder weights, hashing, RCVNet), so the server keeps
them. A PathScorer grows embedding tables as it scores and is not thread-safe, hence a
small pool per model, each scorer lent to one request at a time. All scorers share one
encoder whose encode() runs one call at a time (Hugging Face fast tokenizers fail with
"Already borrowed" when two threads use one at once), batching the calls that wait.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from cpr_neo4j.errors import Conflict, CprError
from cpr_neo4j.serve.coalesce import Coalescer

if TYPE_CHECKING:
    import numpy as np

    from cpr_neo4j.model.costs import CostCache
    from cpr_neo4j.model.encoder import TextEncoder
    from cpr_neo4j.model.scorer import PathScorer

log = logging.getLogger("cpr.serve")
# Texts the shared encoder keeps before its cache is emptied: every distinct question
# lands there, which over a server's life would grow without bound (~1.5 KB each).
MAX_CACHED_TEXTS = 50_000


class LockedEncoder:
    """A TextEncoder usable from many threads. encode() calls that arrive while one runs
    are queued and the next caller encodes them all in one batch (a 32-text batch costs
    about 5 ms per text on CPU against 20 ms for one text alone)."""

    def __init__(self, inner: TextEncoder, max_cached: int = MAX_CACHED_TEXTS):
        self._inner = inner
        self._max_cached = max_cached
        self._calls: Coalescer[list[str], np.ndarray] = Coalescer(self._run)
        self._lock = threading.Lock()  # one call into the inner encoder at a time

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def encode(self, texts: Sequence[str], cache: bool = True) -> np.ndarray:
        """TextEncoder.encode; every text is cached (see _run), whatever `cache` says."""
        return self._calls.submit(list(texts))

    def embed_now(self, texts: Sequence[str]) -> np.ndarray:
        """TextEncoder.embed_now (the canary's: no cache read or written)."""
        with self._lock:
            return self._inner.embed_now(texts)

    def _run(self, calls: list[list[str]]) -> list[np.ndarray]:
        cached = getattr(self._inner, "_cache", None)
        if cached is not None and len(cached) > self._max_cached:
            cached.clear()
        texts = list(dict.fromkeys(t for ts in calls for t in ts))
        # Cached even when the caller keeps its own table (a scorer's paths, cache=False):
        # each scorer of the pool has a table of its own, and without the shared cache
        # every one of them embedded the same relation paths again (~5 ms a call).
        with self._lock:
            vectors = self._inner.encode(texts)
        row = {t: i for i, t in enumerate(texts)}
        return [vectors[[row[t] for t in ts]] for ts in calls]


class ScorerPool:
    """Up to `per_model` scorers per model id; a scorer is dropped after `recycle_after`
    requests so its embedding tables (one row per distinct question) stay bounded."""

    def __init__(self, per_model: int = 2, recycle_after: int = 5_000):
        if per_model < 1:
            raise ValueError("per_model must be >= 1")
        self.per_model = per_model
        self.recycle_after = recycle_after
        self._cond = threading.Condition()
        self._idle: dict[str, list[PathScorer]] = {}
        self._alive: dict[str, int] = {}  # scorers of a model, idle or lent
        self._uses: dict[int, int] = {}  # id(scorer) -> requests served
        self._costs: dict[str, CostCache] = {}  # model id -> its scorers' costs
        self._encoder: LockedEncoder | None = None
        self._encoder_lock = threading.Lock()

    def encoder(self) -> LockedEncoder:
        with self._encoder_lock:
            if self._encoder is None:
                from cpr_neo4j.model.encoder import TextEncoder

                self._encoder = LockedEncoder(TextEncoder())
            return self._encoder

    def loaded(self) -> dict[str, int]:
        """model id -> scorers in memory."""
        with self._cond:
            return {m: n for m, n in self._alive.items() if n}

    @contextmanager
    def lease(self, model_id: str) -> Iterator[PathScorer]:
        """Borrow a scorer; within the block the ask stage's scorer_for() returns it."""
        from cpr_neo4j.model.store import lend

        scorer = self._take(model_id)
        try:
            with lend(model_id, scorer):
                yield scorer
        finally:
            self._give_back(model_id, scorer)

    def _take(self, model_id: str) -> PathScorer:
        with self._cond:
            while True:
                idle = self._idle.get(model_id)
                if idle:
                    return idle.pop()
                if self._alive.get(model_id, 0) < self.per_model:
                    self._alive[model_id] = self._alive.get(model_id, 0) + 1
                    break  # a free slot: load outside the lock, other models go on
                self._cond.wait()
        try:
            return self._load(model_id)
        except BaseException:
            with self._cond:
                self._alive[model_id] -= 1
                self._cond.notify_all()
            raise

    def _load(self, model_id: str) -> PathScorer:
        from cpr_neo4j.model.store import load_scorer

        try:
            scorer = load_scorer(model_id, self.encoder())
        except CprError as exc:
            # The calibration names a model this installation cannot load as calibrated.
            raise Conflict(str(exc)) from exc
        with self._cond:  # a model's scorers share its costs (model.costs)
            shared = self._costs.get(model_id)
        if shared is None:  # the first scorer: start from what `cpr calibrate` kept
            from cpr_neo4j.model.costs import checked_table
            from cpr_neo4j.model.store import model_dir

            table = checked_table(scorer, model_dir(model_id), model_id)
            scorer.costs.put(list(table), list(table.values()))
            if table:
                log.info("model %s: %d path costs kept by cpr calibrate", model_id, len(table))
        with self._cond:
            scorer.costs = self._costs.setdefault(model_id, scorer.costs)
        return scorer

    def _give_back(self, model_id: str, scorer: PathScorer) -> None:
        with self._cond:
            uses = self._uses.get(id(scorer), 0) + 1
            if uses >= self.recycle_after:
                self._uses.pop(id(scorer), None)
                self._alive[model_id] -= 1
            else:
                self._uses[id(scorer)] = uses
                self._idle.setdefault(model_id, []).append(scorer)
            self._cond.notify_all()
