"""Session fixtures: a real Neo4j server for integration tests.

Order of preference: NEO4J_URI if set; else testcontainers when a Docker engine
answers; else the local server under CPR_HOME (installed and started if needed).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cpr_neo4j.config import Neo4jSettings

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"


def _docker_answers() -> bool:
    if not shutil.which("docker"):
        return False
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.fixture(scope="session")
def neo4j_settings():
    if os.environ.get("NEO4J_URI"):
        yield Neo4jSettings.load()
        return
    if _docker_answers():
        from testcontainers.neo4j import Neo4jContainer

        with Neo4jContainer("neo4j:5.26-community") as box:
            yield Neo4jSettings(
                box.get_connection_url(), "neo4j", box.password, "neo4j", "testcontainers"
            )
        return
    from cpr_neo4j.neo4j_server import server

    server.start()
    yield Neo4jSettings.load()


@pytest.fixture(scope="session")
def store(neo4j_settings):
    from cpr_neo4j.graph.schema import bootstrap
    from cpr_neo4j.graph.store import GraphStore

    with GraphStore(neo4j_settings) as s:
        bootstrap(s)
        yield s


def run_cpr(home, *args: str, timeout: int = 600, **env: str) -> subprocess.CompletedProcess:
    """`cpr ARGS` in a subprocess with its own CPR_HOME (a private local server); the
    caller's NEO4J_* connection is dropped so the command cannot reach another server.
    env: extra variables, e.g. CPR_NEO4J_HEAP."""
    full = dict(os.environ, CPR_HOME=str(home), **env)
    for var in ("NEO4J_URI", "NEO4J_PASSWORD", "NEO4J_USERNAME", "NEO4J_DATABASE"):
        full.pop(var, None)
    return subprocess.run(
        [sys.executable, "-m", "cpr_neo4j", *args],
        capture_output=True,
        text=True,
        env=full,
        timeout=timeout,
    )


def drop_dataset(store, name: str) -> None:
    from cpr_neo4j.graph.ingest import drop

    drop(store, name)


def drop_models(store, model_ids: list[str]) -> None:
    """Leave the shared database as found: no test model, calibration or Ask behind."""
    store.query(
        "MATCH (n) WHERE (n:ScoringModel AND n.id IN $ids) "
        "OR ((n:Calibration OR n:Ask) AND n.model_id IN $ids) DETACH DELETE n",
        {"ids": list(model_ids)},
        write=True,
    )


@pytest.fixture(scope="session")
def metaqa(store):
    """The full bundled MetaQA ingested as dataset 'metaqa' (kept: later stages reuse it)."""
    from cpr_neo4j.graph.ingest import ingest
    from cpr_neo4j.loaders.metaqa import load_metaqa

    ds = load_metaqa()
    report = ingest(store, ds)
    return ds, report
