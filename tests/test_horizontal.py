"""Horizontal serving on one machine: `cpr serve --workers 2` (two processes behind one
port, sharing nothing but Neo4j), and the routing scheme neo4j:// (how a cluster is
addressed) against the single local server. Uses the session's small MetaQA 2-hop model."""

from __future__ import annotations

import dataclasses
import http.client
import re
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from cpr_neo4j.graph import records
from cpr_neo4j.serve.app import create_app
from tests.conftest import cli_env

pytestmark = pytest.mark.neo4j
QUESTIONS = ["which person directed the movies starred by [John Krasinski]",
             "who directed the films written by [Neil Gaiman]"]  # fmt: skip


def body(question: str) -> dict:
    return {"question": question, "alpha": 0.3, "hops": 2, "dataset": "metaqa"}


@pytest.fixture(scope="module")
def calibrated(store, metaqa, two_hop):
    node = records.latest_calibration(store, "metaqa", hops_filter=2)
    assert node["model"] == two_hop.model_id, "another 2-hop calibration is newer"
    asked: list[str] = []
    yield two_hop, asked
    if asked:
        store.write("delete_asks", ids=asked)


def test_serves_over_the_routing_scheme(neo4j_settings, calibrated):
    trained, asked = calibrated
    uri = re.sub(r"^bolt(\+s|\+ssc)?://", r"neo4j\1://", neo4j_settings.uri)
    assert uri.startswith("neo4j"), uri
    env = trained.env()
    try:
        with TestClient(create_app(dataclasses.replace(neo4j_settings, uri=uri))) as c:
            health = c.get("/health").json()["neo4j"]
            r = c.post("/ask", json=body(QUESTIONS[0]))
    finally:
        env.undo()
    assert health["uri"] == uri and health.get("reachable", True), health
    assert r.status_code == 200, r.text
    asked.append(r.json()["ask_id"])
    assert r.json()["answers"]


def test_two_worker_processes_answer_on_one_port(neo4j_settings, calibrated, tmp_path: Path):
    trained, asked = calibrated
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = tmp_path / "serve.log"
    cmd = [sys.executable, "-m", "cpr_neo4j", "serve", "--port", str(port), "--workers", "2",
           "--scorers", "1", "--keepalive-requests", "3"]  # fmt: skip
    env = cli_env(neo4j_settings, trained.home)
    proc = subprocess.Popen(cmd, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        while True:
            assert proc.poll() is None, log.read_text()[-2000:]
            assert time.monotonic() < deadline, "no /health in 300 s\n" + log.read_text()[-2000:]
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.5)
        workers = [p for p in Path("/proc").glob("[0-9]*/stat")
                   if _parent(p) == proc.pid]  # fmt: skip
        assert len(workers) >= 2, f"{len(workers)} worker process(es)\n" + log.read_text()
        with ThreadPoolExecutor(4) as pool:
            replies = list(
                pool.map(
                    lambda q: httpx.post(f"{url}/ask", json=body(q), timeout=120), QUESTIONS * 4
                )  # fmt: skip
            )
        # the third response of a kept-alive connection closes it: clients re-spread
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        closes = []
        for _ in range(4):
            conn.request("GET", "/health")
            reply = conn.getresponse()
            reply.read()
            closes.append((reply.status, reply.getheader("connection")))
        conn.close()
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    assert closes == [(200, None), (200, None), (200, "close"), (200, None)], closes
    assert [r.status_code for r in replies] == [200] * len(replies), replies[0].text
    asked.extend(r.json()["ask_id"] for r in replies)
    for q, r in zip(QUESTIONS * 4, replies, strict=True):  # whichever worker answered
        assert r.json()["answers"] == replies[QUESTIONS.index(q)].json()["answers"]


def _parent(stat: Path) -> int | None:
    try:
        return int(stat.read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


@pytest.mark.parametrize(("cores", "workers"), [(1, 1), (2, 2), (3, 3), (16, 4)])
def test_the_default_is_one_worker_per_core_up_to_four(monkeypatch, cores, workers):
    from cpr_neo4j.cli import serve_cmd

    monkeypatch.setattr(serve_cmd.os, "sched_getaffinity", lambda _: set(range(cores)))
    assert serve_cmd.default_workers() == workers
