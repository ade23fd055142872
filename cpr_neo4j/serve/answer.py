"""One question through the ask stage, with a scorer from the pool; errors classified."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from cpr_neo4j.errors import Conflict, CprError, HintFailed, UnknownDataset
from cpr_neo4j.graph import records
from cpr_neo4j.options import AskOptions
from cpr_neo4j.serve.coalesce import Coalescer
from cpr_neo4j.serve.graph import is_unavailable
from cpr_neo4j.serve.schemas import AskRequest, AskResponse, ErrorBody, response
from cpr_neo4j.stages.ask import answer as answer_one
from cpr_neo4j.stages.session import HTTP, find_calibration, pick_dataset

if TYPE_CHECKING:
    from cpr_neo4j.calibration import Calibration
    from cpr_neo4j.graph.store import GraphStore
    from cpr_neo4j.hints.base import HintProvider
    from cpr_neo4j.serve.batch import SearchBatcher
    from cpr_neo4j.serve.cache import ScorerPool


def calibration_for(store: GraphStore, req: AskRequest) -> tuple[str, Calibration]:
    """(dataset, the calibration that serves the request); Conflict when none does.

    The ask stage checks the same, but with one error type for everything; checking
    here first is what lets a mismatch answer 409 rather than 400."""
    try:
        dataset, _ = pick_dataset(store, req.dataset, req.model)
        cal = find_calibration(store, dataset, req.model, req.hops, HTTP)
    except CprError as exc:
        if is_unavailable(exc) or isinstance(exc, UnknownDataset):
            raise
        raise Conflict(str(exc)) from exc
    return dataset, cal


def options_of(req: AskRequest, dataset: str, model: str) -> AskOptions:
    """The request's options, under the dataset and model that serve it."""
    return AskOptions(
        alpha=req.alpha,
        delta=req.delta if "delta" in req.model_fields_set else None,
        risk=req.risk,
        dataset=dataset,
        model=model,
        hops=req.hops,
        entity=req.entity,
        beam_width=req.beam_width,
        active=req.active,
        allow_empty=req.allow_empty,
        grouped=not req.ungrouped,
        effective_scores=req.effective_scores,
        all_candidates=req.all_candidates,
        allow_stale=req.allow_stale,
    )


def check_request(req: AskRequest, cal: Calibration) -> None:
    asked = {"beam_width": req.beam_width, "active": req.active}
    diff = [
        f"{k} {v} (calibrated with {cal.pinned(k)})"
        for k, v in asked.items()
        if v is not None and v != cal.pinned(k)
    ]
    if diff:
        raise Conflict("the calibration does not match this request: " + "; ".join(diff))


class CalibrationMoved(Exception):
    """A request answered under a cached calibration found, when writing its :Ask, that the
    dataset was ingested or calibrated since: nothing was written; it is answered again."""


def token(cal: Calibration) -> tuple:
    """What a cached calibration was read with: its key and the dataset's state then."""
    return cal.id, cal.created, cal.graph_now, cal.newest


class CalibrationCache:
    """The calibration that last served each (store, dataset, model, hops) request, so that
    a request does not read it from Neo4j first (a round trip of every ask). Safe because
    such a request's :Ask is written only while its dataset's fingerprint and newest
    calibration are still those the entry was read with (cypher/create_ask.cypher); if
    not, nothing is written and the request is answered again from a fresh read. An error
    answered under an entry is given only after a fresh read confirms the entry."""

    def __init__(self) -> None:
        self._cals: dict[tuple, tuple[str, Calibration]] = {}

    def answer(self, store: GraphStore, req: AskRequest, run: Callable) -> AskResponse:
        """run(dataset, cal, expect) answers the request; expect: None or what its :Ask
        write must still find. Requests without a dataset read every time (the default
        dataset is the newest calibrated one of any)."""
        key = (id(store), req.dataset, req.model, req.hops)
        held = self._cals.get(key) if req.dataset else None
        if held is not None:
            dataset, cal = held
            try:
                return run(dataset, cal, {"graph_now": cal.graph_now, "newest": cal.newest})
            except CalibrationMoved:
                pass
            except CprError as exc:
                if is_unavailable(exc) or token(calibration_for(store, req)[1]) == token(cal):
                    raise
            self._cals.pop(key, None)
        dataset, cal = calibration_for(store, req)
        if req.dataset and cal.newest is not None:
            if len(self._cals) >= MAX_CACHED:
                self._cals.clear()
            self._cals[key] = (dataset, cal)
        return run(dataset, cal, None)


MAX_CACHED = 256


class AskWriter:
    """Writes the :Ask records of concurrent requests in one transaction: one commit for
    all of them instead of one each (a commit is most of an ask's write time)."""

    def __init__(self) -> None:
        self._calls: Coalescer[tuple[GraphStore, dict], None] = Coalescer(self._write)

    def saver(self, store: GraphStore, expect: dict | None = None) -> Callable[[dict], None]:
        """expect: what the record's dataset must still have (CalibrationCache)."""

        def save(record: dict) -> None:
            if not self._calls.submit((store, {**record, "expect": expect})):
                raise CalibrationMoved(record["id"])

        return save

    @staticmethod
    def _write(items: list[tuple[GraphStore, dict]]) -> list[bool]:
        by_store: dict[int, tuple[GraphStore, list[dict]]] = {}
        for store, record in items:
            by_store.setdefault(id(store), (store, []))[1].append(record)
        stale = set()
        for store, batch in by_store.values():
            stale |= records.save_asks(store, batch)
        return [record["id"] not in stale for _, record in items]


def answer(
    store: GraphStore,
    pool: ScorerPool,
    req: AskRequest,
    hints: HintProvider | None = None,
    writer: AskWriter | None = None,
    batcher: SearchBatcher | None = None,
    cache: CalibrationCache | None = None,
) -> AskResponse:
    """One request; with `batcher`, its search runs in a batch with concurrent requests';
    with `cache` (and `writer`, which checks its entries), the calibration held from an
    earlier request serves it."""

    def run(dataset: str, cal: Calibration, expect: dict | None) -> AskResponse:
        return _answer(store, pool, req, hints, writer, batcher, dataset, cal, expect)

    if cache is None or writer is None:
        return run(*calibration_for(store, req), None)
    return cache.answer(store, req, run)


def _answer(
    store: GraphStore,
    pool: ScorerPool,
    req: AskRequest,
    hints: HintProvider | None,
    writer: AskWriter | None,
    batcher: SearchBatcher | None,
    dataset: str,
    cal: Calibration,
    expect: dict | None,
) -> AskResponse:
    check_request(req, cal)
    with pool.lease(cal.model):  # open_session builds its retriever with a scorer
        session = options_of(req, dataset, cal.model).open(store, hints, cal, HTTP)
        if writer is not None:
            session.save = writer.saver(store, expect)
        if batcher is None:
            r = answer_one(session, req.question, req.entity)
    if batcher is not None:
        batcher.attach(session)  # the batch leases a scorer of its own
        r = answer_one(session, req.question, req.entity)

    return response(r)


def classify(exc: BaseException) -> ErrorBody | None:
    """The HTTP status and body for an expected failure; None for a bug (answer 500)."""
    if is_unavailable(exc):
        return ErrorBody(status=503, type="Neo4jUnavailable", detail=_unavailable(exc))
    if isinstance(exc, HintFailed):  # the hint server, not the request, is at fault
        return ErrorBody(status=502, type="HintFailed", detail=str(exc))
    if isinstance(exc, UnknownDataset):
        return ErrorBody(status=404, type=type(exc).__name__, detail=str(exc))
    if isinstance(exc, Conflict):
        return ErrorBody(status=409, type=type(exc).__name__, detail=str(exc))
    if isinstance(exc, CprError):
        kind = "BadRequest" if type(exc) is CprError else type(exc).__name__
        return ErrorBody(status=400, type=kind, detail=str(exc))
    from neo4j.exceptions import Neo4jError

    if isinstance(exc, Neo4jError):
        return ErrorBody(
            status=500, type="Neo4jError", detail=f"Neo4j refused a statement: {exc.code}"
        )
    return None


def _unavailable(exc: BaseException) -> str:
    if isinstance(exc, CprError):
        return str(exc)
    return f"lost the connection to Neo4j ({type(exc).__name__}); retry shortly"
