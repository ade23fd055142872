"""Concurrent requests search together: one TreeG batch per model and settings.

Each request still links, cuts at its own tau and writes its own record, but its search is
queued; the thread that finds no search running takes the queue and runs it as one
lockstep batch (treeg.retrieve_many): one Neo4j round trip per hop for all of them, one
scorer lease instead of one per request, and the questions embedded in one call. Alpha
does not enter the search, so requests with different alphas share a batch.

Each batch key keeps the neighbour rows it fetched (CachedAdjacency) for later batches, so
hubs are read from Neo4j once, not per request. A graph of at most ANSWER_CACHE_ENTITIES
entities (MetaQA: 43k) is read whole the first time (at start-up with --warm), with the
same query and cap as on demand, so a search then makes no neighbour query at all: that
was most of Neo4j's CPU per question. The cache holds the dataset's fingerprint: an ingest
that changes the graph starts a new one, and the old one is dropped.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING

from cpr_neo4j.errors import CprError
from cpr_neo4j.graph.neighbours import Neo4jNeighbours, graph_nodes
from cpr_neo4j.hints.base import NoHints
from cpr_neo4j.search.adjacency_cache import ANSWER_CACHE_ENTITIES, CachedAdjacency
from cpr_neo4j.serve.coalesce import Coalescer
from cpr_neo4j.stages.retrieval import Retriever

if TYPE_CHECKING:
    from cpr_neo4j.graph.store import GraphStore
    from cpr_neo4j.hints.base import HintProvider
    from cpr_neo4j.search.treeg import Retrieval
    from cpr_neo4j.serve.cache import ScorerPool
    from cpr_neo4j.stages.retrieval import RetrievalSettings
    from cpr_neo4j.stages.session import Session

Item = tuple[str, list[str], str | None, str | None]  # masked, topics, text, question id
log = logging.getLogger("cpr.serve")


class SearchBatcher:
    """Routes a session's searches through the batch of its (store, dataset, model,
    settings, hint provider)."""

    def __init__(self, pool: ScorerPool, preload: bool = True):
        self._pool = pool
        self._preload = preload
        self._lock = threading.Lock()
        # key -> (the graph's fingerprint, its neighbour rows, the key's batches)
        self._batches: dict[
            tuple, tuple[str, CachedAdjacency, Coalescer[Item, Retrieval | CprError]]
        ] = {}
        # (store, dataset, fan-out cap) -> (fingerprint, every entity's rows, or None for a
        # graph too big to hold); each batch key searches a copy of its own (not thread-safe)
        self._graphs: dict[tuple, tuple[str, CachedAdjacency | None]] = {}
        self._graph_lock = threading.Lock()

    def whole_graph(
        self, store: GraphStore, dataset: str, cap: int, graph: str
    ) -> CachedAdjacency | None:
        """Every entity's neighbour rows of `dataset` as of fingerprint `graph`, read once;
        None when the graph has more entities than a cache keeps."""
        if not self._preload:
            return None
        key = (id(store), dataset, cap)
        with self._graph_lock:
            known = self._graphs.get(key)
            if known is not None and known[0] == graph:
                return known[1]
            nodes = graph_nodes(store, dataset, ANSWER_CACHE_ENTITIES)
            whole = None
            if nodes is not None:
                began = time.perf_counter()
                rows = Neo4jNeighbours(store, dataset, cap)
                whole = CachedAdjacency(rows, max_entities=ANSWER_CACHE_ENTITIES)
                whole.preload(nodes)
                seconds = time.perf_counter() - began
                log.info("read %d entities of %s in %.1f s", len(nodes), dataset, seconds)
            self._graphs[key] = (graph, whole)
            return whole

    def sources(self) -> list[CachedAdjacency]:
        """The neighbour caches in use, one per batch key."""
        with self._lock:
            return [source for _, source, _ in self._batches.values()]

    def attach(self, session: Session) -> None:
        r = session.retriever
        model = session.cal.model
        # The provider's identity only when there is one: each session without hints gets
        # a NoHints of its own, and keying on it gave every request a batch (and a neighbour
        # cache) of its own, so nothing was batched or cached across requests.
        hints = None if isinstance(r.hints, NoHints) else id(r.hints)
        key = (id(session.store), session.dataset, model, r.settings, hints)
        with self._lock:
            graph, _, calls = self._batches.get(key, (None, None, None))
            if calls is None or graph != session.graph:
                cap = r.settings.fanout_cap
                whole = self.whole_graph(session.store, session.dataset, cap, session.graph)
                if whole is not None:
                    source = whole.copy()
                else:
                    rows = Neo4jNeighbours(session.store, session.dataset, cap)
                    source = CachedAdjacency(rows, max_entities=ANSWER_CACHE_ENTITIES)
                run = partial(
                    self._run, session.store, session.dataset, model, r.settings, r.hints, source
                )
                calls = Coalescer(run)
                self._batches[key] = (session.graph, source, calls)
        session.retriever = BatchedRetriever(calls, r.settings)  # type: ignore[assignment]

    def _run(
        self,
        store: GraphStore,
        dataset: str,
        model: str,
        settings: RetrievalSettings,
        hints: HintProvider,
        source: CachedAdjacency,
        items: list[Item],
    ) -> Sequence[Retrieval | CprError]:
        with self._pool.lease(model) as scorer:
            scorer.questions([masked for masked, *_ in items])  # one encoder call
            return Retriever(store, dataset, scorer, settings, hints, source).run_many(items)


class BatchedRetriever:
    """The part of Retriever the ask stage uses for one question: `run` (and `settings`)."""

    def __init__(self, calls: Coalescer[Item, Retrieval | CprError], settings: RetrievalSettings):
        self._calls = calls
        self.settings = settings

    def run(
        self,
        masked_question: str,
        topics: list[str],
        text: str | None = None,
        question: str | None = None,
        defer_names: bool = False,  # moot: the batch's cached rows are named
    ) -> Retrieval:
        found = self._calls.submit((masked_question, topics, text, question))
        if isinstance(found, CprError):
            raise found
        return found
