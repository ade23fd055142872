"""Settings precedence, and that the local password never goes to another server."""

from __future__ import annotations

import json

import pytest

from cpr_neo4j.config import (
    Neo4jSettings,
    ServerMemory,
    default_memory,
    memory_bytes,
    memory_text,
)
from cpr_neo4j.errors import BadInput


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


# --- the local server's memory: --heap / --pagecache -------------------------------------------

GIB = 1 << 30


@pytest.mark.parametrize(
    ("heap", "cache", "want"),
    [
        ("2g", "4g", ("2g", "4g")),
        ("2048M", "1536m", ("2g", "1536m")),
        ("524288k", "1G", ("512m", "1g")),
    ],
)
def test_memory_sizes_normalised(heap, cache, want):
    m = ServerMemory(heap, cache).validated(total=64 * GIB)
    assert (m.heap, m.pagecache) == want


@pytest.mark.parametrize(
    ("heap", "cache", "says"),
    [
        ("2x", "1g", "--heap '2x': give a size such as 512m or 4g"),
        ("2g", "", "--pagecache '': give a size"),
        ("0g", "1g", "--heap '0g'"),
        ("-1g", "1g", "--heap '-1g'"),
        ("128m", "1g", "--heap 128m: at least 256m"),
        ("1g", "8m", "--pagecache 8m: at least 16m"),
        ("20g", "10g", "--heap 20g + --pagecache 10g exceed this machine's 24.0 GiB"),
    ],
)
def test_bad_memory_sizes_are_one_line_errors(heap, cache, says):
    with pytest.raises(BadInput) as err:
        ServerMemory(heap, cache).validated(total=24 * GIB)
    assert says in str(err.value) and "\n" not in str(err.value)


def test_default_memory_follows_the_machine():
    assert default_memory(24 * GIB) == ServerMemory("2g", "2g")  # this machine
    assert default_memory(4 * GIB) == ServerMemory("1g", "512m")  # floors
    assert default_memory(512 * GIB) == ServerMemory("4g", "8g")  # caps
    assert memory_bytes("3g", "x") == 3 * GIB and memory_text(1536 << 20) == "1536m"


def test_memory_precedence_and_persistence(tmp_path, monkeypatch):
    from cpr_neo4j.neo4j_server import conf as neo4j_conf

    monkeypatch.setenv("CPR_HOME", str(tmp_path))
    for var in ("CPR_NEO4J_HEAP", "CPR_NEO4J_PAGECACHE"):
        monkeypatch.delenv(var, raising=False)
    assert neo4j_conf.resolve_memory() == default_memory()  # no conf yet
    conf = tmp_path / "neo4j" / "conf" / "neo4j.conf"
    conf.parent.mkdir(parents=True)
    conf.write_text("server.http.listen_address=127.0.0.1:7474\n")
    neo4j_conf.persist_memory(neo4j_conf.resolve_memory("1g", "768m"))
    text = conf.read_text()
    assert "server.http.listen_address=127.0.0.1:7474" in text  # other lines kept
    assert "server.memory.heap.max_size=1g" in text and "server.memory.heap.initial_size=1g" in text
    assert neo4j_conf.configured_memory() == ServerMemory("1g", "768m")
    assert neo4j_conf.resolve_memory() == ServerMemory("1g", "768m")  # kept for later starts
    monkeypatch.setenv("CPR_NEO4J_PAGECACHE", "3g")
    assert neo4j_conf.resolve_memory() == ServerMemory("1g", "3g")  # environment over the file
    assert neo4j_conf.resolve_memory(pagecache="2g") == ServerMemory("1g", "2g")  # option over both
    neo4j_conf.persist_memory(ServerMemory("2g", "2g"))
    assert conf.read_text().count("server.memory.pagecache.size=") == 1
    conf.write_text(conf.read_text().replace("heap.max_size=2g", "heap.max_size=lots"))
    with pytest.raises(BadInput, match=r"server.memory.heap.max_size in .*neo4j.conf 'lots'"):
        neo4j_conf.resolve_memory()


def test_cli_refuses_bad_sizes_before_installing(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from cpr_neo4j.cli.main import cli

    monkeypatch.setenv("CPR_HOME", str(tmp_path))
    monkeypatch.delenv("CPR_NEO4J_HEAP", raising=False)
    for cmd in ("install", "start"):
        out = CliRunner().invoke(cli, ["neo4j", cmd, "--heap", "2x"])
        assert out.exit_code == BadInput.exit_code
        assert "--heap '2x'" in out.output
    assert not (tmp_path / "neo4j" / "lib").exists()  # nothing fetched
