"""RoG at WebQSP's shape: the synthetic generator, the streaming loader's graph and
per-question membership, name-identity counts, and IN_SUBGRAPH through --bulk."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
from pathlib import Path

import polars as pl
import pytest

from cpr_neo4j.errors import BadInput
from cpr_neo4j.loaders.rog import MIDS_FILE, identity_counts, load_rog
from cpr_neo4j.neo4j_server import server
from tests.conftest import REPO, run_cpr
from tests.data.webqsp_synth import generate

DATA = REPO / "tests" / "data"


@pytest.fixture(scope="module")
def synth(tmp_path_factory) -> Path:
    """A tiny generated copy (real parquet files, the hub's names, a name_mids.tsv)."""
    out = tmp_path_factory.mktemp("webqsp_synth")
    generate(out, scale=0.003, seed=1, median=120)
    return out


def _graph_rows(folder: Path) -> pl.DataFrame:
    """The oracle: every (question, head, relation, tail) row, read eagerly."""
    return (
        pl.read_parquet(folder / "*.parquet")
        .select("id", "graph")
        .explode("graph")
        .select(
            "id",
            *(pl.col("graph").list.get(i).alias(c) for i, c in enumerate(["head", "rel", "tail"])),
        )
    )


def test_generator_writes_the_hub_layout_in_rog_schema(synth: Path) -> None:
    names = sorted(p.name for p in (synth / "data").iterdir())
    assert names == [
        "test-00000-of-00001.parquet",
        "train-00000-of-00002.parquet",
        "train-00001-of-00002.parquet",
        "validation-00000-of-00001.parquet",
    ]
    frame = pl.read_parquet(synth / "data" / "test-00000-of-00001.parquet")
    assert frame.columns == ["id", "question", "answer", "q_entity", "a_entity", "graph", "choices"]
    assert frame.schema["graph"] == pl.List(pl.List(pl.String))
    rows = _graph_rows(synth / "data")
    assert rows["rel"].str.count_matches(r"\.").min() == 2  # domain.type.property
    assert rows["tail"].str.contains(r"^m\.0[0-9a-f]+$").any()  # CVT nodes by MID
    assert (synth / MIDS_FILE).is_file()
    again = generate(synth.parent / "again", scale=0.003, seed=1, median=120)
    assert again["triple_rows"] == rows.height  # seeded: the same data again


def test_streaming_loader_matches_an_eager_read(synth: Path) -> None:
    ds = load_rog("webqsp", synth / "data")
    rows = _graph_rows(synth / "data")
    expect = rows.select("head", pl.col("rel").alias("relation"), "tail").unique()
    assert ds.triples.height == expect.height
    assert ds.triples.sort(pl.all()).equals(expect.sort(pl.all()))
    assert dict(ds.questions.group_by("split").len().iter_rows()) == {
        "train": 8,
        "dev": 1,
        "test": 5,
    }
    members = pl.concat(
        [
            rows.select(pl.col("id").alias("question"), pl.col(c).alias("entity"))
            for c in ("head", "tail")
        ]
    ).unique()
    assert ds.subgraphs is not None
    assert ds.subgraphs.height == ds.subgraphs.unique().height == members.height
    assert ds.subgraphs.sort(pl.all()).equals(members.sort(pl.all()))
    assert ds.problems == []


def test_identity_counts_against_the_generators_mids(synth: Path) -> None:
    ds = load_rog("webqsp", synth / "data")
    ids = identity_counts(ds, synth / "data")
    per_entity = ds.subgraphs.group_by("entity").agg(pl.col("question").n_unique())
    assert ids["shared"] == per_entity.filter(pl.col("question") > 1).height > 0
    mids = pl.read_csv(
        synth / MIDS_FILE, separator="\t", has_header=False, new_columns=["name", "mid"]
    )
    in_graph = mids.filter(pl.col("name").is_in(ds.entities["id"].implode()))
    multi = in_graph.group_by("name").agg(pl.col("mid").n_unique()).filter(pl.col("mid") > 1)
    assert ids["homonyms"] == multi.height and ids["mids"] == multi["mid"].sum()
    assert identity_counts(ds, None)["homonyms"] is None  # real RoG: names only


def test_identity_counts_on_hand_made_mids(tmp_path: Path) -> None:
    shutil.copy(DATA / "rog_small.jsonl", tmp_path / "test.jsonl")
    (tmp_path / MIDS_FILE).write_text(
        "Jamaica\tm.03_r3\nJamaica\tm.0jamaica_band\nKingston\tm.04xn_\nNot in graph\tm.1\n"
        "Not in graph\tm.2\n"
    )
    ds = load_rog("webqsp", tmp_path / "test.jsonl")
    ids = identity_counts(ds, tmp_path / "test.jsonl")
    assert (ids["homonyms"], ids["mids"]) == (1, 2)  # only names the graph holds count
    shared = ds.subgraphs.group_by("entity").len().filter(pl.col("len") > 1)
    assert ids["shared"] == shared.height
    (tmp_path / MIDS_FILE).write_bytes(b"\xff\xfe")
    with pytest.raises(BadInput, match="name<TAB>MID"):
        identity_counts(ds, tmp_path)


def test_membership_of_a_duplicate_id_is_the_first_rows(tmp_path: Path) -> None:
    rows = [json.loads(line) for line in (DATA / "rog_small.jsonl").read_text().splitlines()]
    rows[1]["id"] = rows[0]["id"]  # a second WebQTest-0 with Obama's graph
    (tmp_path / "test.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    ds = load_rog("webqsp", tmp_path / "test.jsonl")
    first = ds.subgraphs.filter(pl.col("question") == "WebQTest-0")["entity"].to_list()
    assert "Jamaica" in first and "Barack Obama" not in first
    assert "Barack Obama" in set(ds.entities["id"])  # the graph keeps every row's triples
    assert "duplicate question id" in str(ds.problems[0])


def test_wrong_column_types_are_one_line(tmp_path: Path) -> None:
    frame = pl.read_parquet(DATA / "rog_small.parquet")
    frame.with_columns(pl.lit("not a list").alias("graph")).write_parquet(tmp_path / "t.parquet")
    with pytest.raises(BadInput, match="unreadable rows or wrong column types"):
        load_rog("webqsp", tmp_path / "t.parquet")


# --- --bulk writes IN_SUBGRAPH (a private second server: --bulk replaces its database) ------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cpr(home: Path, *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    return run_cpr(home, *args, timeout=timeout, CPR_NEO4J_HEAP="512m", CPR_NEO4J_PAGECACHE="256m")


@pytest.mark.neo4j
@pytest.mark.slow  # ~50 s, a second server: `make test-slow`
@pytest.mark.skipif(not shutil.which("java"), reason="needs Java for a second local server")
def test_bulk_import_writes_in_subgraph(synth: Path, tmp_path: Path) -> None:
    from cpr_neo4j.config import Neo4jSettings
    from cpr_neo4j.graph.store import GraphStore

    main_lib = server.home() / "lib"
    if not main_lib.is_dir():
        pytest.skip("needs the main server's jars")
    home = tmp_path / "cpr"
    (home / "neo4j").mkdir(parents=True)
    (home / "neo4j" / "lib").symlink_to(main_lib)
    ports = [str(_free_port()), str(_free_port())]
    done = _cpr(home, "neo4j", "install", "--bolt-port", ports[0], "--http-port", ports[1])
    assert done.returncode == 0, done.stderr
    try:
        assert _cpr(home, "neo4j", "start").returncode == 0
        done = _cpr(home, "ingest", "webqsp", "--from", str(synth / "data"), "--bulk")
        assert done.returncode == 0, done.stderr[-2000:]
        out = " ".join(done.stdout.split())
        assert "entity nodes shared by 2+ questions' subgraphs" in out
        assert "names standing for 2+ MIDs" in out
        ds = load_rog("webqsp", synth / "data")
        creds = json.loads((home / "neo4j" / "credentials.json").read_text())
        settings = Neo4jSettings(creds["uri"], "neo4j", creds["password"], "neo4j", "test")
        with GraphStore(settings) as store:
            got = store.query(
                "MATCH (q:Question {dataset: 'webqsp'})-[:IN_SUBGRAPH]->(e:Entity) "
                "RETURN q.id AS question, e.id AS entity"
            )[0]
        stored = pl.DataFrame([dict(r) for r in got])
        assert stored.sort(pl.all()).equals(ds.subgraphs.sort(pl.all()))
        again = _cpr(home, "ingest", "webqsp", "--from", str(synth / "data"))
        assert again.returncode == 0, again.stderr[-2000:]
        assert "created 0 nodes and 0 relationships" in " ".join(again.stdout.split())
    finally:
        _cpr(home, "neo4j", "stop")
