"""Issue 55 row 2: a re-ingest of changed files replaces the dataset and says what changed;
`cpr drop` removes one dataset and only it. Real Neo4j, real `cpr` subprocesses."""

from __future__ import annotations

import pytest

from cpr_neo4j.graph import fingerprint
from tests.conftest import drop_dataset
from tests.test_messages import cpr, home, write_files  # noqa: F401 (home: a fixture)

TRIPLES = [
    ("m1", "directed_by", "p1"),
    ("m2", "directed_by", "p1"),
    ("m2", "starred", "p3"),
    ("m3", "starred", "p2"),
    ("m3", "written_by", "p4"),
]
NAMES = [("m1", "Alien"), ("m2", "Blade Runner"), ("m3", "Gladiator"), ("p1", "Ridley Scott"),
         ("p2", "Russell Crowe"), ("p3", "Harrison Ford"), ("p4", "David Franzoni")]  # fmt: skip
QUESTIONS = [
    {"id": f"q{i}", "question": f"who is linked to [{n}]", "topics": [t], "answers": [a]}
    for i, (t, n, a) in enumerate(
        [("m1", "Alien", "p1"), ("m1", "Alien", "m2"), ("m2", "Blade Runner", "p3"),
         ("m3", "Gladiator", "p2"), ("m3", "Gladiator", "p4"), ("m2", "Blade Runner", "p1")]
    )
]  # fmt: skip


def state(store, name: str) -> dict:
    """What Neo4j holds of a dataset: names, triples, question splits, fingerprint."""

    def rows(text: str) -> list:
        return [tuple(r.values()) for r in store.query(text, {"d": name})[0]]

    return {
        "names": dict(rows("MATCH (e:Entity {dataset: $d}) RETURN e.id, e.name")),
        "triples": sorted(rows(
            "MATCH (h:Entity {dataset: $d})-[r]->(t:Entity {dataset: $d}) "
            "RETURN h.id, type(r), t.id")),
        "relations": sorted(rows(
            "MATCH (r:Relation {dataset: $d}) WHERE r.direction = 'forward' RETURN r.name")),
        "splits": dict(rows("MATCH (q:Question {dataset: $d}) RETURN q.id, q.split")),
        "links": sorted(rows(
            "MATCH (q:Question {dataset: $d})-[l]->(e:Entity) RETURN q.id, type(l), e.id")),
        "hub_lists": rows("MATCH (e:Entity {dataset: $d}) WHERE e.cpr_hub_cap IS NOT NULL "
                          "RETURN e.id"),
        "fingerprint": rows("MATCH (d:Dataset {name: $d}) RETURN d.fingerprint, d.complete, "
                            "d.replacing"),
    }  # fmt: skip


@pytest.fixture
def name(store):
    name = "messages_reingest"
    drop_dataset(store, name)
    yield name
    drop_dataset(store, name)


def test_changed_files_replace_the_dataset(store, home, tmp_path, name):  # noqa: F811
    args = write_files(tmp_path, TRIPLES, NAMES, QUESTIONS)
    r = cpr(home, "ingest", name, *args, "--hash-split", "50,0,50")
    assert r.returncode == 0, r.stderr
    assert "new dataset messages_reingest: 7 entities, 5 triples, 3 relation types, " \
        "6 questions" in r.stdout  # fmt: skip
    first = state(store, name)
    assert len(first["triples"]) == 5 and first["names"]["p1"] == "Ridley Scott"

    r = cpr(home, "ingest", name, *args, "--hash-split", "50,0,50")  # the same files again
    assert r.returncode == 0, r.stderr
    assert f"no changes: {name} in Neo4j matches its files" in r.stdout
    assert state(store, name) == first

    # a renamed entity, a dropped triple (and the entity only it held), a new question,
    # one question removed, every split re-drawn
    names = [(i, "Sir Ridley Scott" if i == "p1" else n) for i, n in NAMES]
    triples = [t for t in TRIPLES if t[1] != "written_by"]
    questions = [q for q in QUESTIONS if q["id"] != "q5"] + [
        {"id": "q9", "question": "who starred in [Gladiator]", "topics": ["m3"],
         "answers": ["p2"]}]  # fmt: skip
    args = write_files(tmp_path, triples, names, questions)
    r = cpr(home, "ingest", name, *args, "--hash-split", "20,0,80")
    assert r.returncode == 0, r.stderr
    after = state(store, name)
    assert after["names"] == {i: n for i, n in names if i != "p4"}
    assert after["triples"] == sorted(triples)
    assert after["relations"] == [("directed_by",), ("starred",)]
    from cpr_neo4j.loaders.registry import hash_split, parse_shares
    from cpr_neo4j.loaders.triples import load_triples

    expected = hash_split(
        load_triples(name, tmp_path / "triples.tsv", tmp_path / "entities.tsv",
                     tmp_path / "questions.jsonl"), parse_shares("20,0,80"))  # fmt: skip
    assert after["splits"] == dict(expected.questions.select("id", "split").iter_rows())
    moved = sum(first["splits"].get(q) != s for q, s in after["splits"].items() if q != "q9")
    # q4's answer p4 is gone with its triple: its ANSWER link goes, its TOPIC stays
    assert ("q4", "ANSWER", "p4") not in after["links"] and ("q9", "TOPIC", "m3") in after["links"]
    (fp_before, _, _), (fp_after, complete, replacing) = first["fingerprint"][0], after[
        "fingerprint"][0]  # fmt: skip
    assert fp_after != fp_before and complete is True and replacing is None
    out = r.stdout.replace("\n", " ")
    assert (
        f"replaced {name} with what its files now hold: entities +0 -1 (1 renamed); "
        f"triples +0 -1; relation types +0 -1; questions +1 -1 ({moved} changed" in out
    )
    assert "entity 'p1': 'Ridley Scott' -> 'Sir Ridley Scott'" in out
    assert f"graph fingerprint {fp_before} -> {fp_after}: models and calibrations made " \
        "before are stale" in out  # fmt: skip
    assert "no changes" not in out


def test_topic_answers_off_is_a_change(store, home, tmp_path, name):  # noqa: F811
    args = write_files(tmp_path, TRIPLES, NAMES, QUESTIONS)
    assert cpr(home, "ingest", name, *args, "--topic-answers", "on").returncode == 0
    before = state(store, name)["fingerprint"][0][0]
    r = cpr(home, "ingest", name, *args, "--topic-answers", "off")
    assert r.returncode == 0, r.stderr
    now = state(store, name)["fingerprint"][0][0]
    out = r.stdout.replace("\n", " ")
    assert now != before and "no changes" not in out
    assert "topic answers on -> off" in out and f"graph fingerprint {before} -> {now}" in out


def test_a_killed_replace_still_moves_the_fingerprint(store, tmp_path, name):
    """A replace killed after its deletes: the re-run finds nothing left to delete, yet the
    marker makes it move the fingerprint (a rename alone moves no count)."""
    from cpr_neo4j.graph.ingest import ingest
    from cpr_neo4j.loaders.triples import load_triples

    write_files(tmp_path, TRIPLES, NAMES, QUESTIONS)
    files = (tmp_path / "triples.tsv", tmp_path / "entities.tsv", tmp_path / "questions.jsonl")
    ingest(store, load_triples(name, *files))
    before = fingerprint.current(store, name)
    write_files(tmp_path, TRIPLES, [(i, n.upper()) for i, n in NAMES], QUESTIONS)
    renamed = load_triples(name, *files)
    store.write("dataset_replacing", dataset=name)  # what the killed run had done
    store.write("rename_entities_cols", dataset=name, ids=renamed.entities["id"].to_list(),
                names=renamed.entities["name"].to_list())  # fmt: skip
    report = ingest(store, renamed)
    assert not report.changes.any()
    assert report.fingerprint != before
    assert fingerprint.stale_reason(before, report.fingerprint) is not None


@pytest.mark.parametrize(
    "asks, models", [("keep", "stale"), ("delete", "delete")], ids=["default", "delete-all"]
)
def test_drop_removes_one_dataset_only(store, home, tmp_path, name, asks, models):  # noqa: F811
    other = "messages_reingest_other"
    drop_dataset(store, other)
    args = write_files(tmp_path, TRIPLES, NAMES, QUESTIONS)
    try:
        for n in (name, other):
            assert cpr(home, "ingest", n, *args).returncode == 0
        fp = fingerprint.current(store, name)
        # a user's own nodes, one with the same `dataset` property, one linked to an entity;
        # records made from the dataset: a model, its calibration, an Ask
        store.query(
            "CREATE (:Movie {dataset: $d, title: 'mine'}) "
            "WITH 1 AS x MATCH (e:Entity {dataset: $d, id: 'm1'}) "
            "CREATE (:Note {text: 'keep me'})-[:ABOUT]->(e) "
            "CREATE (m:ScoringModel {id: 'messages-test-model', dataset: $d, "
            "graph_fingerprint: $fp}) "
            "CREATE (:Calibration {id: 'messages-test-cal', dataset: $d, "
            "graph_fingerprint: $fp})-[:OF]->(m) "
            "CREATE (a:Ask {id: 'messagestestask', dataset: $d})-[:TOPIC]->(e)",
            {"d": name, "fp": fp}, write=True,
        )  # fmt: skip
        other_before = state(store, other)

        r = cpr(home, "drop", name, "--yes", "--asks", asks, "--models", models)
        assert r.returncode == 0, r.stderr
        out = r.stdout.replace("\n", " ")
        assert f"dropped {name}: 7 entities, 5 triples, 6 questions" in out

        def count(text: str) -> int:
            return store.query(text, {"d": name})[0][0]["n"]

        for label in ("Entity", "Relation", "Question"):
            assert count(f"MATCH (n:{label} {{dataset: $d}}) RETURN count(n) AS n") == 0
        assert count("MATCH (n:Dataset {name: $d}) RETURN count(n) AS n") == 0
        assert state(store, other) == other_before
        assert count("MATCH (n:Movie {dataset: $d}) RETURN count(n) AS n") == 1
        assert count("MATCH (n:Note {text: 'keep me'}) RETURN count(n) AS n") == 1
        asks_left = count("MATCH (a:Ask {id: 'messagestestask'}) RETURN count(a) AS n")
        made = store.query(
            "MATCH (n) WHERE n.id IN ['messages-test-model', 'messages-test-cal'] "
            "RETURN n.graph_fingerprint AS g", {})[0]  # fmt: skip
        if asks == "keep":
            assert asks_left == 1 and "(:Ask) records kept" in out
            assert [m["g"] for m in made] == [f"dropped-{fp}"] * 2
            assert "1 scoring model(s) and 1 calibration(s) kept, marked stale" in out
            # the same files again: same digest, generation 1 again, yet the model is stale
            assert cpr(home, "ingest", name, *args).returncode == 0
            now = fingerprint.current(store, name)
            assert now == fp and fingerprint.stale_reason(made[0]["g"], now) is not None
        else:
            assert asks_left == 0 and "(:Ask) records: 1 deleted" in out
            assert made == [] and "1 scoring model(s) and 1 calibration(s) deleted" in out
        r = cpr(home, "drop", "messages_nosuch", "--yes")
        assert r.returncode != 0 and "unknown dataset 'messages_nosuch' (" in r.stderr
        assert "`cpr ingest messages_nosuch --triples FILE`" in r.stderr
        assert "Traceback" not in r.stderr
    finally:
        store.query(
            "MATCH (n) WHERE (n:Movie AND n.dataset = $d) OR (n:Note AND n.text = 'keep me') "
            "OR n.id IN ['messages-test-model', 'messages-test-cal', 'messagestestask'] "
            "DETACH DELETE n", {"d": name}, write=True,
        )  # fmt: skip
        drop_dataset(store, other)


def test_questions_added_alone_survive_a_reingest(store, home, tmp_path, name):  # noqa: F811
    """`cpr ingest NAME --questions FILE` (labelled questions) then the dataset's own files
    again: the added questions stay, and the report says so."""
    args = write_files(tmp_path, TRIPLES, NAMES, QUESTIONS)
    assert cpr(home, "ingest", name, *args).returncode == 0
    extra = tmp_path / "labelled.jsonl"
    extra.write_text('{"id": "l1", "question": "who directed [Gladiator]", "topics": ["m3"], '
                     '"answers": ["p1"]}\n')  # fmt: skip
    r = cpr(home, "ingest", name, "--questions", str(extra))
    assert r.returncode == 0, r.stderr
    r = cpr(home, "ingest", name, *args)
    assert r.returncode == 0, r.stderr
    assert "l1" in state(store, name)["splits"]
    out = r.stdout.replace("\n", " ")
    assert "1 question(s) added with --questions alone kept" in out
