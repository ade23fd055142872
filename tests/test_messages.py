"""Issue 55's messages: pasteable Cypher, one-line errors, bad lines counted, ids kept.

Real Neo4j (the session's server) and real `cpr` subprocesses on small files built here."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import drop_dataset, private_home

TRIPLES = [
    ("m1", "directed_by", "p1"),
    ("m1", "bad!rel", "p2"),  # line 2: not a relationship type
    ("m2", "directed_by", "p1"),
    ("m2", "starred", "p3"),
    ("m3", "starred", "p2"),
    ("m3", "wr?ng", "p3"),  # line 6
]
NAMES = [("m1", "Alien"), ("m2", "Blade Runner"), ("m3", "Gladiator"), ("p1", "Ridley Scott"),
         ("p2", "Sigourney Weaver"), ("p3", "Harrison Ford")]  # fmt: skip
QUESTIONS = [
    # names where ids belong, as the docs' example once read
    {"id": "q1", "question": "who directed [Alien]", "topics": ["Alien"],
     "answers": ["Ridley Scott"]},
    {"id": "q2", "question": "who directed [Blade Runner]", "topics": ["m2"], "answers": ["p1"]},
    {"id": "q3", "question": "who starred in [Gladiator]", "topics": ["m9"], "answers": ["p2"],
     "split": "test"},
]  # fmt: skip


def write_files(folder: Path, triples=TRIPLES, names=NAMES, questions=QUESTIONS) -> list[str]:
    """The files of a small graph; returns `--triples T --entities E --questions Q`."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "triples.tsv").write_text("".join("\t".join(t) + "\n" for t in triples))
    (folder / "entities.tsv").write_text("".join("\t".join(n) + "\n" for n in names))
    (folder / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in questions))
    return [
        "--triples", str(folder / "triples.tsv"), "--entities", str(folder / "entities.tsv"),
        "--questions", str(folder / "questions.jsonl"),
    ]  # fmt: skip


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    return private_home(tmp_path_factory, "cpr_home_messages")


def cpr(home: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    """`cpr ARGS` as a user runs it, with CPR_HOME = home; env: NEO4J_* to set."""
    full = dict(os.environ, CPR_HOME=str(home))
    for var in ("NEO4J_URI", "NEO4J_PASSWORD", "NEO4J_USERNAME", "NEO4J_DATABASE"):
        full.pop(var, None)
    full.update(env)
    return subprocess.run(
        [sys.executable, "-m", "cpr_neo4j", *args], capture_output=True, text=True, env=full,
        timeout=300,
    )  # fmt: skip


@pytest.mark.parametrize(
    "uri", ["http://127.0.0.1:7474", "https://example.org:7473", "ftp://x", "127.0.0.1:7687"]
)
def test_unsupported_uri_scheme_is_one_line(home, uri):
    r = cpr(home, "ask", "who directed [Alien]", NEO4J_URI=uri, NEO4J_PASSWORD="x")
    assert r.returncode != 0
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert uri in lines[0] and "bolt://" in lines[0] and "neo4j+s://" in lines[0]


def test_bad_relation_lines_skipped_and_counted(store, home, tmp_path):
    name = "messages_badrel"
    drop_dataset(store, name)
    try:
        r = cpr(home, "ingest", name, *write_files(tmp_path))
        assert r.returncode == 0, r.stderr
        err = r.stderr
        assert "skipped 2 malformed line(s)" in err
        assert f"{tmp_path / 'triples.tsv'}:2: relation 'bad!rel'" in err
        assert f"{tmp_path / 'triples.tsv'}:6: relation 'wr?ng'" in err
        # every other line is in Neo4j
        rows, _ = store.query(
            "MATCH (h:Entity {dataset: $d})-[r]->(t) RETURN h.id + ' ' + type(r) + ' ' + t.id "
            "AS x ORDER BY x",
            {"d": name},
        )
        assert [row["x"] for row in rows] == [
            "m1 directed_by p1", "m2 directed_by p1", "m2 starred p3", "m3 starred p2",
        ]  # fmt: skip
        # topics and answers that are not ids are counted, the first ones shown
        assert "2 question(s) name a topic and 1 a gold answer" in err
        assert "q1: topic 'Alien' is not an entity id of the graph (the name of entity 'm1'" in err
        assert "q1: answer 'Ridley Scott' is not an entity id" in err
        assert "q3: topic 'm9' is not an entity id of the graph\n" in err
        shown = [x for x in err.splitlines() if x.startswith("  q")]
        assert len(shown) == 3  # the first 3 of 2 topics + 1 answer
        assert "questions with a topic not in the graph" in r.stdout

        # --strict: refused, naming the first bad line and the count; nothing written
        drop_dataset(store, name)
        r = cpr(home, "ingest", name, "--strict", *write_files(tmp_path))
        assert r.returncode != 0 and "Traceback" not in r.stderr
        assert f"{tmp_path / 'triples.tsv'}:2" in r.stderr and "2 problem(s)" in r.stderr
        assert (
            store.query("MATCH (n {dataset: $d}) RETURN count(n) AS n", {"d": name})[0][0]["n"] == 0
        )
    finally:
        drop_dataset(store, name)


def test_printed_cypher_runs_in_neo4j(store, tmp_path):
    """What `cpr ask` prints for Browser (no local link: a server set by NEO4J_URI), run
    through the driver: every `[r:TOPIC|ANSWER]` kept, and it returns the Ask's paths."""
    from cpr_neo4j.cli import ask_cmd
    from cpr_neo4j.graph import records
    from cpr_neo4j.graph.ingest import ingest
    from cpr_neo4j.loaders.triples import load_triples
    from cpr_neo4j.neo4j_server.browser import ask_query

    name = "messages_cypher"
    drop_dataset(store, name)
    tmp = tmp_path
    write_files(tmp, triples=[t for t in TRIPLES if "!" not in t[1] and "?" not in t[1]])
    ask_id = "0123456789ab"
    try:
        ingest(store, load_triples(name, tmp / "triples.tsv", tmp / "entities.tsv"))
        records.save_asks(store, [{
            "id": ask_id, "dataset": name, "props": {"question": "who directed Alien",
                                                     "dataset": name},
            "topics": ["m1"],
            "answers": [{"id": "p1", "rank": 1, "cost": 0.1, "path": "Alien -directed_by-> "
                         "Ridley Scott", "nodes": ["m1", "p1"], "rels": ["directed_by"],
                         "forward": [True]}],
        }])  # fmt: skip
        buffer = io.StringIO()
        real = ask_cmd.console
        ask_cmd.console = type(real)(file=buffer, width=60, force_terminal=True)
        try:
            ask_cmd.print_cypher(ask_query(ask_id))
        finally:
            ask_cmd.console = real
        printed = buffer.getvalue().split("\n", 1)[1]
        assert "[r:TOPIC|ANSWER]" in printed and "[p:ANSWER]" in printed
        rows, _ = store.query(printed, {})
        kinds = sorted(row["r"].type for row in rows)
        assert kinds == ["ANSWER", "TOPIC", "directed_by"]
    finally:
        store.query("MATCH (a:Ask {id: $id}) DETACH DELETE a", {"id": ask_id}, write=True)
        drop_dataset(store, name)


def test_output_needs_file(home, tmp_path):
    r = cpr(home, "ask", "who directed [Alien]", "--output", str(tmp_path / "out.jsonl"))
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert "--output is where --file writes its answers: give --file FILE too" in r.stderr
    assert not (tmp_path / "out.jsonl").exists()


def test_file_error_lines_keep_their_id():
    from cpr_neo4j.cli.ask_cmd import read_questions

    lines = io.StringIO('{"id": "a", "question": "who directed [Alien]"}\n'
                        '{"id": "b", "entity": "m1"}\n{"id": "c",\n{"id": "d", "question": 3}\n'
                        'who directed Alien\n')  # fmt: skip
    items = read_questions(lines)
    assert [n for n, _ in items] == [1, 2, 3, 4, 5]
    assert items[1][1]["id"] == "b" and 'needs a "question" string' in items[1][1]["error"]
    assert "id" not in items[2][1] and "not a question object" in items[2][1]["error"]
    assert items[3][1]["id"] == "d" and "error" in items[3][1]
    assert items[4][1] == {"question": "who directed Alien"}


def test_calibrations_made_before_taus_were_stored(store):
    """GET /calibrations' row builder: a calibration without stored taus gets them from its
    scores at the default alphas; one without scores gets none, not an error."""
    from cpr_neo4j.conformal.levels import DEFAULT_ALPHAS
    from cpr_neo4j.serve.app import calibration_out

    ids = ["messages-old-model", "messages-old-cal", "messages-older-cal"]
    try:
        store.query(
            "CREATE (m:ScoringModel {id: $ids[0], dataset: 'messages_old'}) "
            "CREATE (:Calibration {id: $ids[1], dataset: 'messages_old', n: 4, "
            "created: '2026-01-02', q_scores: [0.1, 0.2, 0.3, 0.4], q_groups: [1, 1, 1, 1]})"
            "-[:OF]->(m) "
            "CREATE (:Calibration {id: $ids[2], dataset: 'messages_old', n: 4, "
            "created: '2026-01-01'})-[:OF]->(m)",
            {"ids": ids}, write=True,
        )  # fmt: skip
        rows = store.read("calibrations", dataset="messages_old", limit=10)
        old, older = (calibration_out(store, r) for r in rows)
        assert old.id == ids[1] and old.alphas_default and old.alphas == list(DEFAULT_ALPHAS)
        # coverage taus only: this one, like those made before FNR curves, has none
        assert [(t.alpha, t.risk, t.group) for t in old.taus] == [
            (a, "coverage", 1) for a in DEFAULT_ALPHAS]  # fmt: skip
        assert all(t.tau is not None or t.tau_infinite for t in old.taus)
        assert older.id == ids[2] and older.alphas_default and older.taus == []
    finally:
        store.query("MATCH (n) WHERE n.id IN $ids DETACH DELETE n", {"ids": ids}, write=True)
