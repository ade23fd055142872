"""What calibration pins and every later ask must repeat: scorer, hints and TreeG settings."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from cpr_neo4j.config import cpr_home
from cpr_neo4j.errors import BadInput, Conflict, CprError
from cpr_neo4j.graph.neighbours import DEFAULT_FANOUT_CAP, Neo4jNeighbours
from cpr_neo4j.graph.store import GraphStore
from cpr_neo4j.graph.subgraphs import GRAPH, SUBGRAPH
from cpr_neo4j.hints.base import DEFAULT_LLM_MODEL, HintProvider, NoHints, hint_bonus
from cpr_neo4j.hints.llm import OpenAIHints, VllmHints
from cpr_neo4j.model.scorer import PathScorer
from cpr_neo4j.search.base import NeighbourSource
from cpr_neo4j.search.treeg import Job, Retrieval, retrieve, retrieve_many

if TYPE_CHECKING:
    from cpr_neo4j.calibration import Calibration

# Relations around the topic entity for the hint prompt: entities looked at per hop beyond
# the first (sorted ids, so the list is reproducible); hubs would otherwise cost seconds.
HINT_FRONTIER = 64


@dataclass(frozen=True)
class RetrievalSettings:
    hops: int
    beam_width: int = 32
    active: int = 32
    fanout_cap: int = DEFAULT_FANOUT_CAP
    hint_mode: str = "none"
    hint_beta: float = 0.0
    candidates: str = "sequences retained at every hop 1..H"
    hint_prompt: str = ""  # the hint prompt's version ("" without hints)
    scope: str = GRAPH  # SUBGRAPH: each question inside its own subgraph (graph/subgraphs.py)
    # the dataset's convention (records.topic_answers): a path may end back on its topic
    topic_answers: bool = False

    def key(self) -> dict:
        key = asdict(self)
        if not self.hint_prompt:
            del key["hint_prompt"]  # calibration ids made before it existed stay the same
        if self.scope == GRAPH:
            del key["scope"]  # likewise
        if not self.topic_answers:
            del key["topic_answers"]  # likewise
        return key


def check_scope(cal: Calibration) -> None:
    """`cpr ask` / `cpr serve` answer a new question, which has no subgraph of its own: a
    calibration made inside per-question subgraphs does not cover that retrieval."""
    if cal.scope == SUBGRAPH:
        raise Conflict(
            f"calibration {cal.id} answered each question inside its own subgraph "
            "(--scope subgraph), which a new question does not have: run `cpr calibrate "
            f"{cal.dataset} --scope graph` to calibrate retrieval over the whole graph"
        )


def hint_cache_path(model: str) -> Path:
    """One reply cache per model, shared by every provider serving it (the key holds the
    prompt version, question, relations and H)."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", model).strip("_")[:60]
    digest = hashlib.sha1(model.encode()).hexdigest()[:8]
    return cpr_home() / "hints" / f"{slug}-{digest}.jsonl"


def hint_provider(
    llm_url: str | None = None,
    llm_model: str | None = None,
    llm: str | None = None,
    parallel: int = 1,
    timeout: float = 30.0,
) -> HintProvider:
    """The provider for the CLI's three options: --llm-url [--llm-model], --llm vllm:MODEL,
    or neither (no hints). `parallel`: requests in flight to the server during prefetch
    (1 for llama.cpp, which answers one at a time: more only queue into its timeout);
    `timeout`: seconds per reply from a --llm-url server."""
    if llm_url and llm and llm != "none":
        raise BadInput("give --llm-url or --llm, not both")
    if llm and llm != "none":
        kind, _, model = llm.partition(":")
        if kind != "vllm" or not model:
            raise BadInput(f"--llm takes vllm:MODEL or none, got {llm!r}")
        return VllmHints(model, cache_path=hint_cache_path(model))
    if not llm_url:
        if llm_model:
            raise BadInput("--llm-model needs --llm-url (the server that runs it)")
        return NoHints()
    model = llm_model or DEFAULT_LLM_MODEL
    return OpenAIHints(
        llm_url, model, timeout=timeout, cache_path=hint_cache_path(model), parallel=parallel
    )


def hints_from(
    llm_url: str | None,
    llm_model: str | None,
    llm: str | None,
    parallel: int = 1,
    timeout: float = 30.0,
) -> HintProvider | None:
    """The provider the options name; None when they name none."""
    if not llm_url and not llm_model and (not llm or llm == "none"):
        return None
    return hint_provider(llm_url, llm_model, llm, parallel, timeout)


T = TypeVar("T")
SourceFor = Callable[[str], NeighbourSource]  # question id -> its scoped NeighbourSource


class Retriever:
    """TreeG for one dataset with one scorer, hint provider and settings.

    settings.scope GRAPH: every question searches `source` (default: the whole graph).
    SUBGRAPH: each question searches only its own subgraph, through `source_for(question id)`
    (default: a Neo4jNeighbours scoped to it); `run` then needs the question id.
    """

    def __init__(
        self,
        store: GraphStore,
        dataset: str,
        scorer: PathScorer,
        settings: RetrievalSettings,
        hints: HintProvider | None = None,
        source: NeighbourSource | None = None,
        source_for: SourceFor | None = None,
    ):
        self.dataset = dataset
        self.scorer = scorer
        self.settings = settings
        self.hints = hints or NoHints()
        self.source = source or Neo4jNeighbours(store, dataset, settings.fanout_cap)
        self.source_for = source_for or (
            lambda qid: Neo4jNeighbours(store, dataset, settings.fanout_cap, question=qid)
        )

    def scoped(self, question: str | None) -> NeighbourSource:
        """The source one question searches (its own subgraph under SUBGRAPH scope)."""
        if self.settings.scope != SUBGRAPH:
            return self.source
        if question is None:
            raise Conflict(
                "retrieval scope 'subgraph' needs the question's id (its own subgraph); "
                "a new question has none: use --scope graph"
            )
        return self.source_for(question)

    def hint_relations(self, topics: Sequence[str], question: str | None = None) -> list[str]:
        """Relation types within H hops of the topic entities (beyond hop 1, of the first
        HINT_FRONTIER entities by id), so the hint LLM can only name real relations."""
        found: set[str] = set()
        frontier, seen = list(dict.fromkeys(topics)), set(topics)
        source = self.scoped(question)
        for hop in range(self.settings.hops):
            if not frontier:
                break
            edges = source.neighbours(frontier)
            found |= {step.relation for out in edges.values() for step, _ in out}
            if hop + 1 == self.settings.hops:
                break
            nxt = sorted({n for out in edges.values() for _, n in out} - seen)[:HINT_FRONTIER]
            seen.update(nxt)
            frontier = nxt
        return sorted(found)

    def prefetch(self, questions: Sequence[tuple]) -> None:
        """Ask the hint LLM for many (masked question, topics[, question id]) in one batch up
        front (the id scopes the relations offered under SUBGRAPH scope)."""
        if self.settings.hint_beta:
            s = self.settings
            items = [
                (q[0], self.hint_relations(q[1], q[2] if len(q) > 2 else None), s.hops)
                for q in questions
                if q[1]
            ]
            self.hints.prefetch(items)

    def run(
        self,
        masked_question: str,
        topics: list[str],
        text: str | None = None,
        question: str | None = None,
        defer_names: bool = False,
    ) -> Retrieval:
        """TreeG for one question. The hint LLM reads the masked question (the entity is
        ENT) and the relations around the topics: its reply depends on the question's form
        and the graph, not the name, and MetaQA's masked prompts repeat (cache hits).
        `text` (unmasked) is accepted for callers that have it; hints do not use it.
        `question`: the dataset's question id, needed under SUBGRAPH scope. defer_names:
        answers are named when read (treeg.retrieve), for a caller that reads a few."""
        s = self.settings
        source = self.scoped(question)
        job = self.job(masked_question, topics, question)
        return retrieve(
            source,
            self.scorer,
            job.ctx,
            job.topics,
            s.hops,
            s.beam_width,
            s.active,
            hint_bonus=job.hint_bonus,
            hint_beta=job.hint_beta,
            topic_answers=s.topic_answers,
            defer_names=defer_names,
        )

    def run_many(
        self, items: Sequence[tuple[str, list[str], str | None, str | None]]
    ) -> list[Retrieval | CprError]:
        """`run` for many (masked question, topics, text, question id) at once: under GRAPH
        scope all of them in lockstep, one round trip per hop for the batch; under SUBGRAPH
        each searches its own subgraph alone. A question's CprError (its hints, its scope)
        takes its place in the list; the others go on."""
        if self.settings.scope == SUBGRAPH:
            return [_or_error(self.run, *item) for item in items]
        jobs = [_or_error(self.job, masked, topics, qid) for masked, topics, _, qid in items]
        s = self.settings
        ok = [j for j in jobs if isinstance(j, Job)]
        found = iter(
            retrieve_many(
                self.source,
                self.scorer,
                ok,
                s.hops,
                s.beam_width,
                s.active,
                topic_answers=s.topic_answers,
            )
        )
        return [next(found) if isinstance(j, Job) else j for j in jobs]

    def job(self, masked_question: str, topics: list[str], question: str | None = None) -> Job:
        """What TreeG needs for one question: its embedding, topics and hint bonus."""
        s = self.settings
        bonus = None
        if s.hint_beta and topics:
            chains = self.hints.hints(
                masked_question, self.hint_relations(topics, question), s.hops
            )
            if chains:
                bonus = hint_bonus(self.scorer, self.scorer.relation_text, chains)
        ctx = self.scorer.question(masked_question)
        return Job(ctx, topics, bonus, s.hint_beta if bonus else 0.0, s.topic_answers)


def _or_error(fn: Callable[..., T], *args: Any) -> T | CprError:
    try:
        return fn(*args)
    except CprError as exc:
        return exc


def calibration_id(
    model_id: str,
    dataset: str,
    settings: RetrievalSettings,
    question_ids: list[str],
    score: dict | float = 0.0,
    linking: str = "gold",
) -> str:
    """Content id of a calibration: model, dataset, retrieval settings, questions, score
    family (a dict; a float is the old centring constant) and linking."""
    parts = [model_id, dataset, settings.key(), sorted(question_ids)]
    extra = ([score] if score else []) + ([linking] if linking != "gold" else [])
    blob = json.dumps(parts + extra, sort_keys=True)  # older ids stay what they were
    return "cal-" + hashlib.sha256(blob.encode()).hexdigest()[:16]


def results_dir(dataset: str, model_id: str, split: str) -> Path:
    return cpr_home() / "results" / dataset / model_id / split
