"""Issue 55 item 1 / issue 57 items 1-2: every state a user can be in, the message `cpr`
gives there, and the command that message advises, run as the user would run it (real
`cpr` subprocesses against the test session's Neo4j) to check that it gets past the error.

The user's graph is a property graph written into Neo4j under its own labels
(tests/user_graphs.py: a family, `(:Person {name})-[:FATHER]->(:Person)`, places as
`(:Place {placeName})`), ingested with `cpr ingest NAME --from-neo4j`; a test asserts that
no `cpr` command changes it. Training settings are the smallest that train at all.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from tests import user_graphs as ug
from tests.conftest import cpr_cli, drop_dataset, drop_models, private_home

pytestmark = pytest.mark.neo4j

GRAPH = "NextStepFamily"  # the marker label of this test's user graph
DATASET = "ns_family"
OTHER = "ns_other"  # a second dataset, made by following the unknown-dataset advice
# (in the order `cpr ingest` records them: names, keys, filters)
NAMES = ["--name-property", "Place=placeName", "--key", "Person=name", "--key", "Place=placeName",
         "--labels", GRAPH]  # fmt: skip
TINY = ["--max-questions", "60", "--rollouts", "4", "--epochs", "1", "--cal-share", "0.5"]
QUESTION = "who is the father of William"
LOG: list[tuple[str, str, str]] = []  # (state, message excerpt, advised command run)


def family_questions() -> list[dict]:
    """1- and 2-hop questions over the family graph, answers read off it (ids: --key)."""
    rows = ug.family_rows()
    by = {rel: {} for rel in rows}
    for rel, pairs in rows.items():
        for p in pairs:
            by[rel].setdefault(p["head"], []).append(p["tail"])
    out = []
    words = {"FATHER": "who is the father of {}", "MOTHER": "who is the mother of {}",
             "SPOUSE": "who is {} married to", "BORN_IN": "where was {} born"}  # fmt: skip
    for rel, text in words.items():
        for head, tails in sorted(by[rel].items()):
            kind = "Place" if rel == "BORN_IN" else "Person"
            out.append({"id": f"{rel}-{head}", "question": text.format(head),
                        "topics": [f"Person:{head}"],
                        "answers": [f"{kind}:{t}" for t in tails], "hops": 1})  # fmt: skip
    for child, father in sorted(ug.FATHER.items()):
        wives = by["SPOUSE"].get(father)
        if wives:
            text = f"who is the wife of the father of {child}"
            out.append({"id": f"FS-{child}", "question": text,
                        "topics": [f"Person:{child}"],
                        "answers": [f"Person:{w}" for w in wives], "hops": 2})  # fmt: skip
    return out


@pytest.fixture(scope="module")
def world(store, neo4j_settings, tmp_path_factory):
    """The user's graph in Neo4j, a private CPR_HOME, the questions file; all removed after."""
    ug.drop(store, GRAPH)
    for d in (DATASET, OTHER):
        drop_dataset(store, d)
    ug.write_family(store, GRAPH)
    # a node of the user's that carries a `dataset` property naming the dataset: cpr's
    # removal of the dataset must not take it (cypher/delete_dataset.cypher)
    store.query(f"CREATE (:Note:{GRAPH} {{dataset: $d, text: 'mine'}})", {"d": DATASET}, write=True)
    home = private_home(tmp_path_factory, "cpr_home_next_steps")
    files = tmp_path_factory.mktemp("next_steps_files")
    (files / "questions.jsonl").write_text(
        "".join(json.dumps(q) + "\n" for q in family_questions()), encoding="utf-8"
    )
    (files / "other.tsv").write_text(
        "".join(
            f"{p['head']}\t{rel.lower()}\t{p['tail']}\n"
            for rel, rows in ug.family_rows().items()
            for p in rows
        ),  # fmt: skip
        encoding="utf-8",
    )
    before = ug.snapshot(store, GRAPH)

    def cpr(*args: str, env_home: Path | None = None):
        return cpr_cli(neo4j_settings, env_home or home, *args, timeout=900)

    yield {"home": home, "files": files, "cpr": cpr, "before": before}
    models = [r["id"] for r in store.query(
        "MATCH (m:ScoringModel) WHERE m.dataset IN $d RETURN m.id AS id", {"d": [DATASET, OTHER]}
    )[0]]  # fmt: skip
    drop_models(store, models)
    for d in (DATASET, OTHER):
        drop_dataset(store, d)
    ug.drop(store, GRAPH)
    shutil.rmtree(home, ignore_errors=True)


def advised(message: str, start: str) -> list[str]:
    """The backticked command in `message` that begins with `start`, as argv (after `cpr`)."""
    for cmd in re.findall(r"`(cpr [^`]+)`", message):
        if cmd.startswith(start):
            return cmd.split()[1:]
    raise AssertionError(f"no `{start} ...` advised in: {message}")


def ok(r, state: str) -> str:
    assert r.returncode == 0, f"{state}: exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    return r.stdout + r.stderr


def failed(r, state: str) -> str:
    assert r.returncode != 0, f"{state}: expected an error\n{r.stdout}\n{r.stderr}"
    assert "Traceback" not in r.stderr, r.stderr
    return " ".join((r.stdout + r.stderr).split())  # rich wraps long lines


def test_each_state_advises_a_command_that_gets_past_it(store, world):
    cpr, files = world["cpr"], world["files"]

    # 0. the user's graph, loaded as a dataset
    ok(cpr("ingest", DATASET, "--from-neo4j", *NAMES), "ingest --from-neo4j")
    assert ug.snapshot(store, GRAPH) == world["before"]

    # 1. an unknown dataset: listed known ones, and a way to load one under that name
    msg = failed(cpr("ask", QUESTION, "--dataset", OTHER), "unknown dataset")
    assert f"unknown dataset '{OTHER}'" in msg and DATASET in msg
    cmd = advised(msg, f"cpr ingest {OTHER} --triples")
    cmd[cmd.index("FILE")] = str(files / "other.tsv")
    ok(cpr(*cmd), "unknown dataset -> ingest")
    ok(cpr("ask", QUESTION, "--dataset", OTHER), "unknown dataset -> ask")
    LOG.append(("unknown dataset", msg[:80], " ".join(cmd)))

    # 2. a graph without questions: `cpr ask` answers (no guarantee), naming `cpr train`
    # (generated questions) and the labelling steps
    out = " ".join(ok(cpr("ask", QUESTION, "--dataset", DATASET), "no questions: ask").split())
    assert "NO GUARANTEE" in out and "No coverage guarantee holds" in out
    assert "Charles" in out  # the father, among the ranked candidates with its path
    assert f"`cpr label {DATASET} questions.txt -o labelled.jsonl`" in out
    step = advised(out.split("next:")[1], f"cpr train {DATASET}")
    ok(cpr(*step, *TINY, "--generated", "60"), "no questions -> train (generated)")
    assert ug.snapshot(store, GRAPH) == world["before"]
    LOG.append(("graph, no questions", "NO GUARANTEE ... next: cpr train / cpr label ...",
                " ".join(["cpr", *step])))  # fmt: skip

    # 3. a model trained on generated questions, no labels: the labelling steps; their
    # `cpr ingest --questions` run with a labelled file (`cpr label`'s output; the labelling
    # itself is driven through tmux in tests/test_labelling_tmux.py)
    out = " ".join(ok(cpr("ask", QUESTION, "--dataset", DATASET), "generated: ask").split())
    assert "rcv-" in out and "NO GUARANTEE" in out
    ok(cpr(*advised(out.split("next:")[1], "cpr label"), "--help"), "cpr label exists")
    step = advised(out.split("next:")[1], f"cpr ingest {DATASET} --questions")
    step[step.index("labelled.jsonl")] = str(files / "questions.jsonl")
    ok(cpr(*step), "generated model -> ingest --questions")
    LOG.append(("generated-only model", "NO GUARANTEE ... next: cpr label, cpr ingest --questions",
                " ".join(["cpr", *step])))  # fmt: skip

    # 4. labels that came after the model: train (splits them, calibration first), calibrate
    out = " ".join(ok(cpr("ask", QUESTION, "--dataset", DATASET), "labels, old model").split())
    assert f"next: `cpr train {DATASET}` then `cpr calibrate {DATASET}`" in out
    ok(cpr(*advised(out.split("next:")[1], "cpr train"), *TINY, "--generated", "0"), "train")
    LOG.append(("labels newer than the model", "NO GUARANTEE ... next: cpr train, calibrate",
                f"cpr train {DATASET}"))  # fmt: skip

    # 5. a model with its calibration share, no calibration: the note names calibrate only
    out = " ".join(ok(cpr("ask", QUESTION, "--dataset", DATASET), "no calibration: ask").split())
    assert "rcv-" in out and f"next: `cpr calibrate {DATASET}`" in out
    step = advised(out.split("next:")[1], "cpr calibrate")
    ok(cpr(*step, "--alpha", "0.3"), "no calibration -> calibrate")
    out = ok(cpr("ask", QUESTION, "--dataset", DATASET, "--alpha", "0.3"), "calibrated: ask")
    assert "Guarantee:" in out and "NO GUARANTEE" not in out
    LOG.append(("model, no calibration", "NO GUARANTEE ... next: cpr calibrate",
                f"cpr calibrate {DATASET}"))  # fmt: skip

    # 6. --model that does not exist: ask without it
    msg = failed(cpr("ask", QUESTION, "--dataset", DATASET, "--model", "rcv-nope"), "no model id")
    assert "rcv-nope" in msg and "ask without --model" in msg
    ok(cpr("ask", QUESTION, "--dataset", DATASET, "--alpha", "0.3"), "rcv-nope -> without")
    LOG.append(("--model rcv-nope", msg[:80], f"cpr ask ... --dataset {DATASET}"))

    # 7. --model of another dataset's model: ask its own dataset, or this one without it
    model = re.search(r"model (rcv-[0-9a-f]+)", out).group(1)
    msg = failed(cpr("ask", QUESTION, "--dataset", OTHER, "--model", model), "other's model")
    assert f"trained on dataset '{DATASET}'" in msg
    ok(cpr("ask", QUESTION, "--dataset", DATASET, "--model", model, "--alpha", "0.3"), "own")
    ok(cpr("ask", QUESTION, "--dataset", OTHER), "other without --model")
    LOG.append(("another dataset's --model", msg[:80], f"cpr ask ... --dataset {DATASET} --model"))

    # 8. row 3: the smallest attainable alpha printed is accepted for that question
    msg = failed(cpr("ask", QUESTION, "--dataset", DATASET, "--alpha", "0.001"), "alpha 0.001")
    smallest = re.search(r"smallest attainable alpha is ([0-9.]+)", msg).group(1)
    ok(cpr("ask", QUESTION, "--dataset", DATASET, "--alpha", smallest), "smallest alpha")
    LOG.append(("--alpha 0.001", msg[-80:], f"cpr ask ... --alpha {smallest}"))

    # 9. the user's graph changed and was loaded again: the calibration is stale
    store.query(
        f"MATCH (a:Person:{GRAPH} {{name: 'Lilibet'}}), (p:Place:{GRAPH} {{placeName: 'Mayfair'}})"
        " CREATE (a)-[:LIVES_IN]->(p)",
        write=True,
    )
    world["before"] = ug.snapshot(store, GRAPH)  # the user's own change
    ok(cpr("ingest", DATASET, "--from-neo4j", *NAMES), "re-ingest after the user's change")
    assert ug.snapshot(store, GRAPH) == world["before"]
    msg = failed(cpr("ask", QUESTION, "--dataset", DATASET, "--alpha", "0.3"), "stale")
    assert "no longer fits" in msg
    ok(cpr(*advised(msg, f"cpr calibrate {DATASET}"), "--alpha", "0.3"), "stale -> calibrate")
    ok(cpr("ask", QUESTION, "--dataset", DATASET, "--alpha", "0.3"), "recalibrated: ask")
    LOG.append(("stale calibration", msg[:80], f"cpr calibrate {DATASET}"))

    # 10. row 7: no local server and no NEO4J_*: start one (not run here: it would install
    # and start a second server; the command is checked to exist)
    empty = world["files"] / "empty_home"
    empty.mkdir()
    msg = failed(cpr("ask", QUESTION, env_home=empty), "no server")
    assert "`cpr neo4j start`" in msg and "NEO4J_USERNAME" not in msg
    ok(cpr(*advised(msg, "cpr neo4j start"), "--help"), "cpr neo4j start exists")
    LOG.append(("no server, no NEO4J_*", msg[:80], "cpr neo4j start --help (not started)"))

    # the user's graph, after all of the above and the dataset's removal: untouched
    ok(cpr("drop", DATASET, "--yes"), "cpr drop")
    assert ug.snapshot(store, GRAPH) == world["before"]
    for state, message, command in LOG:
        print(f"{state:28} | {message} | ran: {command}")


HTTP_DATASET = "ns_http_graph"


def test_http_answers_a_graph_without_calibration_and_names_unknown_datasets(
    store, neo4j_settings, tmp_path_factory, monkeypatch
):
    """POST /ask on a dataset with a graph only: 200, ranked candidates, the plain
    no-guarantee note with the number of labelled questions; an unknown dataset: 404 that
    lists the known ones (it used to be 409 "has no calibration: run `cpr train nosuch`")."""
    from fastapi.testclient import TestClient

    from cpr_neo4j.conformal.threshold import min_questions
    from cpr_neo4j.graph.ingest import ingest
    from cpr_neo4j.loaders.triples import load_triples
    from cpr_neo4j.serve.app import create_app

    home = private_home(tmp_path_factory, "cpr_home_next_steps_http")
    monkeypatch.setenv("CPR_HOME", str(home))
    triples = home / "t.tsv"
    triples.write_text(
        "".join(
            f"{p['head']}\t{rel.lower()}\t{p['tail']}\n"
            for rel, rows in ug.family_rows().items()
            for p in rows
        ),  # fmt: skip
        encoding="utf-8",
    )
    drop_dataset(store, HTTP_DATASET)
    ingest(store, load_triples(HTTP_DATASET, triples))
    try:
        with TestClient(create_app(neo4j_settings)) as client:
            body = {"question": "who is the mother of William", "dataset": HTTP_DATASET}
            r = client.post("/ask", json={**body, "alpha": 0.05, "delta": 0.05})
            assert r.status_code == 200, r.text
            out = r.json()
            assert out["guarantee"] is None and out["calibration_id"] == "none"
            assert out["answers"] and out["answers"][0]["path"]
            assert "Diana" in [a["name"] for a in out["answers"]]
            note = next(n for n in out["notes"] if n.startswith("NO GUARANTEE"))
            n = min_questions(0.05, 0.05)  # the PAC rule the thresholds use: 59
            assert f"at least {n} labelled calibration questions" in note, note
            r = client.post("/ask", json={**body, "dataset": "ns_nosuch"})
            assert r.status_code == 404, r.text
            detail = r.json()["detail"]
            assert "unknown dataset 'ns_nosuch'" in detail and HTTP_DATASET in detail
            assert "cpr train ns_nosuch" not in detail
    finally:
        drop_dataset(store, HTTP_DATASET)
        shutil.rmtree(home, ignore_errors=True)


def test_the_default_dataset_is_said_and_set_by_env_or_cpr_use(store, tmp_path_factory):
    """CPR_DATASET, else `cpr use NAME` (kept under CPR_HOME), picks the dataset a request
    that names none asks; the answer, or the error, says which one and why."""
    from cpr_neo4j.graph.ingest import ingest
    from cpr_neo4j.loaders.triples import load_triples
    from tests.conftest import run_cpr

    name = "ns_default_graph"
    home = private_home(tmp_path_factory, "cpr_home_next_steps_default")
    triples = home / "t.tsv"
    triples.write_text(
        "".join(
            f"{p['head']}\t{rel.lower()}\t{p['tail']}\n"
            for rel, rows in ug.family_rows().items()
            for p in rows
        ),
        encoding="utf-8",
    )
    drop_dataset(store, name)
    ingest(store, load_triples(name, triples))
    try:
        r = run_cpr(home, "ask", "who is the mother of Nobody Known", CPR_DATASET=name)
        msg = failed(r, "default by CPR_DATASET, no entity")
        assert f"asked dataset '{name}', the default set by CPR_DATASET" in msg
        ok(run_cpr(home, "use", name), "cpr use")
        assert (home / "dataset").read_text().strip() == name
        out = " ".join(ok(run_cpr(home, "ask", QUESTION), "default by cpr use").split())
        assert f"Answered from dataset '{name}' (the default set by `cpr use`" in out
        msg = failed(run_cpr(home, "use", "ns_nosuch"), "cpr use unknown")
        assert "unknown dataset 'ns_nosuch'" in msg and name in msg
    finally:
        drop_dataset(store, name)
        shutil.rmtree(home, ignore_errors=True)
