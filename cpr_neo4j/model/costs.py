"""Path costs already computed, by (masked question, relation path), for one net.

A cost is a function of the question's text and the relation path alone, the same bits in
any batch, order, thread count or BLAS kernel (model.exact; embeddings are too, as the
encoder never pads a batch), so a kept cost is the one computing would give. Questions of
one form ("who directed X", MetaQA's templates) share their masked text: the next one of
that form skips the net's products. `cpr serve` shares one per model among its scorers.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

MAX_COSTS = 1 << 18  # 30 MiB of keys and floats when full (tracemalloc); then dropped


class CostCache:
    """key -> cost; safe to share between threads (each dict call holds the GIL, and every
    thread would store the same value under a key)."""

    def __init__(self, limit: int = MAX_COSTS):
        self.limit = limit
        self._known: dict[Hashable, float] = {}

    def __len__(self) -> int:
        return len(self._known)

    def get(self, keys: Sequence[Hashable]) -> list[float | None]:
        known = self._known
        return [known.get(k) for k in keys]

    def put(self, keys: Sequence[Hashable], costs: Sequence[float]) -> None:
        if len(self._known) + len(keys) > self.limit:
            self._known = {}  # bounded memory; a new dict, so a reader never sees it half-cleared
        self._known.update(zip(keys, costs, strict=True))
