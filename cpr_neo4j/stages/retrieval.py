"""What calibration pins and every later ask must repeat: scorer, hints and TreeG settings."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path

from cpr_neo4j.config import cpr_home
from cpr_neo4j.graph import records
from cpr_neo4j.graph.neighbours import DEFAULT_FANOUT_CAP, Neo4jNeighbours
from cpr_neo4j.graph.store import GraphStore
from cpr_neo4j.model.scorer import PathScorer
from cpr_neo4j.search.base import NeighbourSource
from cpr_neo4j.search.hints import HintProvider, NoHints, OpenAIHints, hint_bonus
from cpr_neo4j.search.treeg import Retrieval, retrieve

DEFAULT_HINT_BETA = 0.5


@dataclass(frozen=True)
class RetrievalSettings:
    hops: int
    beam_width: int = 32
    active: int = 32
    fanout_cap: int = DEFAULT_FANOUT_CAP
    hint_mode: str = "none"
    hint_beta: float = 0.0
    candidates: str = "sequences retained at every hop 1..H"

    def key(self) -> dict:
        return asdict(self)


def hint_provider(llm_url: str | None, llm_model: str | None) -> HintProvider:
    if not llm_url:
        return NoHints()
    cache = cpr_home() / "hints" / f"{hashlib.sha1(llm_url.encode()).hexdigest()[:8]}.jsonl"
    cache.parent.mkdir(parents=True, exist_ok=True)
    return OpenAIHints(llm_url, llm_model or "Qwen/Qwen3-8B", cache_path=cache)


class Retriever:
    """TreeG for one dataset with one scorer, hint provider and settings."""

    def __init__(
        self,
        store: GraphStore,
        dataset: str,
        scorer: PathScorer,
        settings: RetrievalSettings,
        hints: HintProvider | None = None,
        source: NeighbourSource | None = None,
    ):
        self.dataset = dataset
        self.scorer = scorer
        self.settings = settings
        self.hints = hints or NoHints()
        self.source = source or Neo4jNeighbours(store, dataset, settings.fanout_cap)
        self._relations = (
            sorted(records.relation_text(store, dataset)) if settings.hint_beta else []
        )

    def run(self, masked_question: str, topics: list[str], text: str | None = None) -> Retrieval:
        """TreeG for one question; `text` (unmasked) is what the hint LLM reads."""
        s = self.settings
        bonus = None
        if s.hint_beta:
            chains = self.hints.hints(text or masked_question, self._relations, s.hops)
            if chains:
                bonus = hint_bonus(self.scorer, self.scorer.relation_text, chains)
        ctx = self.scorer.question(masked_question)
        return retrieve(
            self.source,
            self.scorer,
            ctx,
            topics,
            s.hops,
            s.beam_width,
            s.active,
            hint_bonus=bonus,
            hint_beta=s.hint_beta if bonus else 0.0,
        )


def calibration_id(
    model_id: str,
    dataset: str,
    settings: RetrievalSettings,
    question_ids: list[str],
    centre: float = 0.0,
    linking: str = "gold",
) -> str:
    parts = [model_id, dataset, settings.key(), sorted(question_ids)]
    extra = ([centre] if centre else []) + ([linking] if linking != "gold" else [])
    blob = json.dumps(parts + extra, sort_keys=True)  # older ids stay what they were
    return "cal-" + hashlib.sha256(blob.encode()).hexdigest()[:16]


def results_dir(dataset: str, model_id: str, split: str) -> Path:
    return cpr_home() / "results" / dataset / model_id / split
