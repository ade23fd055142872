"""Session fixtures: a real Neo4j server for integration tests.

Order of preference: NEO4J_URI if set; else testcontainers when a Docker engine
answers; else the local server under CPR_HOME (installed and started if needed).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
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
    settings = Neo4jSettings.load()
    if Path(settings.source).name == "credentials.json":  # CPR_HOME/neo4j/credentials.json
        _SESSION_HOME.append(Path(settings.source).parent.parent)
    yield settings


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


_SESSION_HOME: list[Path] = []  # the CPR_HOME of the local server the session uses


def private_home(tmp_path_factory, name: str) -> Path:
    """A fresh CPR_HOME for a test's models: the local server's credentials copied (Browser
    links and `cpr` subprocesses find the server) and the exported ONNX encoder linked (no
    second export, and the same encoder id, so scores match the caller's)."""
    from cpr_neo4j.config import cpr_home

    home = tmp_path_factory.mktemp(name)
    session = _SESSION_HOME[0] if _SESSION_HOME else cpr_home()  # whatever CPR_HOME is now
    credentials = session / "neo4j" / "credentials.json"
    if credentials.exists():
        (home / "neo4j").mkdir()
        shutil.copy(credentials, home / "neo4j" / "credentials.json")
    encoders = session / "encoders"
    if encoders.is_dir():
        (home / "encoders").symlink_to(encoders, target_is_directory=True)
    return home


class Trained:
    """A model trained and calibrated under its own CPR_HOME (`home`), for the session."""

    def __init__(self, home: Path, model_id: str, result, cal):
        self.home, self.model_id, self.result, self.cal = home, model_id, result, cal

    def env(self) -> pytest.MonkeyPatch:
        """A MonkeyPatch with CPR_HOME set to this model's home (undo() when done)."""
        mp = pytest.MonkeyPatch()
        mp.setenv("CPR_HOME", str(self.home))
        return mp


def _train_and_calibrate(store, tmp_path_factory, name: str, dataset: str, train_kw: dict,
                         calibrate_kw: dict):  # fmt: skip
    from cpr_neo4j.stages.calibrate import calibrate
    from cpr_neo4j.stages.train import TrainSettings, train

    home = private_home(tmp_path_factory, name)
    mp = pytest.MonkeyPatch()
    mp.setenv("CPR_HOME", str(home))
    try:
        began = time.monotonic()
        result = train(store, TrainSettings(dataset, **train_kw))
        trained = time.monotonic()
        cal = calibrate(store, dataset, result.model_id, **calibrate_kw)
        print(
            f"\n[{name}] model {result.model_id}: trained in {trained - began:.0f} s, "
            f"calibrated {cal.n} questions in {time.monotonic() - trained:.0f} s"
        )
    finally:
        mp.undo()
    return Trained(home, result.model_id, result, cal)


@pytest.fixture(scope="session")
def every_hop(store, metaqa, tmp_path_factory):
    """A small CPR model trained on every MetaQA hop count (depth 3) and calibrated for
    every hop count (text linking), as `cpr train metaqa` + `cpr calibrate metaqa` make it.
    1% of the mixed dev split (~390 questions) is its calibration share."""
    t = _train_and_calibrate(
        store, tmp_path_factory, "cpr_home_every_hop", "metaqa",
        {"max_questions": 300, "rollouts": 16, "cal_share": 0.01, "dev_share": 0.01},
        {"alphas": (0.1, 0.3, 0.5)},
    )  # fmt: skip
    yield t
    drop_models(store, [t.model_id])
    shutil.rmtree(t.home, ignore_errors=True)


@pytest.fixture(scope="session")
def two_hop(store, metaqa, tmp_path_factory):
    """A small 2-hop CPR model (`cpr train metaqa --hops 2 --max-questions 200`) with its
    default calibration share (10% of the 2-hop dev split, ~1,490 questions)."""
    t = _train_and_calibrate(
        store, tmp_path_factory, "cpr_home_two_hop", "metaqa",
        {"hops": 2, "max_questions": 200}, {"alphas": (0.1, 0.3, 0.5)},
    )  # fmt: skip
    yield t
    drop_models(store, [t.model_id])
    shutil.rmtree(t.home, ignore_errors=True)


FIXED_HOP_DATASET = "metaqa_2hop_only_test"
HUB_DEGREE = 300  # genres, years, languages: kept as ends, never expanded


def metaqa_two_hop_slice(name: str = FIXED_HOP_DATASET, questions: int = 600):
    """The first 2-hop dev questions of MetaQA and the triples within two hops of their
    topics (hubs such as genres and years kept only as ends): a dataset with 2-hop
    questions only, so no calibration of it can be for every hop count."""
    import polars as pl

    from cpr_neo4j.loaders.base import Dataset
    from cpr_neo4j.loaders.metaqa import load_metaqa

    full = load_metaqa(hops=(2,), splits=("dev",))
    qs = full.questions.head(questions)
    topics = qs.get_column("topics").explode().unique().implode()
    t = full.triples
    first = t.filter(pl.col("head").is_in(topics) | pl.col("tail").is_in(topics))
    ends = pl.concat([t.get_column("head"), t.get_column("tail")])
    degree = ends.value_counts()
    hubs = degree.filter(pl.col("count") > HUB_DEGREE).get_column(ends.name).implode()
    near = pl.concat([first.get_column("head"), first.get_column("tail")]).unique()
    near = near.filter(~near.is_in(hubs)).implode()
    triples = t.filter(pl.col("head").is_in(near) | pl.col("tail").is_in(near))
    used = pl.concat([triples.get_column("head"), triples.get_column("tail")]).unique()
    entities = full.entities.filter(pl.col("id").is_in(used.implode()))
    return Dataset(name, triples, entities, qs, full.relation_text)


@pytest.fixture(scope="session")
def fixed_hop_only(store, tmp_path_factory):
    """A dataset of 2-hop questions only, with a small 2-hop model and its calibration:
    the only calibration there is a fixed-hop one."""
    from cpr_neo4j.graph.ingest import ingest

    drop_dataset(store, FIXED_HOP_DATASET)
    ingest(store, metaqa_two_hop_slice())
    t = None
    try:
        t = _train_and_calibrate(
            store, tmp_path_factory, "cpr_home_fixed_hop", FIXED_HOP_DATASET,
            {"hops": 2, "max_questions": 100, "rollouts": 8, "cal_share": 0.2},
            {"alphas": (0.3, 0.5)},
        )  # fmt: skip
        yield t
    finally:
        if t is not None:
            drop_models(store, [t.model_id])
            shutil.rmtree(t.home, ignore_errors=True)
        drop_dataset(store, FIXED_HOP_DATASET)


def cpr_cli(settings, home, *args: str, input: str | None = None, timeout: int = 600):
    """`cpr ARGS` in a subprocess, as a user runs it: CPR_HOME = `home` (its models), and
    the test session's Neo4j (the local server through the credentials in `home`, else the
    NEO4J_* of the session's settings)."""
    return subprocess.run(
        [sys.executable, "-m", "cpr_neo4j", *args],
        capture_output=True,
        text=True,
        env=cli_env(settings, home),
        input=input,
        timeout=timeout,
    )


def cli_env(settings, home) -> dict[str, str]:
    """The environment of a `cpr` subprocess for cpr_cli."""
    full = dict(os.environ, CPR_HOME=str(home))
    for var in ("NEO4J_URI", "NEO4J_PASSWORD", "NEO4J_USERNAME", "NEO4J_DATABASE"):
        full.pop(var, None)
    if Path(settings.source).name != "credentials.json":
        full.update(
            NEO4J_URI=settings.uri,
            NEO4J_USERNAME=settings.username,
            NEO4J_PASSWORD=settings.password,
            NEO4J_DATABASE=settings.database,
        )
    return full
