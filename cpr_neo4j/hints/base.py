"""LLM relation-chain hints and the hint bonus they give TreeG: the search-facing API.

A HintProvider proposes up to 4 relation chains (1..H relation names, chosen from the
relations that exist around the question's topic entity) for a question. The LLM
providers live in hints/llm.py, the reply parsing in hints/replies.py.

Hint-adjusted cost: V'(p) = V(p) - beta * sum over steps r in p of max_h s(r, h), h over
the hinted relations. Hints name relations without a direction, so the similarity
compares the step's relation text with the hinted relation's text (direction ignored).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from cpr_neo4j.search.base import RelPath
from cpr_neo4j.text import readable_relation

# Bump whenever hints/llm.py build_messages changes: calibrations pin it and `cpr ask` checks it.
PROMPT_VERSION = "rel-around-topic-v1"
MAX_CHAINS = 4
DEFAULT_HINT_BETA = 0.5
DEFAULT_LLM_MODEL = "Qwen/Qwen3-8B"  # what --llm-url serves when --llm-model is not given


@dataclass
class HintStats:
    """What hints cost in one process; `cpr calibrate` and `cpr eval` print it."""

    asked: int = 0  # prompts sent to the LLM (a repair follow-up counts once more)
    cached: int = 0  # prompts answered from the cache
    seconds: float = 0.0  # wall time inside LLM calls
    repaired: int = 0  # replies with no chains list that got a corrective follow-up
    dropped: int = 0  # chains dropped: invented relation, wrong type, too long

    def line(self) -> str:
        mean = self.seconds / self.asked if self.asked else 0.0
        return (
            f"hints: {self.asked} LLM call(s) ({mean:.2f} s each, {self.seconds:.1f} s in all), "
            f"{self.cached} from the cache, {self.repaired} repaired, "
            f"{self.dropped} invalid chain(s) dropped"
        )


class HintProvider(Protocol):
    mode: str  # pinned in the calibration record: "none" or "llm:<model>"
    prompt: str  # prompt version, pinned too ("" without hints)
    stats: HintStats

    def hints(self, question: str, relations: list[str], hops: int) -> list[list[str]]: ...

    def prefetch(self, items: Sequence[tuple[str, list[str], int]]) -> None: ...


class NoHints:
    mode = "none"
    prompt = ""

    def __init__(self) -> None:
        self.stats = HintStats()

    def hints(self, question: str, relations: list[str], hops: int) -> list[list[str]]:
        return []

    def prefetch(self, items: Sequence[tuple[str, list[str], int]]) -> None:
        return None


def hint_bonus(
    scorer: Any, relation_text: Mapping[str, str], chains: list[list[str]]
) -> Callable[[list[RelPath]], np.ndarray]:
    """bonus(p) = sum over steps of max cosine between the step's relation and any hint.

    `scorer` needs only `similarity(texts_a, texts_b)`. Per-relation maxima are cached,
    so each relation is embedded once per question.
    """
    hinted = list(dict.fromkeys(r for chain in chains for r in chain))
    hint_texts = [relation_text.get(r) or readable_relation(r) for r in hinted]
    best: dict[str, float] = {}

    def bonus(paths: list[RelPath]) -> np.ndarray:
        if not hint_texts:
            return np.zeros(len(paths))
        new = sorted({s.relation for p in paths for s in p} - best.keys())
        if new:
            texts = [relation_text.get(r) or readable_relation(r) for r in new]
            sims = np.asarray(scorer.similarity(texts, hint_texts), dtype=float)
            best.update(zip(new, sims.max(axis=1).tolist(), strict=True))
        return np.array([sum(best[s.relation] for s in p) for p in paths], dtype=float)

    return bonus
