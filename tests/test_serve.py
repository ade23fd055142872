"""`cpr serve` against the real Neo4j: answers, errors as JSON with their status, the token
rule, 503 while Neo4j is unreachable and recovery once it is back.

Uses the session's small MetaQA 2-hop model and calibration (tests/conftest.py `two_hop`);
the :Ask records the tests create are removed at the end.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import math
import select
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlparse

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from cpr_neo4j.config import Neo4jSettings
from cpr_neo4j.errors import BadInput
from cpr_neo4j.graph import records
from cpr_neo4j.serve.app import create_app
from cpr_neo4j.serve.auth import check_bind, is_loopback
from cpr_neo4j.serve.schemas import AskResponse

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
def calibrated(store, metaqa, two_hop):
    """The session's small MetaQA 2-hop model and its calibration (text linking, what plain
    asks need), its CPR_HOME in place so the server loads it."""
    node = records.latest_calibration(store, "metaqa", hops_filter=2)
    assert node["model"] == two_hop.model_id, "another 2-hop calibration is newer"
    env = two_hop.env()
    yield two_hop.model_id
    env.undo()


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
    assert first["rank"] == 1  # in the set within tau, or as its top-ranked level
    bound = max(body["tau"], first["score"]) + 1e-3
    assert all(a["score"] <= bound for a in body["answers"])
    assert first["path_entities"][0]["id"] == "John Krasinski"
    assert first["path_entities"][-1] == {"id": first["id"], "name": first["name"]}
    assert body["n"] > 0 and body["model_id"] and "guarantee" in body
    rows = store.query(
        "MATCH (a:Ask {id: $id}) RETURN a.answer_count AS n, a.model_id AS m",
        {"id": body["ask_id"]},
    )[0]
    assert rows and rows[0]["n"] == len(body["answers"]) and rows[0]["m"] == body["model_id"]
    assert client.get("/health").json()["models_loaded"].get(body["model_id"], 0) >= 1


def test_ask_json_is_what_fastapi_would_make_of_the_model(client, asked):
    """/ask serialises its AskResponse itself (no second validation); /ask/batch items still
    go through FastAPI: the same question gives the same JSON, ids of the record aside."""
    one = ask(client, asked, question=QUESTION).json()
    assert AskResponse.model_validate(one).model_dump(mode="json") == one
    r = client.post(
        "/ask/batch",
        json={"requests": [{"alpha": 0.1, "hops": 2, "dataset": "metaqa", "question": QUESTION}]},
    )
    item = r.json()["results"][0]["result"]
    asked.append(item["ask_id"])
    per_ask = {"ask_id", "browser_url", "cypher"}
    assert {k: v for k, v in one.items() if k not in per_ask} == {
        k: v for k, v in item.items() if k not in per_ask
    }
    schema = client.get("/openapi.json").json()["paths"]["/ask"]["post"]["responses"]["200"]
    assert schema["content"]["application/json"]["schema"]["$ref"].endswith("/AskResponse")


def test_concurrent_asks_match_sequential_ones(client, asked):
    alone = {q: ask(client, asked, question=q).json()["answers"] for q in (QUESTION, OTHER)}
    with ThreadPoolExecutor(6) as pool:
        results = list(pool.map(lambda q: ask(client, asked, question=q), [QUESTION, OTHER] * 3))
    for q, r in zip([QUESTION, OTHER] * 3, results, strict=True):
        assert r.status_code == 200, r.text
        assert r.json()["answers"] == alone[q]


def test_a_held_calibration_serves_only_while_the_dataset_is_unchanged(
    client, asked, store, monkeypatch
):
    """The server holds the calibration a request was served by and does not read it again
    (one round trip less per ask); the :Ask write checks it is still current. After a newer
    calibration the next request is answered under the new one, one :Ask written; after an
    ingest (a new fingerprint) it is refused as stale, nothing written."""

    def run(text: str, **params) -> list:
        return store.query(text, params, write=True)[0]

    def count() -> int:
        return run("MATCH (a:Ask {question: $q}) RETURN count(a) AS n", q=OTHER)[0]["n"]

    cal = records.latest_calibration(store, "metaqa", hops_filter=2)
    first = ask(client, asked, question=OTHER)
    assert first.status_code == 200, first.text
    reads, read = [], records.latest_calibration
    monkeypatch.setattr(records, "latest_calibration", lambda *a: reads.append(a) or read(*a))
    assert ask(client, asked, question=OTHER).json()["answers"] == first.json()["answers"]
    assert not reads, "the held calibration was read again"
    n0 = count()
    old = run(
        "MATCH (c:Calibration {id: $id}) WITH c, c.created AS old "
        "SET c.created = old + '-newer' RETURN old",
        id=cal["id"],
    )[0]["old"]
    try:
        again = ask(client, asked, question=OTHER)
        assert again.status_code == 200, again.text
        assert again.json()["answers"] == first.json()["answers"]
        assert count() == n0 + 1, "one :Ask per request"
        fp = run(
            "MATCH (d:Dataset {name: 'metaqa'}) WITH d, d.fingerprint AS fp "
            "SET d.fingerprint = 'g0-changed' RETURN fp"
        )[0]["fp"]
        try:
            stale = ask(client, asked, question=OTHER)
            assert stale.status_code == 409 and "no longer fits" in stale.json()["detail"]
            assert count() == n0 + 1, "a stale request's :Ask was written"
        finally:
            run("MATCH (d:Dataset {name: 'metaqa'}) SET d.fingerprint = $fp", fp=fp)
    finally:
        run("MATCH (c:Calibration {id: $id}) SET c.created = $old", id=cal["id"], old=old)
    back = ask(client, asked, question=OTHER)
    assert back.status_code == 200 and back.json()["answers"] == first.json()["answers"]


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
    # the same batch key and cache, not one of its own per request
    assert client.app.state.batcher.sources() == sources
    assert [s.round_trips for s in sources] == trips


def test_the_graph_read_whole_answers_as_queries_per_request(neo4j_settings, client, asked):
    """The batched server reads MetaQA's neighbour rows whole (serve/batch.py) and then makes
    no neighbour query; an unbatched one queries Neo4j per request: same sets, same best
    answer left out, same thresholds, at a small and a large alpha."""
    questions = [QUESTION, OTHER, "what genres are the movies written by [Quentin Tarantino]",
                 "who acted in the movies directed by [Ridley Scott]"]  # fmt: skip
    keys = ("answers", "best_outside", "tau", "topics")
    with TestClient(create_app(neo4j_settings, batch_searches=False)) as plain:
        for q in questions:
            for alpha in (0.1, 0.5):
                a = ask(client, asked, question=q, alpha=alpha)
                b = ask(plain, asked, question=q, alpha=alpha)
                assert a.status_code == b.status_code == 200, (a.text, b.text)
                assert {k: a.json()[k] for k in keys} == {k: b.json()[k] for k in keys}
    sources = client.app.state.batcher.sources()
    assert sources and all(s.complete for s in sources)
    trips = [s.round_trips for s in sources]
    ask(client, asked, question="which movies did [Tom Hanks] star in")
    assert [s.round_trips for s in sources] == trips, "a neighbour query after the preload"


def test_a_changed_graph_gets_a_new_neighbour_cache(store):
    """The batch key's cache belongs to one graph fingerprint: a new fingerprint (an ingest
    changed the dataset) starts a new cache instead of answering from old rows."""
    from cpr_neo4j.calibration import Calibration
    from cpr_neo4j.conformal.guarantee import request
    from cpr_neo4j.model.scorer import PathScorer
    from cpr_neo4j.serve.batch import SearchBatcher
    from cpr_neo4j.serve.cache import ScorerPool
    from cpr_neo4j.stages.ask import Session
    from cpr_neo4j.stages.retrieval import RetrievalSettings, Retriever

    batcher = SearchBatcher(ScorerPool())
    retriever = Retriever(store, "metaqa", PathScorer.__new__(PathScorer), RetrievalSettings(2))

    def session(graph: str) -> Session:
        cal = Calibration.of({"id": "c", "model": "m"})
        return Session(
            store=store,
            dataset="metaqa",
            cal=cal,
            calibrated=None,
            request=request(0.1),
            spec={},
            retriever=retriever,
            no_guarantee=None,
            graph=graph,
        )

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
    r = ask(client, asked, question="who directed it", entity="No Such Entity 42")
    assert r.status_code == 400 and "give the `entity` field" in r.json()["detail"]
    assert "--" not in r.json()["detail"]  # the request's fields, not CLI flags


def test_calibration_mismatch_is_409(client, asked):
    r = ask(client, asked, question=QUESTION, beam_width=3)
    assert r.status_code == 409 and "does not match" in r.json()["detail"]
    r = ask(client, asked, question=QUESTION, model="rcv-no-such-model")
    assert r.status_code == 409 and r.json()["type"] == "Conflict"


def test_risk_fnr_allow_empty_ungrouped_and_delta_0_are_accepted(client, asked, calibrated):
    pac = ask(client, asked, question=QUESTION, alpha=0.3)
    assert pac.status_code == 200, pac.text
    pac = pac.json()
    assert pac["delta"] == 0.05 and pac["risk"] == "coverage" and pac["model_id"] == calibrated
    assert "over the calibration draw" in pac["guarantee"] and pac["group"] >= 1
    marginal = ask(client, asked, question=QUESTION, alpha=0.3, delta=0).json()
    assert (
        marginal["delta"] is None and "on average over calibration draws" in marginal["guarantee"]
    )
    assert marginal["tau"] <= pac["tau"]
    fnr = ask(client, asked, question=QUESTION, alpha=0.3, risk="fnr").json()
    assert fnr["risk"] == "fnr" and fnr["delta"] is None and fnr["answers"]
    assert "of the correct answers" in fnr["guarantee"]
    one = ask(client, asked, question=QUESTION, alpha=0.3, ungrouped=True).json()
    assert one["answers"] and "whose best candidate path" not in one["guarantee"]
    ids = {a["id"] for a in pac["answers"]}
    for alpha in (0.3, 0.8):
        r = ask(client, asked, question=QUESTION, alpha=alpha, allow_empty=True)
        assert r.status_code == 200, r.text
        body = r.json()
        assert bool(body["answers"]) != bool(body["best_outside"])  # the top one if empty
        assert all(a["score"] <= body["tau"] + 1e-3 for a in body["answers"])
        if alpha == 0.3:
            assert {a["id"] for a in body["answers"]} <= ids  # a subset of the default set
    print(f"\nPAC tau {pac['tau']:.4g}, marginal {marginal['tau']:.4g}, FNR {fnr['tau']:.4g}")
    bad = client.post("/ask", json={"question": QUESTION, "alpha": 0.3, "risk": "recall"})
    assert bad.status_code == 422
    both = client.post("/ask", json={"question": QUESTION, "risk": "fnr", "delta": 0.05})
    assert both.status_code == 422 and "leave delta out" in both.json()["detail"]
    assert "--delta" not in both.json()["detail"]  # HTTP speaks of request fields


def test_entity_may_be_a_list(client, asked):
    """The schema takes several topics; this calibration links from the text and keeps
    curves for named topics, so `entity` (one or several) is answered under those."""
    r = ask(client, asked, question=QUESTION, entity=["John Krasinski", "Sam Mendes"])
    assert r.status_code == 200, r.text
    assert {t["id"] for t in r.json()["topics"]} == {"John Krasinski", "Sam Mendes"}
    assert r.json()["guarantee"]
    r = ask(client, asked, question="what movies did tom hanks star in")  # two ids match
    assert r.status_code == 200, r.text  # the search decides; the answer says so
    assert any("took" in n and "give the `entity` field its id" in n for n in r.json()["notes"])


def test_a_fixed_hop_calibration_without_hops_is_409(client, store, fixed_hop_only):
    from tests.conftest import FIXED_HOP_DATASET

    q = store.query(
        "MATCH (q:Question {dataset: $d}) RETURN q.text AS text ORDER BY q.id LIMIT 1",
        {"d": FIXED_HOP_DATASET},
    )[0][0]["text"]
    body = {"question": q, "alpha": 0.3, "dataset": FIXED_HOP_DATASET}
    r = client.post("/ask", json=body)
    assert r.status_code == 409 and r.json()["type"] == "Conflict"
    detail = r.json()["detail"]  # the request's field, not the CLI's flag
    assert "the `hops` field to 2" in detail and "--hops" not in detail and "cpr train" in detail
    env = fixed_hop_only.env()  # the server loads that model from its CPR_HOME
    try:
        ok = client.post("/ask", json={**body, "hops": 2})
    finally:
        env.undo()
    assert ok.status_code == 200, ok.text
    assert "2-hop" in ok.json()["guarantee"] and ok.json()["model_id"] == fixed_hop_only.model_id
    store.write("delete_asks", ids=[ok.json()["ask_id"]])


def test_calibrations_are_listed_without_scores(client):
    r = client.get("/calibrations", params={"dataset": "metaqa"})
    assert r.status_code == 200 and r.json()
    row = r.json()[0]
    assert row["dataset"] == "metaqa" and row["model"] and "scores" not in row


def test_openapi_docs_are_served(client):
    assert client.get("/docs").status_code == 200
    paths = client.get("/openapi.json").json()["paths"]
    assert {"/ask", "/ask/batch", "/health", "/calibrations"} <= set(paths)
    assert "413" in paths["/ask"]["post"]["responses"]
    assert "413" in paths["/ask/batch"]["post"]["responses"]


def dead_settings(s: Neo4jSettings) -> Neo4jSettings:
    """Nothing listens there: apps that must answer without Neo4j."""
    return Neo4jSettings(
        f"bolt://127.0.0.1:{closed_port()}", s.username, s.password, s.database, "t"
    )


@contextlib.contextmanager
def serving(app):
    """The app behind a real uvicorn on a free loopback port, in a thread."""
    import uvicorn

    config = uvicorn.Config(app, host="127.0.0.1", port=closed_port(), log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    try:
        yield config.port
    finally:
        server.should_exit = True
        thread.join(10)


def connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=10)


def reply(sock: socket.socket) -> tuple[int, dict]:
    answer = http.client.HTTPResponse(sock)
    answer.begin()
    return answer.status, json.loads(answer.read())


HEAD = b"POST /ask HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"


def test_an_announced_big_body_is_413_before_it_is_sent(neo4j_settings):
    """Content-Length 50 MB: the 413 comes back with not one byte of body sent (a server
    that read the body first would never reply here: the socket's timeout would fail the
    read)."""
    with serving(create_app(dead_settings(neo4j_settings))) as port, connect(port) as sock:
        sock.sendall(HEAD + b"Content-Length: 52428800\r\n\r\n")
        status, body = reply(sock)
    assert status == 413
    assert body["status"] == 413 and body["type"] == "RequestTooLarge"
    assert "1048576 bytes" in body["detail"]


def test_a_chunked_big_body_is_413(neo4j_settings):
    """No Content-Length: chunks are counted as they come, and the 413 comes back while the
    body is still being sent (after about 1 MiB of the 4 MiB)."""
    chunk = b"%x\r\n%s\r\n" % (65536, b" " * 65536)
    sent = 0
    with serving(create_app(dead_settings(neo4j_settings))) as port, connect(port) as sock:
        sock.sendall(HEAD + b"Transfer-Encoding: chunked\r\n\r\n")
        while sent < 64 and not select.select([sock], [], [], 0.02)[0]:  # the answer is there
            with contextlib.suppress(OSError):  # the server may close the connection
                sock.sendall(chunk)
            sent += 1
        status, body = reply(sock)
    assert status == 413 and body["type"] == "RequestTooLarge"
    assert sent < 64, "the 413 only came once the whole body was sent"


def test_body_reading_stops_at_the_bound(neo4j_settings):
    """At the ASGI level: chunks past the bound are never asked for."""
    app = create_app(dead_settings(neo4j_settings), max_body=1000)
    pulled, sent = [], []

    async def receive():
        pulled.append(100)
        return {"type": "http.request", "body": b" " * 100, "more_body": True}

    async def send(message):
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/ask",
        "raw_path": b"/ask",
        "root_path": "",
        "query_string": b"",
        "headers": [(b"content-type", b"application/json")],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
    }
    asyncio.run(app(scope, receive, send))
    assert sum(pulled) == 1100  # the chunk that crossed 1000 bytes was the last one read
    assert [m["type"] for m in sent] == ["http.response.start", "http.response.body"]
    assert sent[0]["status"] == 413 and json.loads(sent[1]["body"])["status"] == 413


def test_bodies_under_the_bound_are_read(client, asked):
    r = ask(client, asked, question=QUESTION)
    assert r.status_code == 200, r.text
    big = {"question": "x" * 900_000, "alpha": 0.1}  # under 1 MiB: read, then refused by size
    assert client.post("/ask", json=big).status_code == 422


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


def test_the_pools_scorers_share_path_embeddings():
    """Each scorer of a pool keeps a path table of its own (cache=False); the shared
    encoder still caches the texts, so a relation path is embedded once per process, not
    once per scorer that meets it."""
    import numpy as np

    from cpr_neo4j.model.encoder import TextEncoder
    from cpr_neo4j.serve.cache import LockedEncoder

    inner = TextEncoder()
    embedded: list[list[str]] = []
    embed = inner._embedder.embed
    inner._embedder.embed = lambda texts: embedded.append(list(texts)) or embed(texts)
    shared = LockedEncoder(inner)
    text = "a relation path text no calibration embedded then another 7f3a"
    first = shared.encode([text], cache=False)  # one scorer's table
    again = shared.encode([text], cache=False)  # another scorer's
    assert embedded == [[text]]
    assert np.array_equal(first, again) and first.shape == (1, 384)


# --- issue 55 rows 12, 13, 15: one schema, strict JSON, unknown fields, batches -------------


def _strict(text: str):
    """json.loads that refuses NaN and Infinity, as JSON.parse does."""

    def refuse(name: str):
        raise ValueError(f"not JSON: {name}")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize("extra", [{"alpah": 0.5}, {"entities": ["x"]}], ids=["alpah", "entities"])
def test_unknown_fields_are_422_naming_them(client, extra):
    r = client.post("/ask", json={"question": QUESTION, "alpha": 0.1, **extra})
    assert r.status_code == 422, r.text
    (field,) = extra
    assert r.json()["detail"].startswith(f"{field}: unknown field (the fields are question, alpha")
    r = client.post("/ask/batch", json={"requests": [{"question": QUESTION}], **extra})
    assert r.status_code == 422 and f"{field}: unknown field" in r.json()["detail"]


def test_one_malformed_batch_item_does_not_sink_the_others(client, asked):
    good = {"question": QUESTION, "alpha": 0.1, "hops": 2, "dataset": "metaqa"}
    r = client.post(
        "/ask/batch",
        json={"requests": [good, {**good, "alpah": 0.5}, {"alpha": 0.1}, {**good, "alpha": 2}]},
    )
    assert r.status_code == 200, r.text
    first, typo, missing, wrong = r.json()["results"]
    asked.append(first["result"]["ask_id"])
    assert first["result"]["answers"] and first["error"] is None
    for item, says in ((typo, "alpah: unknown field"), (missing, "question: Field required"),
                       (wrong, "alpha: Input should be less than 1")):  # fmt: skip
        assert item["result"] is None and item["error"]["status"] == 422, item
        assert item["error"]["detail"].startswith(says), item
    # the batch's own bounds still refuse it whole (documented: 1 to 100 items)
    r = client.post("/ask/batch", json={"requests": [good] * 101})
    assert r.status_code == 422 and "at most 100 items" in r.json()["detail"]
    assert client.post("/ask/batch", json={"requests": []}).status_code == 422


def test_calibrations_give_their_alphas_and_taus(client, store, calibrated):
    from cpr_neo4j.conformal.guarantee import Calibrated, request

    r = client.get("/calibrations", params={"dataset": "metaqa"})
    row = next(x for x in r.json() if x["model"] == calibrated)
    assert row["alphas"] == [0.1, 0.3, 0.5] and not row["alphas_default"]  # two_hop's
    node = store.read("calibration_node", id=row["id"])[0]["c"]
    cal = Calibrated.from_node(node)
    groups = sorted({int(g) for g in cal.groups.tolist()} - {0})
    assert len(row["taus"]) == 3 * 2 * len(groups) > 0
    for t in row["taus"]:
        delta = row["delta"] if t["risk"] == "coverage" else None
        want = cal.threshold(request(t["alpha"], delta, t["risk"]), t["group"]).value
        assert t["tau_infinite"] == (want == math.inf)
        assert t["tau"] == (None if math.isinf(want) else pytest.approx(want, abs=1e-12))


def test_cli_json_is_the_http_schema_and_strict_json(neo4j_settings, client, asked, calibrated):
    """`cpr ask --json` prints what POST /ask answers: the same fields, infinities as null
    with tau_infinite, parseable by a strict parser (issue 55 row 13)."""
    import os

    from tests.conftest import cpr_cli

    home = os.environ["CPR_HOME"]  # `calibrated` set it to the model's home
    base = ["--dataset", "metaqa", "--hops", "2", "--json"]
    cases = {
        "plain": ["--alpha", "0.1"],
        "all candidates": ["--alpha", "0.001", "--all-candidates"],  # +inf
        "effective scores": ["--alpha", "0.5", "--effective-scores"],
    }
    fields = set(AskResponse.model_fields)
    for name, extra in cases.items():
        done = cpr_cli(neo4j_settings, home, "ask", QUESTION, *base, *extra)
        assert done.returncode == 0, (name, done.stderr)
        body = _strict(done.stdout)
        asked.append(body["ask_id"])
        assert set(body) == fields, name
        AskResponse.model_validate(body)
        assert body["answers"] and set(body["answers"][0]) == {
            "rank", "id", "name", "score", "path", "path_entities"}  # fmt: skip
        if name == "all candidates":
            assert body["tau"] is None and body["tau_infinite"] is True
    http = client.post(
        "/ask", json={"question": QUESTION, "alpha": 0.1, "hops": 2, "dataset": "metaqa"}
    ).json()
    asked.append(http["ask_id"])
    cli = _strict(cpr_cli(neo4j_settings, home, "ask", QUESTION, *base, "--alpha", "0.1").stdout)
    asked.append(cli["ask_id"])
    assert set(http) == set(cli)
    assert [(a["id"], a["score"]) for a in http["answers"]] == [
        (a["id"], a["score"]) for a in cli["answers"]
    ]


def test_cli_file_lines_keep_ids_and_name_the_entity_field(neo4j_settings, asked, calibrated):
    """`cpr ask --file`: each line the answer schema plus line and id; a failed line keeps
    its id and names the line's `entity` field, not --entity (issue 55, smaller ones)."""
    import os

    from tests.conftest import cpr_cli

    lines = [
        json.dumps({"id": "good", "question": QUESTION}),
        json.dumps({"id": "noq", "entity": "John Krasinski"}),
        json.dumps({"id": "unknown", "question": "who directed it", "entity": "No Such Entity 42"}),
    ]
    done = cpr_cli(
        neo4j_settings, os.environ["CPR_HOME"], "ask", "--file", "-", "--dataset", "metaqa",
        "--hops", "2", "--alpha", "0.1", input="\n".join(lines) + "\n",
    )  # fmt: skip
    assert done.returncode == 1 and "2 of 3 questions failed" in done.stderr
    good, noq, unknown = (_strict(x) for x in done.stdout.splitlines())
    asked.append(good["ask_id"])
    assert good["line"] == 1 and good["id"] == "good"
    assert set(good) == set(AskResponse.model_fields) | {"line", "id"}
    needs = 'line 2 is not a question object: needs a "question" string'
    assert noq == {"line": 2, "id": "noq", "type": "BadInput", "error": needs}
    assert unknown["id"] == "unknown" and "the line's `entity` field" in unknown["error"]
    assert "--entity" not in unknown["error"]


def test_cli_prints_cypher_that_runs(neo4j_settings, store, asked, calibrated):
    """`cpr ask` against a server named by NEO4J_URI (no Browser link): the Cypher it prints
    for pasting, run through the driver, returns the Ask's TOPIC, ANSWER and path rows
    (issue 55 row 1: the terminal renderer ate `[r:TOPIC|ANSWER]`)."""
    import os
    import subprocess
    import sys

    from tests.conftest import cli_env

    host = "localhost" if "127.0.0.1" in neo4j_settings.uri else "127.0.0.1"
    uri = neo4j_settings.uri.replace("127.0.0.1", host) if host == "localhost" else (
        neo4j_settings.uri.replace("localhost", host))  # fmt: skip
    env = cli_env(neo4j_settings, os.environ["CPR_HOME"]) | {
        "NEO4J_URI": uri, "NEO4J_USERNAME": neo4j_settings.username,
        "NEO4J_PASSWORD": neo4j_settings.password, "NEO4J_DATABASE": neo4j_settings.database,
        "COLUMNS": "60",  # narrow: the Cypher must not be wrapped either
    }  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "cpr_neo4j", "ask", QUESTION, "--dataset", "metaqa", "--hops",
         "2", "--alpha", "0.3"], capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "Browse the paths in Neo4j Browser with:" in out, out
    asked.append(out.split("(:Ask {id: '")[1].split("'")[0])
    cypher = out.split("Browse the paths in Neo4j Browser with:\n")[1].split("\n(`cpr")[0]
    assert "[r:TOPIC|ANSWER]" in cypher and "[p:ANSWER]" in cypher
    rows, _ = store.query(cypher, {})
    kinds = {row["r"].type for row in rows}
    assert {"TOPIC", "ANSWER"} <= kinds and len(kinds) > 2  # and the paths' own hops
