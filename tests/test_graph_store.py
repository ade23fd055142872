"""The graph layer against a real Neo4j server."""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.request

import pytest

from cpr_neo4j.config import Neo4jSettings
from cpr_neo4j.errors import ConnectionFailed
from cpr_neo4j.graph.schema import bootstrap, schema_statements
from cpr_neo4j.graph.store import GraphStore

pytestmark = pytest.mark.neo4j


def test_schema_bootstrap_is_idempotent(store):
    first = {r["name"] for r in store.read("schema_list")}
    bootstrap(store)
    bootstrap(store)
    after = store.read("schema_list")
    assert {r["name"] for r in after} == first
    assert {"entity_key", "entity_names", "relation_key", "question_key"} <= first
    assert all(r["state"] == "ONLINE" for r in after)
    assert len(schema_statements()) >= 9


def test_reads_name_the_database_and_return_records(store):
    assert store.database == "neo4j"
    store.query("CREATE (:CprReadCheck {k: 'count'})", write=True)
    try:
        rows, _ = store.query("MATCH (n) RETURN count(n) AS n")
        assert store.read("count_nodes") == [{"nodes": rows[0]["n"]}] and rows[0]["n"] >= 1
    finally:
        store.query("MATCH (n:CprReadCheck) DELETE n", write=True)


def test_a_read_sees_the_write_just_before_it(store):
    store.query("CREATE (:CprReadCheck {k: $k})", {"k": "after-write"}, write=True)
    try:
        rows, _ = store.query(
            "MATCH (n:CprReadCheck {k: $k}) RETURN count(n) AS n", {"k": "after-write"}
        )
        assert rows[0]["n"] == 1
    finally:
        store.query("MATCH (n:CprReadCheck) DELETE n", write=True)


def test_a_read_that_fails_transiently_runs_again_as_a_managed_transaction(store, monkeypatch):
    from neo4j.exceptions import TransientError

    tries = []

    def fail_once(text, params):
        tries.append(text)
        raise TransientError("injected: the auto-commit read failed")

    rows, _ = store.query("MATCH (n) RETURN count(n) AS n")
    monkeypatch.setattr(store, "_read_once", fail_once)
    # answered by the managed retry, with what the database holds
    assert store.read("count_nodes") == [{"nodes": rows[0]["n"]}]
    assert len(tries) == 1


def test_unreachable_server_is_one_clear_error():
    bad = Neo4jSettings("bolt://127.0.0.1:1", "neo4j", "x", "neo4j", "test")
    with pytest.raises(ConnectionFailed) as info:
        GraphStore(bad, connect_timeout=2)
    msg = str(info.value)
    assert "bolt://127.0.0.1:1" in msg and "cpr neo4j start" in msg and "\n" not in msg


def test_wrong_password_is_one_clear_error(neo4j_settings):
    bad = Neo4jSettings(neo4j_settings.uri, "neo4j", "definitely-wrong", "neo4j", "test")
    with pytest.raises(ConnectionFailed) as info:
        GraphStore(bad, connect_timeout=5)
    assert "refused the credentials" in str(info.value)


def test_cli_without_server_exits_nonzero_without_traceback(tmp_path):
    env = {
        "NEO4J_URI": "bolt://127.0.0.1:1",
        "NEO4J_PASSWORD": "x",
        "CPR_HOME": str(tmp_path),
        "PATH": "/usr/bin:/bin",
        "HF_HUB_OFFLINE": "1",
    }
    done = subprocess.run(
        [sys.executable, "-m", "cpr_neo4j", "ingest", "metaqa"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    lines = [ln for ln in done.stderr.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and "bolt://127.0.0.1:1" in lines[0]


def test_browser_is_served(neo4j_settings):
    if neo4j_settings.source == "testcontainers":
        if os.environ.get("CPR_REQUIRE_BROWSER") == "1":  # CI: a required check must run
            pytest.fail("CPR_REQUIRE_BROWSER=1 but Neo4j came from testcontainers (no Browser)")
        pytest.skip("Browser check is for the local server")
    from cpr_neo4j.config import local_server_settings

    http = (local_server_settings() or {}).get("http", "http://127.0.0.1:7474")
    with urllib.request.urlopen(f"{http}/browser/", timeout=10) as resp:
        body = resp.read().decode("utf-8", "replace")
    assert resp.status == 200
    assert "<html" in body.lower() and "neo4j" in body.lower()
