"""A neo4j-graphrag retriever (extra `graphrag`) that retrieves a calibrated answer set:
`GraphRAG(CPRRetriever(driver, AskOptions(alpha=0.1)), llm).search(query_text=...)`.

Its items are the set's answers, each with its best path; its metadata says what the set
promises (alpha, delta, the threshold, the question's group, the guarantee sentence, the
recorded (:Ask) id). Where no set can be given with the guarantee (an alpha the calibration
cannot honour, a question whose topic is not found or that has no candidate, a dataset
without calibration, unless the options ask for every candidate) it returns no items, so
`GraphRAG.search(..., response_fallback="not known with this guarantee")` abstains
instead of letting the LLM answer without evidence; the reason is in metadata."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Optional

try:
    import neo4j
    from neo4j_graphrag.retrievers.base import Retriever
    from neo4j_graphrag.types import RawSearchResult, RetrieverResultItem
except ImportError as exc:  # the extra is not installed
    raise ImportError(
        "cpr_neo4j.graphrag needs neo4j-graphrag: pip install 'cpr-neo4j[graphrag]'"
    ) from exc

from cpr_neo4j.api import CPR
from cpr_neo4j.errors import Conflict, ConnectionFailed, CprError, HintFailed
from cpr_neo4j.options import AskOptions

if TYPE_CHECKING:
    from cpr_neo4j.hints.base import HintProvider
    from cpr_neo4j.stages.ask import AskResult

# Faults of the setup, not of the question: raised, never turned into an abstention
SETUP_FAULTS = (Conflict, ConnectionFailed, HintFailed)


class CPRRetriever(Retriever):
    """Conformal Path Reasoning as a neo4j-graphrag retriever.

    driver: the neo4j driver (left open); options: how questions are answered (dataset,
    alpha, delta, ...; cpr_neo4j.options.AskOptions); hints: a relation-hint provider."""

    VERIFY_NEO4J_VERSION = False  # it reads no vector index: any Neo4j cpr runs on will do

    def __init__(
        self,
        driver: neo4j.Driver,
        options: AskOptions | None = None,
        neo4j_database: str | None = None,
        hints: HintProvider | None = None,
    ):
        super().__init__(driver, neo4j_database)
        self.options = options or AskOptions()
        self.cpr = CPR(driver, database=neo4j_database, hints=hints)

    # Optional[...], not `X | None`: convert_to_tool reads typing.Union only (a float
    # parameter would become a string one)
    def get_search_results(
        self,
        query_text: str,
        alpha: Optional[float] = None,  # noqa: UP045
        entity: Optional[str] = None,  # noqa: UP045
    ) -> RawSearchResult:
        """The answers to a question over the knowledge graph in Neo4j, as a set that holds
        a correct answer with probability at least 1 - alpha, each with its best reasoning
        path; none when that cannot be promised.

        Args:
            query_text (str): The question, in plain words.
            alpha (float): The risk level, between 0 and 1 (default: the retriever's).
            entity (str): The question's topic entity, by name or id (default: found in
                the question's text).

        Returns:
            RawSearchResult: one record per answer in the set, and what the set promises.
        """
        changes: dict[str, Any] = {}
        if alpha is not None:
            changes["alpha"] = alpha
        if entity:
            changes["entity"] = entity
        opts = replace(self.options, **changes) if changes else self.options
        try:
            r = self.cpr.ask(query_text, opts)
        except SETUP_FAULTS:
            raise
        except CprError as exc:  # unattainable alpha, topic not found: no set to give
            return RawSearchResult(records=[], metadata=_abstained(opts, str(exc), exc))
        if r.guarantee is None and not (opts.all_candidates or opts.allow_stale):
            # no calibration, or none that holds: candidates without a promise are not a set
            why = "; ".join(r.notes) or "no guarantee holds for this set"
            return RawSearchResult(records=[], metadata=_promised(r) | _abstained(opts, why))
        records = [
            neo4j.Record(
                {
                    "answer": a.name,
                    "id": a.id,
                    "rank": a.rank,
                    "score": a.cost,
                    "path": a.path,
                    "path_entities": a.entity_names,
                    "path_ids": a.entities,
                }
            )
            for a in r.answers
        ]
        return RawSearchResult(records=records, metadata=_promised(r))

    def get_result_formatter(self) -> Callable[[neo4j.Record], RetrieverResultItem]:
        return self.format_answer

    @staticmethod
    def format_answer(record: neo4j.Record) -> RetrieverResultItem:
        """One answer as the LLM's context line: the answer and the path that supports it."""
        return RetrieverResultItem(
            content=f"{record['answer']} (supported by the path: {record['path']})",
            metadata={k: record[k] for k in ("id", "rank", "score", "path_entities", "path_ids")},
        )


def _promised(r: AskResult) -> dict[str, Any]:
    return {
        "alpha": r.alpha,
        "delta": r.delta,
        "risk": r.risk,
        "threshold": r.tau if math.isfinite(r.tau) else None,
        "group": r.group,
        "n": r.n,
        "guarantee": r.guarantee,
        "ask_id": r.ask_id,
        "dataset": r.dataset,
        "model_id": r.model_id,
        "calibration_id": r.calibration_id,
        "topics": [t.get("name", t["id"]) for t in r.topics],
        "set_size": len(r.answers),
        "notes": list(r.notes),
        "reason": None if r.answers else "retrieval found no candidate answer",
    }


def _abstained(opts: AskOptions, reason: str, exc: CprError | None = None) -> dict[str, Any]:
    return {
        "alpha": opts.alpha,
        "delta": opts.pac,
        "risk": opts.risk,
        "threshold": None,
        "group": None,
        "guarantee": None,
        "ask_id": None,
        "set_size": 0,
        "reason": reason,
        "error": type(exc).__name__ if exc is not None else "NoGuarantee",
    }
