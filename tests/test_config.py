"""Settings precedence, and that the local password never goes to another server."""

from __future__ import annotations

import json

from cpr_neo4j.config import Neo4jSettings


def _local(tmp_path, monkeypatch):
    monkeypatch.setenv("CPR_HOME", str(tmp_path))
    for var in ("NEO4J_URI", "NEO4J_USERNAME", "NEO4J_PASSWORD", "NEO4J_DATABASE"):
        monkeypatch.delenv(var, raising=False)
    (tmp_path / "neo4j").mkdir()
    (tmp_path / "neo4j" / "credentials.json").write_text(
        json.dumps(
            {
                "uri": "bolt://127.0.0.1:7687",
                "http": "http://127.0.0.1:7474",
                "username": "neo4j",
                "password": "local-secret",
            }
        )
    )


def test_local_server_settings_when_no_environment(tmp_path, monkeypatch):
    _local(tmp_path, monkeypatch)
    s = Neo4jSettings.load()
    assert (s.uri, s.password, s.database) == ("bolt://127.0.0.1:7687", "local-secret", "neo4j")


def test_environment_wins(tmp_path, monkeypatch):
    _local(tmp_path, monkeypatch)
    monkeypatch.setenv("NEO4J_URI", "neo4j+s://example.databases.neo4j.io")
    monkeypatch.setenv("NEO4J_PASSWORD", "remote")
    monkeypatch.setenv("NEO4J_DATABASE", "movies")
    s = Neo4jSettings.load()
    assert (s.uri, s.password, s.database, s.source) == (
        "neo4j+s://example.databases.neo4j.io",
        "remote",
        "movies",
        "environment",
    )


def test_local_password_is_not_sent_to_a_remote_uri(tmp_path, monkeypatch):
    _local(tmp_path, monkeypatch)
    monkeypatch.setenv("NEO4J_URI", "bolt://db.example.org:7687")
    assert Neo4jSettings.load().password == ""
    monkeypatch.setenv("NEO4J_URI", "bolt://127.0.0.1:7687")
    assert Neo4jSettings.load().password == "local-secret"
