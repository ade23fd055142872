"""The Python API (cpr_neo4j/api.py): README's "From Python" example run as written against
the real Neo4j and a trained, calibrated model (conftest's `every_hop`), giving the set
`cpr ask` gives; a driver of the caller's; typed calibrations; and the one translation of
options that `cpr ask`, `POST /ask` and the API share (cpr_neo4j/options.py)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from cpr_neo4j import CPR, AskOptions, AskResult, Calibration, CprError
from cpr_neo4j.errors import BadInput
from tests.conftest import cpr_cli

README = Path(__file__).resolve().parents[1] / "README.md"


def readme_example() -> str:
    """The code block of README's "From Python" section, as written."""
    section = README.read_text(encoding="utf-8").split("## From Python", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def test_readme_example_is_five_lines():
    lines = [line for line in readme_example().splitlines() if line.strip()]
    assert len(lines) == 5, lines
    assert lines[0] == "from cpr_neo4j import CPR, AskOptions"


def test_options_translate_once():
    """delta: the default 0.05 under coverage, none (marginal) at 0 and under fnr; an
    explicit delta with fnr is refused, as `cpr ask --delta` and POST /ask refuse it."""
    assert AskOptions().session_args()["delta"] == 0.05
    assert AskOptions(delta=0.1).session_args()["delta"] == 0.1
    assert AskOptions(delta=0).session_args()["delta"] is None
    assert AskOptions(risk="fnr").session_args()["delta"] is None
    with pytest.raises(BadInput, match="risk fnr"):
        AskOptions(risk="fnr", delta=0.05)
    with pytest.raises(BadInput, match="alpha"):
        AskOptions(alpha=1.0)
    with pytest.raises(BadInput, match="risk"):
        AskOptions(risk="recall")
    args = AskOptions(model="m1", hops=2, effective_scores=True, grouped=False).session_args()
    assert (args["model_id"], args["hops_filter"], args["effective"], args["grouped"]) == (
        "m1", 2, True, False,
    )  # fmt: skip
    o = AskOptions(entity=["Ridley Scott", "Blade Runner"])
    assert o.entity == ("Ridley Scott", "Blade Runner") and o.entities == list(o.entity)
    with pytest.raises(dataclasses.FrozenInstanceError):
        o.alpha = 0.2  # type: ignore[misc]


def test_http_request_builds_the_same_options():
    from cpr_neo4j.serve.answer import options_of
    from cpr_neo4j.serve.schemas import AskRequest

    req = AskRequest(question="q", alpha=0.2, risk="fnr", ungrouped=True, entity=["a", "b"])
    assert options_of(req, "d", "m") == AskOptions(
        alpha=0.2, risk="fnr", grouped=False, entity=("a", "b"), dataset="d", model="m"
    )
    marginal = options_of(AskRequest(question="q", delta=0), "d", "m")
    assert marginal.session_args()["delta"] is None
    assert options_of(AskRequest(question="q"), "d", "m").session_args()["delta"] == 0.05


@pytest.mark.neo4j
def test_cli_builds_the_same_options(store, monkeypatch):
    """`cpr ask`'s flags make the AskOptions that the same HTTP request makes (captured
    where the session would open)."""
    from click.testing import CliRunner

    from cpr_neo4j.cli.main import cli
    from cpr_neo4j.serve.answer import options_of
    from cpr_neo4j.serve.schemas import AskRequest

    seen: list[AskOptions] = []

    def capture(self, *args, **kwargs):
        seen.append(self)
        raise CprError("captured")

    monkeypatch.setattr(AskOptions, "open", capture)
    flags = ["--alpha", "0.2", "--risk", "fnr", "--ungrouped", "--hops", "2", "--entity", "X"]
    out = CliRunner().invoke(cli, ["ask", "q", "--dataset", "d", "--model", "m", *flags])
    assert "captured" in out.output, out.output
    req = AskRequest(question="q", alpha=0.2, risk="fnr", ungrouped=True, hops=2, entity="X")
    assert seen == [dataclasses.replace(options_of(req, "d", "m"), entity=("X",))]


@pytest.mark.neo4j
def test_readme_example_runs(every_hop, store, neo4j_settings, capsys):
    """The example as written: its printed lines, its (:Ask) record, and the same set,
    threshold and group as `cpr ask ... --json` (the CLI's translation of the options)."""
    code = readme_example()
    mp = every_hop.env()
    scope: dict = {}
    try:
        exec(compile(code, str(README), "exec"), scope)
    finally:
        mp.undo()
    r = scope["r"]
    printed = capsys.readouterr().out.splitlines()
    print("\n".join(printed))  # the example's real output, for `pytest -s`
    assert isinstance(r, AskResult)
    assert (r.dataset, r.alpha, r.model_id) == ("metaqa", 0.3, every_hop.model_id)
    assert r.answers and r.guarantee, r.notes
    assert printed == [r.guarantee, str([(a.name, a.path) for a in r.answers])]
    ask = store.query(
        "MATCH (a:Ask {id: $id}) RETURN a.alpha AS alpha, a.calibration_id AS cal", {"id": r.ask_id}
    )[0]
    assert [(x["alpha"], x["cal"]) for x in ask] == [(0.3, r.calibration_id)]

    question = code.split('cpr.ask("', 1)[1].split('"', 1)[0]
    proc = cpr_cli(
        neo4j_settings, every_hop.home, "ask", question, "--alpha", "0.3", "--dataset", "metaqa",
        "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    cli = json.loads(proc.stdout)
    assert [a["id"] for a in cli["answers"]] == [a.id for a in r.answers]
    assert (cli["tau"], cli["group"], cli["guarantee"]) == (r.tau, r.group, r.guarantee)


@pytest.mark.neo4j
def test_a_given_driver_ask_many_and_calibration(every_hop, neo4j_settings):
    """CPR(driver): the caller's driver, left open; the typed calibration is the one that
    serves the asks; ask_many gives each question its result or its own error, in order."""
    from neo4j import GraphDatabase

    s = neo4j_settings
    driver = GraphDatabase.driver(s.uri, auth=(s.username, s.password))
    mp = every_hop.env()
    try:
        with CPR(driver, database=s.database) as cpr:
            cal = cpr.calibration("metaqa", model=every_hop.model_id)
            assert isinstance(cal, Calibration)
            assert (cal.id, cal.model, cal.n) == (
                every_hop.cal.id, every_hop.model_id, every_hop.cal.n,
            )  # fmt: skip
            assert (cal.question_hops, cal.linking, cal.delta) == (
                None, every_hop.cal.linking, every_hop.cal.delta,
            )  # fmt: skip
            questions = [
                "which movies did [Ridley Scott] direct",
                "   ",
                ("who directed Blade Runner", "Blade Runner"),
            ]
            opts = AskOptions(alpha=0.5, dataset="metaqa", model=every_hop.model_id)
            results = list(cpr.ask_many(questions, opts))
        driver.verify_connectivity()  # still open: it is the caller's
    finally:
        mp.undo()
        driver.close()
    assert isinstance(results[1], CprError) and "empty" in str(results[1]).lower()
    first, third = results[0], results[2]
    assert isinstance(first, AskResult) and isinstance(third, AskResult)
    assert {first.calibration_id, third.calibration_id} == {cal.id}
    assert [t["name"] for t in third.topics] == ["Blade Runner"]
    assert third.linking.get("rule") == "named", third.linking
