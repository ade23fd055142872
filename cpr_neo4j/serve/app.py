"""The FastAPI app: POST /ask, POST /ask/batch, GET /health, GET /calibrations, /docs."""

from __future__ import annotations

import asyncio
import json
import logging
import math
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Any

from fastapi import Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from neo4j.exceptions import DriverError, Neo4jError
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from cpr_neo4j.calibration import Calibration
from cpr_neo4j.config import Neo4jSettings
from cpr_neo4j.errors import CprError
from cpr_neo4j.graph import entity_index, fingerprint, records
from cpr_neo4j.hints.base import HintProvider
from cpr_neo4j.serve.answer import AskWriter, CalibrationCache, answer, classify
from cpr_neo4j.serve.auth import bearer_check
from cpr_neo4j.serve.batch import SearchBatcher
from cpr_neo4j.serve.cache import ScorerPool
from cpr_neo4j.serve.graph import StoreHolder, is_unavailable
from cpr_neo4j.serve.keepalive import KeepAliveLimit
from cpr_neo4j.serve.schemas import (
    MAX_BATCH,
    MAX_BODY_BYTES,
    AskRequest,
    AskResponse,
    BatchItem,
    BatchRequest,
    BatchResponse,
    CalibrationOut,
    ErrorBody,
)

log = logging.getLogger("cpr.serve")
BATCH_THREADS = 8  # /ask/batch items in flight at once

ERRORS = {
    400: "Bad input: unknown or ambiguous entity, an alpha the calibration cannot honour",
    401: "Missing or wrong bearer token (only when the server has one)",
    404: "Unknown dataset (the detail lists the known ones)",
    409: "No calibration matches the model, settings or entity linking asked for, or the "
    "graph changed since it was calibrated (allow_stale answers without a guarantee)",
    413: "Request body over the server's limit (1 MiB unless set otherwise), refused unread",
    422: "Malformed request: an unknown field, empty or over-long question, alpha outside "
    f"(0, 1), a batch of 0 or over {MAX_BATCH} items",
    502: "The relation-hint LLM server failed or gave no usable reply (never answered "
    "without the calibrated hints)",
    503: "Neo4j cannot be reached; retry later",
}


def _responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """The error responses an endpoint documents in the OpenAPI schema."""
    return {c: {"model": ErrorBody, "description": ERRORS[c]} for c in codes}


def _error(body: ErrorBody, **extra: Any) -> JSONResponse:
    return JSONResponse(status_code=body.status, content={**body.model_dump(), **extra})


def _finite(value: Any) -> Any:
    """JSON has no infinity: a +inf tau (too few calibration questions) becomes null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def calibration_out(store: Any, row: Any) -> CalibrationOut:
    """A calibrations.cypher row; one made before taus were stored has them recomputed from
    its scores at the default alphas (alphas_default), or none when it has no scores."""
    from cpr_neo4j.conformal import levels
    from cpr_neo4j.conformal.guarantee import Calibrated

    r = {k: _finite(v) for k, v in dict(row).items()}
    old = r.get("taus") is None
    if old:
        node = store.read("calibration_node", id=r["id"])[0]["c"]
        try:
            cal = Calibrated.from_node(node)
        except CprError:  # older still: no per-question scores to recompute them from
            r["alphas"], r["taus"] = [], []
        else:
            r["alphas"] = list(levels.DEFAULT_ALPHAS)
            r["taus"] = levels.tau_rows(cal, r["alphas"], r.get("delta"))
    else:
        r["taus"] = json.loads(r["taus"])
    return CalibrationOut(**r, alphas_default=old)


def validation_detail(errors: list, skip: int = 1) -> str:
    """`alpah: unknown field (not one of AskRequest's)`; skip: the leading loc parts
    ("body") left out."""

    def one(e: dict) -> str:
        where = ".".join(str(p) for p in e["loc"][skip:]) or "body"
        if e.get("type") == "extra_forbidden":
            return f"{where}: unknown field (the fields are {', '.join(FIELDS)})"
        return f"{where}: {e['msg']}"

    return "; ".join(one(e) for e in errors)


FIELDS = tuple(AskRequest.model_fields)


class BodyLimit:
    """Refuses request bodies over `max_body` bytes with 413 before reading them: by their
    Content-Length, else (chunked) by counting bytes as they arrive, stopping at the bound.
    Pure ASGI: BaseHTTPMiddleware would read the whole body first."""

    def __init__(self, app: ASGIApp, max_body: int):
        self.app, self.max_body = app, max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        length = dict(scope["headers"]).get(b"content-length", b"")
        if length.isdigit() and int(length) > self.max_body:
            return await self._refuse(scope, send)
        seen, refused, started = 0, False, False

        async def counted() -> Message:
            nonlocal seen, refused
            if refused:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request" and not started:
                seen += len(message.get("body", b""))
                if seen > self.max_body:
                    refused = True
                    await self._refuse(scope, send)
                    return {"type": "http.disconnect"}  # the app stops reading, as if gone
            return message

        async def guarded(message: Message) -> None:
            nonlocal started
            if not refused:  # after a 413, whatever the app answers goes nowhere
                started = True
                await send(message)

        try:
            await self.app(scope, counted, guarded)
        except Exception:
            if not refused:  # the app failing to read a refused body is no error of its own
                raise

    async def _refuse(self, scope: Scope, send: Send) -> None:
        detail = f"request body over {self.max_body} bytes: send at most that"
        body = ErrorBody(status=413, type="RequestTooLarge", detail=detail)
        await _error(body)(scope, _disconnected, send)


async def _disconnected() -> Message:
    return {"type": "http.disconnect"}


def _warm(holder: StoreHolder, pool: ScorerPool, batcher: SearchBatcher | None) -> None:
    """Load the scorer of each dataset's newest calibration, the dataset's entity index and
    (batcher: a small graph's) neighbour rows, so the first ask is quick."""
    try:
        store = holder.get()
        for dataset in records.calibrated_datasets(store):
            node = records.latest_calibration(store, dataset)
            if node is not None:
                cal = Calibration.of(node)
                with pool.lease(cal.model):
                    log.info("loaded model %s for dataset %s", cal.model, dataset)
                entity_index.get(store, dataset, cal.graph_now)
                if batcher is not None:
                    graph = fingerprint.current(store, dataset, cal.graph_now)
                    batcher.whole_graph(store, dataset, cal.fanout_cap, graph)
    except Exception as exc:  # the server still starts: requests load on demand or answer 503
        log.warning("could not preload a model: %s", exc)


def create_app(
    settings: Neo4jSettings | None = None,
    token: str | None = None,
    scorers_per_model: int = 2,
    warm: bool = False,
    retry_time: float = 3.0,
    hints: HintProvider | None = None,
    batch_searches: bool = True,
    max_body: int = MAX_BODY_BYTES,
    preload: bool = True,
    keepalive_requests: int | None = None,
) -> FastAPI:
    """settings: Neo4j (default: NEO4J_* or the local server); token: required bearer token
    (None: no auth, for loopback); warm: load models at start-up rather than on first ask;
    hints: the relation-hint provider every request uses (its mode must match the
    calibration's, else 409); batch_searches: concurrent requests search in one TreeG
    batch (serve/batch.py), else each alone; max_body: bytes a request body may have
    (more: 413, unread); keepalive_requests: close a connection after that many responses
    (serve/keepalive.py; None: keep it open)."""
    holder = StoreHolder(settings, retry_time=retry_time)
    pool = ScorerPool(per_model=scorers_per_model)
    writer = AskWriter()
    cals = CalibrationCache()  # checked by every :Ask write (serve/answer.py)
    batcher = SearchBatcher(pool, preload) if batch_searches else None
    lone = {"busy": 0, "healthy": True}  # /ask requests in flight here; Neo4j's last answer

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if warm:
            await run_in_threadpool(_warm, holder, pool, batcher)
        yield
        holder.close()

    app = FastAPI(
        title="cpr serve",
        summary="Conformal Path Reasoning over Neo4j: answer sets with paths and a guarantee",
        lifespan=lifespan,
        dependencies=[Depends(bearer_check(token))] if token else [],
    )
    app.add_middleware(BodyLimit, max_body=max_body)
    if keepalive_requests:
        app.add_middleware(KeepAliveLimit, requests=keepalive_requests)
    app.state.holder, app.state.pool, app.state.batcher = holder, pool, batcher

    @app.exception_handler(CprError)
    @app.exception_handler(Neo4jError)
    @app.exception_handler(DriverError)
    async def expected(request: Request, exc: Exception) -> JSONResponse:
        body = classify(exc)
        if body is None:
            raise exc
        return _error(body)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        body = ErrorBody(status=422, type="ValidationError", detail=validation_detail(errors))
        return _error(body, errors=[{"loc": e["loc"], "msg": e["msg"]} for e in errors])

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        body = ErrorBody(status=exc.status_code, type="HTTPError", detail=str(exc.detail))
        return JSONResponse(body.model_dump(), exc.status_code, headers=exc.headers)

    @app.post(
        "/ask",
        response_model=AskResponse,
        responses=_responses(400, 401, 404, 409, 413, 422, 502, 503),
    )
    async def ask(req: AskRequest) -> Response:
        """Answer one question: a conformal answer set with each answer's best path."""
        # Alone in this process, a request runs on the event loop's thread: the hop to a
        # worker thread and back costs a lone ask up to ~1 ms (paired: 1.02-1.11x for 1-hop
        # questions, 1.06x for 2-hop). Requests that arrived with it reach the check too
        # (one turn of the loop first), and then every one takes a thread, so their searches
        # batch. After Neo4j failed one, requests take threads until one succeeds: an outage
        # never holds the loop twice; so do all with relation hints (an LLM takes seconds).
        lone["busy"] += 1
        try:
            await asyncio.sleep(0)
            alone = lone["busy"] == 1 and lone["healthy"] and hints is None
            out = _ask(req) if alone else await run_in_threadpool(_ask, req)
        except Exception as exc:
            lone["healthy"] = not is_unavailable(exc)
            raise
        finally:
            lone["busy"] -= 1
        lone["healthy"] = True
        return Response(out, media_type="application/json")

    def _ask(req: AskRequest) -> str:
        out = answer(holder.get(), pool, req, hints, writer, batcher, cals)
        # JSON made here by pydantic: returning the model would have FastAPI validate it
        # again (~0.2 ms of a lone ask; same JSON, tested)
        return out.model_dump_json()

    @app.post("/ask/batch", response_model=BatchResponse, responses=_responses(401, 413, 422, 503))
    def ask_batch(batch: BatchRequest) -> BatchResponse:
        """Answer 1 to 100 questions (results in order); one item's bad input, a malformed
        item included (422 in its place), fails that item only; Neo4j unreachable (503)
        fails the batch. Items run on a few threads at once, so their searches share
        batches."""
        store = holder.get()

        def one(item: dict) -> BatchItem:
            try:
                req = AskRequest.model_validate(item)
            except ValidationError as exc:  # this item only: the others are answered
                return BatchItem(
                    error=ErrorBody(
                        status=422,
                        type="ValidationError",
                        detail=validation_detail(exc.errors(), 0),
                    )
                )
            try:
                return BatchItem(result=answer(store, pool, req, hints, writer, batcher, cals))
            except Exception as exc:
                body = classify(exc)
                if body is None or body.status == 503:
                    raise  # a bug, or Neo4j gone: the whole batch fails
                return BatchItem(error=body)

        with ThreadPoolExecutor(min(BATCH_THREADS, len(batch.requests))) as threads:
            return BatchResponse(results=list(threads.map(one, batch.requests)))

    @app.get("/calibrations", responses=_responses(401, 503))
    def calibrations(
        dataset: str | None = None, limit: int = Query(100, ge=1, le=1000)
    ) -> list[CalibrationOut]:
        """Stored calibrations, newest first, with the taus `cpr calibrate` computed per
        alpha, risk and group (their per-question scores left out)."""
        store = holder.get()
        return [calibration_out(store, r) for r in store.read("calibrations", dataset=dataset,
                                                               limit=limit)]  # fmt: skip

    @app.get(
        "/health",
        responses={**_responses(401), 503: {"description": "The same report; Neo4j is down"}},
    )
    def health() -> JSONResponse:
        """Server, Neo4j reachability and calibration status."""
        body: dict[str, Any] = {
            "server": "ok",
            "neo4j": {"uri": holder.settings.uri},
            "models_loaded": pool.loaded(),
        }
        try:
            rows = holder.get().read("calibrations", dataset=None, limit=1000)
        except Exception as exc:
            if not is_unavailable(exc):
                raise
            body["neo4j"].update(reachable=False, error=str(classify(exc).detail))
            return JSONResponse({"status": "unavailable", **body}, status_code=503)
        newest: dict[str, dict] = {}
        for r in rows:  # newest first: keep each dataset's first
            newest.setdefault(r["dataset"], {"calibration": r["id"], "model": r["model"]})
        body["neo4j"]["reachable"] = True
        body["calibrations"] = {"count": len(rows), "newest": newest}
        return JSONResponse({"status": "ok" if rows else "uncalibrated", **body})

    return app
