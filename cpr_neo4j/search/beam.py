"""TreeG's choice at each hop: children's costs V' = V - hint_beta * bonus, then per parent
its top-B children and the global top-A, ties broken on the relation sequence."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

from cpr_neo4j.search.base import RelPath

QueryContext = Any  # opaque per-question object made by Scorer.question
HintBonus = Callable[[list[RelPath]], np.ndarray]


class Scorer(Protocol):
    model_id: str

    def question(self, masked_text: str) -> QueryContext: ...

    def score(self, ctx: QueryContext, paths: Sequence[RelPath]) -> np.ndarray:
        """Costs V (lower = more plausible), one per path."""
        ...

    def similarity(self, texts_a: list[str], texts_b: list[str]) -> np.ndarray:
        """Cosine matrix of shape (len(texts_a), len(texts_b))."""
        ...


def keep(
    paths: list[RelPath],
    parents: list[int],
    scorer: Scorer,
    ctx: QueryContext,
    beam_width: int,
    active: int,
    hint_bonus: HintBonus | None,
    hint_beta: float,
) -> dict[int, float]:
    """Kept children (index -> cost, best first): per parent its top-B, then the global
    top-A; ties break on the sequence."""
    cost = costs(scorer, ctx, paths, hint_bonus, hint_beta)
    by_parent: dict[int, list[int]] = {}
    for i, parent in enumerate(parents):
        by_parent.setdefault(parent, []).append(i)
    kept = [
        i
        for idx in by_parent.values()
        for i in sorted(idx, key=lambda j: (cost[j], paths[j]))[:beam_width]
    ]
    return {j: cost[j] for j in sorted(kept, key=lambda j: (cost[j], paths[j]))[:active]}


def costs(
    scorer: Scorer,
    ctx: QueryContext,
    paths: list[RelPath],
    hint_bonus: HintBonus | None,
    hint_beta: float,
) -> np.ndarray:
    """V' of each path (a NaN becomes +inf)."""
    v = np.asarray(scorer.score(ctx, paths), dtype=float).reshape(-1)
    if v.shape[0] != len(paths):
        raise ValueError(f"scorer returned {v.shape[0]} costs for {len(paths)} paths")
    if hint_bonus is not None and hint_beta != 0.0:
        v = v - hint_beta * np.asarray(hint_bonus(paths), dtype=float).reshape(-1)
    return np.where(np.isnan(v), np.inf, v)  # a NaN cost must not win a sort
