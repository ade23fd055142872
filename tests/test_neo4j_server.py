"""`cpr neo4j install/start/status/stop` on a second, private local server (real process)."""

from __future__ import annotations

import json
import shutil
import stat

import pytest

from cpr_neo4j.neo4j_server import conf as neo4j_conf
from cpr_neo4j.neo4j_server import server
from tests.conftest import run_cpr

pytestmark = [
    pytest.mark.neo4j,
    pytest.mark.skipif(
        not (shutil.which("java") and shutil.which("mvn")), reason="needs Java+Maven"
    ),
]


def cpr(home, *args, timeout=300):
    return run_cpr(home, *args, timeout=timeout)


@pytest.mark.slow  # ~45 s, a second server: `make test-slow`
def test_lifecycle(tmp_path, neo4j_settings):
    home = tmp_path / "cpr"
    main_lib = server.home() / "lib"
    if main_lib.is_dir():  # reuse the jars already fetched for the main server
        (home / "neo4j").mkdir(parents=True)
        (home / "neo4j" / "lib").symlink_to(main_lib)
    done = cpr(home, "neo4j", "install", "--bolt-port", "17687", "--http-port", "17474")
    assert done.returncode == 0, done.stderr
    creds = home / "neo4j" / "credentials.json"
    assert stat.S_IMODE(creds.stat().st_mode) == 0o600
    settings = json.loads(creds.read_text())
    assert settings["uri"] == "bolt://127.0.0.1:17687" and len(settings["password"]) >= 16
    conf = (home / "neo4j" / "conf" / "neo4j.conf").read_text()
    assert "server.default_listen_address=127.0.0.1" in conf
    assert "dbms.security.auth_enabled=true" in conf
    assert "server.memory.heap.max_size=" in conf and "server.memory.pagecache.size=" in conf
    assert neo4j_conf.FAST_STOP in conf.splitlines()

    down = cpr(home, "neo4j", "status")
    assert down.returncode == 1 and len(down.stdout.strip().splitlines()) == 1

    up = cpr(home, "neo4j", "start")  # how long it takes is not a test's business
    assert up.returncode == 0, up.stderr
    assert "5.26" in up.stdout and "bolt://127.0.0.1:17687" in up.stdout
    assert "http://127.0.0.1:17474/browser/" in up.stdout
    assert "memory:  heap " in up.stdout  # the sizes it runs with, from neo4j.conf
    try:
        again = cpr(home, "neo4j", "start")  # idempotent: reports the running server
        assert again.returncode == 0 and up.stdout.split("pid:")[1].split()[0] in again.stdout
        assert cpr(home, "neo4j", "status").returncode == 0
        # --bulk: neo4j-admin import into this private server's empty database.
        triples = tmp_path / "triples.tsv"
        triples.write_text(
            "Alien\tdirected_by\tRidley Scott\nAlien\tstarred_actors\tSigourney "
            "Weaver\nAliens\tstarred_actors\tSigourney Weaver\n"
        )
        bulk = cpr(home, "ingest", "tiny", "--triples", str(triples), "--bulk")
        assert bulk.returncode == 0, bulk.stderr
        # 4 entities + 4 Relation nodes (2 relations x 2 directions); 3 relationships
        assert "created 8 nodes and 3 relationships" in " ".join(bulk.stdout.split())
        _bulk_wrote_the_linker_index(home)
        refused = cpr(home, "ingest", "tiny2", "--triples", str(triples), "--bulk")
        assert refused.returncode != 0 and "empty database" in refused.stderr
        assert "Traceback" not in refused.stderr
    finally:
        stopped = cpr(home, "neo4j", "stop")
    assert stopped.returncode == 0 and "stopped" in stopped.stdout
    after = cpr(home, "neo4j", "status")
    assert after.returncode == 1 and "not running" in after.stdout

    # A stale PID file (process gone) is cleaned up, not trusted.
    (home / "neo4j" / "run" / "neo4j.pid").write_text("999999")
    stale = cpr(home, "neo4j", "status")
    assert stale.returncode == 1 and not (home / "neo4j" / "run" / "neo4j.pid").exists()
    assert "Traceback" not in stale.stderr


def _bulk_wrote_the_linker_index(home) -> None:
    """--bulk writes the linker's fields with the graph: ingest then writes none, and the
    question links through the index it stored."""
    from cpr_neo4j.config import Neo4jSettings
    from cpr_neo4j.graph import entity_index
    from cpr_neo4j.graph.store import GraphStore
    from cpr_neo4j.linking import resolve

    creds = json.loads((home / "neo4j" / "credentials.json").read_text())
    settings = Neo4jSettings(creds["uri"], "neo4j", creds["password"], "neo4j", "bulk test")
    with GraphStore(settings) as store:
        info = store.read("dataset_info", dataset="tiny")[0]["d"]
        assert info["link_index"] == entity_index.version(info["fingerprint"])
        assert info["link_entities"] == 4 and info["link_longest"] == 2
        assert entity_index.build(store, "tiny", info["fingerprint"]) == 0  # nothing to write
        topics, _ = resolve.link(store, "tiny", "who directed alien")
        assert topics == [{"id": "Alien", "name": "Alien"}]
        entity_index.clear()


def test_a_conf_written_before_the_fast_stop_gets_it_once(tmp_path, monkeypatch):
    monkeypatch.setenv("CPR_HOME", str(tmp_path))
    conf = tmp_path / "neo4j" / "conf" / "neo4j.conf"
    conf.parent.mkdir(parents=True)
    conf.write_text("server.default_listen_address=127.0.0.1\n")
    neo4j_conf.ensure_fast_stop()
    neo4j_conf.ensure_fast_stop()
    lines = conf.read_text().splitlines()
    assert lines == ["server.default_listen_address=127.0.0.1", neo4j_conf.FAST_STOP]
