"""Where `cpr serve` runs a request (serve/app.py): alone on the event loop's thread, with
others in flight on a worker thread (their searches batch), and on worker threads after
Neo4j failed one, until one succeeds. The answering itself is stubbed here: the real
answers, sequential and concurrent, are tests/test_serve.py's."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from fastapi.testclient import TestClient

from cpr_neo4j.errors import ConnectionFailed
from cpr_neo4j.serve import app as app_mod
from cpr_neo4j.serve.app import create_app

pytestmark = pytest.mark.neo4j  # the app opens its (real) store before answering

BODY = {"question": "who directed [Dune]", "alpha": 0.1}


class _Out:
    def model_dump_json(self) -> str:
        return '{"ok": true}'


@pytest.fixture
def served(monkeypatch, neo4j_settings):
    """(client, threads each request ran on, failures to raise next)."""
    ran: list[str] = []
    fail: list[BaseException] = []

    def answer(*args, **kwargs):
        ran.append(threading.current_thread().name)
        time.sleep(0.2)  # long enough for concurrent requests to overlap
        if fail:
            raise fail.pop()
        return _Out()

    monkeypatch.setattr(app_mod, "answer", answer)
    with TestClient(create_app(neo4j_settings)) as client:
        yield client, ran, fail


def test_a_lone_request_runs_on_the_loop_and_one_beside_another_takes_a_thread(served):
    client, ran, fail = served
    assert client.post("/ask", json=BODY).json() == {"ok": True}
    assert client.post("/ask", json=BODY).status_code == 200
    loop = ran[0]
    assert ran == [loop, loop]  # both alone: the event loop's thread
    fail.append(ConnectionFailed("Neo4j is down"))
    assert client.post("/ask", json=BODY).status_code == 503  # so the next takes a thread
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(client.post, "/ask", json=BODY)
        while len(ran) < 4:  # in flight on a worker thread
            time.sleep(0.01)
        second = client.post("/ask", json=BODY)  # arrives while the first is in flight
        assert first.result().status_code == second.status_code == 200
    assert ran[3] != loop and ran[4] != loop
    assert client.post("/ask", json=BODY).status_code == 200
    assert ran[-1] == loop  # alone again


def test_after_neo4j_failed_a_request_the_next_takes_a_thread_until_one_succeeds(served):
    client, ran, fail = served
    client.post("/ask", json=BODY)
    loop = ran[-1]
    fail.append(ConnectionFailed("Neo4j is down"))
    r = client.post("/ask", json=BODY)
    assert r.status_code == 503 and r.json()["type"] == "Neo4jUnavailable"
    assert ran[-1] == loop  # it was alone
    assert client.post("/ask", json=BODY).status_code == 200
    assert ran[-1] != loop  # after the outage: a worker thread, the loop kept free
    assert client.post("/ask", json=BODY).status_code == 200
    assert ran[-1] == loop  # that one succeeded: back on the loop
    fail.append(ValueError("a bug, not an outage"))
    with pytest.raises(ValueError):
        client.post("/ask", json=BODY)
    client.post("/ask", json=BODY)
    assert ran[-1] == loop  # only an outage sends requests to threads
