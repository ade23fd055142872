"""The whole path of a new user with a graph and no questions, through the real commands:
`cpr ingest` (a graph alone) -> `cpr train` (generated questions alone) -> `cpr label` on 30
plain questions, driven in tmux as a person types (tmux send-keys / capture-pane) ->
`cpr ingest --questions` -> `cpr calibrate`, against a real Neo4j.

The person's actions: mark the right answers by number (read off the screen, so the labels
are checked against the graph), ask for more candidates, mistype once, type an answer the
graph lacks, skip one, quit halfway and resume. CPR_REQUIRE_TMUX=1 (CI) makes a missing
tmux a failure instead of a skip."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time

import pytest

from tests import toy_movies
from tests.conftest import cli_env, cpr_cli, drop_dataset, private_home

NAME = "test-labelling-toy"
SESSION = "cpr-label-test"
pytestmark = [pytest.mark.neo4j, pytest.mark.slow]


def _tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], capture_output=True, text=True, check=True).stdout


def _screen() -> str:
    return _tmux("capture-pane", "-p", "-J", "-S", "-300", "-t", SESSION)


def _wait(pattern: str, timeout: float = 240) -> str:
    """The screen once `pattern` matches its end (the prompt), else fail with the screen."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        screen = _screen().rstrip()
        if re.search(pattern, screen):
            return screen
        time.sleep(0.3)
    pytest.fail(f"no {pattern!r} on the screen after {timeout} s:\n{_screen()[-3000:]}")


def _send(text: str) -> None:
    _tmux("send-keys", "-t", SESSION, "-l", text)
    _tmux("send-keys", "-t", SESSION, "Enter")


def _wait_question(header: str, timeout: float = 240) -> str:
    """The screen once question `header` ("[3/30]") is the last one and waits at its prompt."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        screen = _screen().rstrip()
        last = screen[screen.rindex("\n[") + 1 :] if "\n[" in screen else ""
        if last.startswith(header) and re.search(r"> ?$", screen):
            return screen
        time.sleep(0.3)
    pytest.fail(f"question {header} never came:\n{_screen()[-3000:]}")


def _current(screen: str) -> tuple[str, dict[str, int]]:
    """(question, answer name -> number) of the last question on the screen."""
    block = screen[screen.rindex("\n[") + 1 :]
    question = re.match(r"\[\d+/\d+\] (.*)", block).group(1).strip()
    numbers = {}
    for m in re.finditer(r"^\s+(\d+)\. (.+?)    ", block, re.M):
        numbers.setdefault(m.group(2), int(m.group(1)))
    return question, numbers


@pytest.fixture(scope="module")
def home(store, neo4j_settings, tmp_path_factory):
    if not shutil.which("tmux"):
        if os.environ.get("CPR_REQUIRE_TMUX"):
            pytest.fail("tmux is required here (CPR_REQUIRE_TMUX): `make tmux-prereqs`")
        pytest.skip("tmux not installed (`make tmux-prereqs`)")
    home = private_home(tmp_path_factory, "cpr_home_labelling")
    folder = tmp_path_factory.mktemp("toy_label")
    t, e = toy_movies.write(folder)
    drop_dataset(store, NAME)
    r = cpr_cli(neo4j_settings, home, "ingest", NAME, "--triples", str(t), "--entities", str(e))
    assert r.returncode == 0, r.stderr
    yield home, folder
    subprocess.run(["tmux", "kill-session", "-t", SESSION], capture_output=True)
    drop_dataset(store, NAME)
    store.query(
        "MATCH (n) WHERE (n:ScoringModel OR n:Calibration OR n:Ask) AND n.dataset = $d "
        "DETACH DELETE n",
        {"d": NAME},
        write=True,
    )


def test_new_user_path_with_labels_from_the_terminal(store, neo4j_settings, home):
    home, folder = home
    # a graph and no questions: training runs on generated questions alone
    r = cpr_cli(
        neo4j_settings, home, "train", NAME, "--generated", "60", "--rollouts", "4",
        "--epochs", "1", "--seed", "1",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr + r.stdout
    assert re.search(r"0 / [1-9]\d*", r.stdout), r.stdout  # labelled / generated
    assert "no labelled question" in r.stdout
    assert "score temperature" in r.stdout and "10 (fixed" in r.stdout, r.stdout  # T unfitted
    # the next step labels: calibrate would refuse a dataset without labelled questions
    assert f"next: cpr label {NAME}" in " ".join(r.stdout.split())
    r = cpr_cli(neo4j_settings, home, "calibrate", NAME)
    assert r.returncode != 0 and "cpr label" in (r.stderr + r.stdout)

    asked = toy_movies.questions()
    gold = dict(asked)
    qfile, out = folder / "questions.txt", folder / "labelled.jsonl"
    qfile.write_text("".join(q + "\n" for q, _ in asked))
    env = cli_env(neo4j_settings, home)
    command = " ".join(
        shlex.quote(x)
        for x in [
            sys.executable,
            "-m",
            "cpr_neo4j",
            "label",
            NAME,
            str(qfile),
            "-o",
            str(out),
            "--page",
            "5",
        ]
    )
    exports = " ".join(
        f"{k}={shlex.quote(v)}"
        for k, v in env.items()
        if k.startswith(("CPR_", "NEO4J_", "PYTHON")) or k == "PATH"
    )
    subprocess.run(["tmux", "kill-session", "-t", SESSION], capture_output=True)
    _tmux("new-session", "-d", "-s", SESSION, "-x", "220", "-y", "60")
    _send(f"env {exports} {command}")

    actions: list[tuple[str, str]] = []
    sample = None
    prompt = r"> ?$"
    total, offset = len(asked), 0
    for k in range(len(asked)):
        screen = _wait_question(f"[{k + 1 - offset}/{total}]")
        question, numbers = _current(screen)
        if k == 0:
            sample = screen[screen.rindex("\n[") + 1 :]
        if k == 3:  # a mistyped number first: a message, the same question again
            _send("999")
            screen = _wait(r"outside 1-\d+\n.*\n> ?$")
            actions.append((question, "mistyped 999"))
        if k == 5:  # an answer the graph lacks
            _send("a Somebody Not In The Graph")
            actions.append((question, "typed an answer"))
            continue
        if k == 6:
            _send("s")
            actions.append((question, "skipped"))
            continue
        if k == 12:  # quit halfway, then the same command resumes
            _send("q")
            _wait(r"rerun the same command to resume.*\n.*[$#] ?$")
            actions.append((question, "quit, reran the command"))
            _send(f"env {exports} {command}")
            total, offset = len(asked) - 12, 12
            screen = _wait_question(f"[1/{total}]")
            assert "12 already in" in screen
            question, numbers = _current(screen)
        want = gold[question]
        if k == 8:  # found by name, lower case, wherever they rank: no paging
            for name in sorted(want):
                _send(f"/{name.lower()}")
                screen = _wait(r"candidate\(s\) named with .*\n.*\n> ?$")
            _, numbers = _current(screen)
            assert want <= set(numbers), screen[-2000:]
            actions.append((question, f"found {len(want)} by name"))
        while not want <= set(numbers) and "more (m)" in screen[screen.rindex("\n[") :]:
            before = len(numbers)
            _send("m")  # more candidates
            end = time.monotonic() + 60
            while len(numbers) == before and time.monotonic() < end:
                time.sleep(0.3)
                screen = _wait(prompt)
                _, numbers = _current(screen)
            assert len(numbers) > before, screen[-2000:]
            actions.append((question, "more"))
        marks = sorted(numbers[n] for n in want if n in numbers)
        assert marks, f"no right answer among the candidates of {question!r}:\n{screen[-2000:]}"
        _send(" ".join(map(str, marks)))
        actions.append((question, f"marked {len(marks)}"))
    screen = _wait(r"next: cpr ingest .*\n.*[$#] ?$")
    assert "29 labelled question(s)" in screen and "keeps 29 for calibration" in screen

    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(rows) == 29 and len({r["id"] for r in rows}) == 29
    skipped = (folder / "labelled.jsonl.skipped").read_text().splitlines()
    assert len(skipped) == 1
    names = toy_movies.names()
    for row in rows:
        if row["label"] == "typed":
            assert row["answers"] == ["Somebody Not In The Graph"]
        else:  # the marked answers are exactly the graph's answers (all were shown)
            assert {names[a] for a in row["answers"]} == gold[row["question"]], row
    (folder / "transcript.txt").write_text(sample or "")
    (folder / "actions.json").write_text(json.dumps(actions, indent=1))

    # the labels join the dataset; the model trained on none calibrates on all of them
    r = cpr_cli(neo4j_settings, home, "ingest", NAME, "--questions", str(out))
    assert r.returncode == 0, r.stderr + r.stdout
    said = " ".join(r.stdout.split())  # rich wraps the line where the file's path ends
    assert "added 29 question(s)" in said and "the graph is unchanged" in said, r.stdout
    r = cpr_cli(neo4j_settings, home, "calibrate", NAME)
    assert r.returncode == 0, r.stderr + r.stdout
    cal = store.query(
        "MATCH (c:Calibration {dataset: $d}) RETURN c.n AS n ORDER BY c.created DESC LIMIT 1",
        {"d": NAME},
    )[0]
    assert cal[0]["n"] == 29
    assert any(a == "more" for _, a in actions)  # some right answers were past the first page
    assert any(a.startswith("found") for _, a in actions)
    print("\n" + (sample or ""))
    print(json.dumps(actions))
