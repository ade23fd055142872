"""`cpr serve` against the real Neo4j: answers, errors as JSON with their status, the token
rule, 503 while Neo4j is unreachable and recovery once it is back.

Uses the newest MetaQA 2-hop calibration; on a fresh database (CI) it first trains and
calibrates a small 2-hop model, removed again at the end with the :Ask records the tests
create.
"""

from __future__ import annotations

import contextlib
import math
import socket
import threading
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlparse

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from cpr_neo4j.config import Neo4jSettings
from cpr_neo4j.errors import BadInput
from cpr_neo4j.graph import fingerprint, records
from cpr_neo4j.serve.app import create_app
from cpr_neo4j.serve.auth import check_bind, is_loopback
from tests.conftest import drop_models

pytestmark = pytest.mark.neo4j

QUESTION = "which person directed the movies starred by [John Krasinski]"
OTHER = "who directed the films written by [Neil Gaiman]"
TOKEN = "t0ken-for-tests-0123456789"


@pytest.fixture(scope="module")
def asked(store):
    """Ask ids recorded by the tests; deleted afterwards."""
    ids: list[str] = []
    yield ids
    if ids:
        store.write("delete_asks", ids=ids)


@pytest.fixture(scope="module")
def calibrated(store, metaqa):
    """A MetaQA 2-hop calibration: the newest one if it fits the graph, else a small one
    made here."""
    newest = records.latest_calibration(store, "metaqa", hops_filter=2) or {}
    current = newest.get("graph_fingerprint") == fingerprint.current(store, "metaqa")
    if current and newest.get("linking") == "text":  # what plain asks need
        yield None
        return
    from cpr_neo4j.stages.calibrate import calibrate
    from cpr_neo4j.stages.train import TrainSettings, train

    result = train(store, TrainSettings("metaqa", hops=2, max_questions=150, cal_share=0.05))
    calibrate(store, "metaqa", result.model_id, alphas=(0.1, 0.3, 0.5))
    yield result.model_id
    drop_models(store, [result.model_id])


@pytest.fixture(scope="module")
def client(store, neo4j_settings, calibrated):
    with TestClient(create_app(neo4j_settings)) as c:
        yield c


def ask(client, asked, **body):
    r = client.post("/ask", json={"alpha": 0.1, "hops": 2, "dataset": "metaqa", **body})
    if r.status_code == 200:
        asked.append(r.json()["ask_id"])
    return r


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens once the socket is closed


def test_health_reports_neo4j_and_calibrations(client):
    r = client.get("/health")
    assert r.status_code == 200
    body = r.json()
    assert body["status"] == "ok" and body["neo4j"]["reachable"] is True
    assert "metaqa" in body["calibrations"]["newest"]


def test_ask_answers_with_paths_and_records_the_ask(client, asked, store):
    r = ask(client, asked, question=QUESTION)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["answers"] and math.isfinite(body["tau"]) and not body["tau_infinite"]
    assert body["topics"] == [{"id": "John Krasinski", "name": "John Krasinski"}]
    first = body["answers"][0]
    assert first["rank"] == 1 and first["score"] <= body["tau"]
    assert first["path_entities"][0]["id"] == "John Krasinski"
    assert first["path_entities"][-1] == {"id": first["id"], "name": first["name"]}
    assert body["n"] > 0 and body["model_id"] and "guarantee" in body
    rows = store.query(
        "MATCH (a:Ask {id: $id}) RETURN a.answer_count AS n, a.model_id AS m",
        {"id": body["ask_id"]},
    )[0]
    assert rows and rows[0]["n"] == len(body["answers"]) and rows[0]["m"] == body["model_id"]
    assert client.get("/health").json()["models_loaded"].get(body["model_id"], 0) >= 1


def test_concurrent_asks_match_sequential_ones(client, asked):
    alone = {q: ask(client, asked, question=q).json()["answers"] for q in (QUESTION, OTHER)}
    with ThreadPoolExecutor(6) as pool:
        results = list(pool.map(lambda q: ask(client, asked, question=q), [QUESTION, OTHER] * 3))
    for q, r in zip([QUESTION, OTHER] * 3, results, strict=True):
        assert r.status_code == 200, r.text
        assert r.json()["answers"] == alone[q]


def test_neighbour_rows_are_cached_across_requests(client, asked):
    """Hubs are fetched from Neo4j once per server, not per request: asking again costs
    no round trip, and gives the same answers."""
    first = ask(client, asked, question=OTHER)
    assert first.status_code == 200, first.text
    sources = client.app.state.batcher.sources()
    trips = [s.round_trips for s in sources]
    assert sources and sum(trips) > 0
    again = ask(client, asked, question=OTHER)
    assert again.json()["answers"] == first.json()["answers"]
    assert [s.round_trips for s in sources] == trips


def test_a_changed_graph_gets_a_new_neighbour_cache(store):
    """The batch key's cache belongs to one graph fingerprint: a new fingerprint (an ingest
    changed the dataset) starts a new cache instead of answering from old rows."""
    from cpr_neo4j.model.scorer import PathScorer
    from cpr_neo4j.serve.batch import SearchBatcher
    from cpr_neo4j.serve.cache import ScorerPool
    from cpr_neo4j.stages.ask import Session
    from cpr_neo4j.stages.retrieval import RetrievalSettings, Retriever

    batcher = SearchBatcher(ScorerPool())
    retriever = Retriever(store, "metaqa", PathScorer.__new__(PathScorer), RetrievalSettings(2))

    def session(graph: str) -> Session:
        cal = {"model": "m"}
        return Session(store, "metaqa", cal, 0.1, None, 0.0, retriever, None, graph=graph)

    batcher.attach(session("g1"))
    (old,) = batcher.sources()
    batcher.attach(session("g1"))
    assert batcher.sources() == [old]
    batcher.attach(session("g2"))
    (new,) = batcher.sources()
    assert new is not old


def test_batch_answers_each_item_and_reports_item_errors(client, asked):
    r = client.post(
        "/ask/batch",
        json={
            "requests": [
                {"question": QUESTION, "alpha": 0.1, "hops": 2, "dataset": "metaqa"},
                {
                    "question": "who directed [No Such Entity 42]",
                    "alpha": 0.1,
                    "hops": 2,
                    "dataset": "metaqa",
                },
            ]
        },
    )
    assert r.status_code == 200, r.text
    good, bad = r.json()["results"]
    asked.append(good["result"]["ask_id"])
    assert good["result"]["answers"] and good["error"] is None
    assert bad["result"] is None and bad["error"]["status"] == 400


@pytest.mark.parametrize(
    "body",
    [
        {"question": "", "alpha": 0.1},
        {"question": "   ", "alpha": 0.1},
        {"question": "x" * 1001, "alpha": 0.1},
        {"question": QUESTION, "alpha": 0.0},
        {"question": QUESTION, "alpha": 1.0},
        {"question": QUESTION, "alpha": 1.5},
        {"alpha": 0.1},
    ],
)
def test_malformed_requests_are_422_json(client, body):
    r = client.post("/ask", json=body)
    assert r.status_code == 422
    assert r.json()["status"] == 422 and r.json()["type"] == "ValidationError"


def test_unknown_and_ambiguous_entities_are_400(client, asked):
    r = ask(client, asked, question="who directed [No Such Entity 42]")
    assert r.status_code == 400 and "unknown entity" in r.json()["detail"]
    r = ask(client, asked, question="what movies did Tom Hanks star in")  # two ids match
    assert r.status_code == 400 and "several entities" in r.json()["detail"]


def test_calibration_mismatch_is_409(client, asked):
    r = ask(client, asked, question=QUESTION, beam_width=3)
    assert r.status_code == 409 and "does not match" in r.json()["detail"]
    r = ask(client, asked, question=QUESTION, entity="John Krasinski")  # linking differs
    assert r.status_code == 409 and "drop --entity" in r.json()["detail"]
    r = ask(client, asked, question=QUESTION, model="rcv-no-such-model")
    assert r.status_code == 409 and r.json()["type"] == "Conflict"


def test_calibrations_are_listed_without_scores(client):
    r = client.get("/calibrations", params={"dataset": "metaqa"})
    assert r.status_code == 200 and r.json()
    row = r.json()[0]
    assert row["dataset"] == "metaqa" and row["model"] and "scores" not in row


def test_openapi_docs_are_served(client):
    assert client.get("/docs").status_code == 200
    assert {"/ask", "/ask/batch", "/health", "/calibrations"} <= set(
        client.get("/openapi.json").json()["paths"]
    )


def test_binding_beyond_loopback_needs_a_token(monkeypatch):
    assert is_loopback("127.0.0.1") and is_loopback("localhost") and is_loopback("::1")
    assert not is_loopback("0.0.0.0") and not is_loopback("example.org")
    check_bind("127.0.0.1", None)
    check_bind("0.0.0.0", TOKEN)
    with pytest.raises(BadInput, match="CPR_API_TOKEN"):
        check_bind("0.0.0.0", None)
    with pytest.raises(BadInput, match="too short"):
        check_bind("0.0.0.0", "short")
    from cpr_neo4j.cli.main import cli

    monkeypatch.delenv("CPR_API_TOKEN", raising=False)
    out = CliRunner().invoke(cli, ["serve", "--host", "0.0.0.0", "--port", str(closed_port())])
    assert out.exit_code == 3 and "CPR_API_TOKEN" in out.output


def test_with_a_token_requests_need_the_bearer(neo4j_settings):
    with TestClient(create_app(neo4j_settings, token=TOKEN)) as c:
        assert c.get("/health").status_code == 401
        wrong = c.get("/health", headers={"Authorization": "Bearer wrong-token"})
        assert wrong.status_code == 401 and wrong.headers["www-authenticate"] == "Bearer"
        assert c.post("/ask", json={"question": QUESTION, "alpha": 0.1}).status_code == 401
        right = c.get("/health", headers={"Authorization": f"Bearer {TOKEN}"})
        assert right.status_code == 200


def test_unreachable_neo4j_is_503_json(neo4j_settings):
    s = neo4j_settings
    dead = Neo4jSettings(
        f"bolt://127.0.0.1:{closed_port()}", s.username, s.password, s.database, "t"
    )
    with TestClient(create_app(dead)) as c:
        r = c.post("/ask", json={"question": QUESTION, "alpha": 0.1})
        assert r.status_code == 503 and r.json()["type"] == "Neo4jUnavailable"
        assert c.get("/calibrations").status_code == 503
        health = c.get("/health")
        assert health.status_code == 503 and health.json()["neo4j"]["reachable"] is False


class Forwarder:
    """A TCP relay to Neo4j that can be switched off and on: an outage without touching
    the shared server."""

    def __init__(self, port: int, target: tuple[str, int]):
        self.port, self.target = port, target
        self.listener: socket.socket | None = None
        self.open: list[socket.socket] = []

    def start(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", self.port), reuse_port=False)
        threading.Thread(target=self._accept, args=(self.listener,), daemon=True).start()

    def stop(self) -> None:
        if self.listener is not None:
            with contextlib.suppress(OSError):  # wakes the accept() blocked in the thread
                self.listener.shutdown(socket.SHUT_RDWR)
            self.listener.close()
        for s in self.open:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()
        self.open.clear()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            self.open += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)


def test_recovers_by_itself_when_neo4j_comes_back(neo4j_settings):
    s = neo4j_settings
    target = urlparse(s.uri)
    port = closed_port()
    relay = Forwarder(port, (target.hostname, target.port or 7687))
    via = Neo4jSettings(f"bolt://127.0.0.1:{port}", s.username, s.password, s.database, "t")
    with TestClient(create_app(via, retry_time=1.0)) as c:
        assert c.get("/calibrations").status_code == 503  # down from the start
        relay.start()
        try:
            assert c.get("/calibrations").status_code == 200
            relay.stop()  # an outage with an open driver
            down = c.get("/calibrations")
            assert down.status_code == 503 and down.json()["type"] == "Neo4jUnavailable"
            relay.start()
            assert c.get("/calibrations").status_code == 200
        finally:
            relay.stop()


def test_a_database_still_starting_is_503_not_500():
    """After a restart Neo4j answers DatabaseUnavailable until the database is up (seen in
    `bench/serve.py --fault`): that is an outage, not a refused statement."""
    from neo4j.exceptions import TransientError

    from cpr_neo4j.serve.answer import classify

    exc = TransientError._hydrate_neo4j(
        code="Neo.TransientError.General.DatabaseUnavailable", message="not available"
    )
    assert classify(exc).status == 503
    code = "Neo.TransientError.Transaction.Outdated"
    other = TransientError._hydrate_neo4j(code=code, message="x")
    assert classify(other).status == 500
