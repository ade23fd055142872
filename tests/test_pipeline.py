"""End to end on the real bundled MetaQA in a real Neo4j: train (small), calibrate, ask."""

from __future__ import annotations

import math

import pytest

from cpr_neo4j.errors import CprError, Unattainable
from cpr_neo4j.graph import records
from cpr_neo4j.stages.ask import ask
from cpr_neo4j.stages.calibrate import DEFAULT_CENTRE, calibrate, tau_for
from cpr_neo4j.stages.train import TrainSettings, train
from tests.conftest import drop_models

pytestmark = pytest.mark.neo4j


@pytest.fixture(scope="module")
def trained(store, metaqa, tmp_path_factory, monkeypatch_module):
    """A small 1-hop model and its calibration, under a private CPR_HOME (models, hints);
    the local server's credentials are copied there so Browser links still resolve."""
    import shutil

    from cpr_neo4j.config import credentials_file

    home = tmp_path_factory.mktemp("cpr_home")
    if credentials_file().exists():
        (home / "neo4j").mkdir()
        shutil.copy(credentials_file(), home / "neo4j" / "credentials.json")
    monkeypatch_module.setenv("CPR_HOME", str(home))
    result = train(store, TrainSettings("metaqa", hops=1, max_questions=150, cal_share=0.05))
    cal = calibrate(store, "metaqa", result.model_id, alphas=(0.1, 0.3, 0.5))
    yield result, cal
    drop_models(store, [result.model_id])


@pytest.fixture(scope="module")
def monkeypatch_module():
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


def test_training_beats_vsem_on_held_out_pairs(trained):
    result, _ = trained
    f = result.figures
    assert f["pairs_train"] > 100 and f["pairs_heldout"] > 10
    assert f["heldout_accuracy_rcvnet"] > f["heldout_accuracy_vsem"]


def test_calibration_round_trips_through_neo4j(store, trained):
    result, cal = trained
    node = records.latest_calibration(store, "metaqa", result.model_id)
    assert node["id"] == cal.id and node["model"] == result.model_id
    assert node["n"] == cal.n == len(node["scores"]) and node["hint_mode"] == "none"
    assert node["scores"] == sorted(node["scores"])
    for alpha, tau in cal.taus.items():
        assert tau_for(node, alpha) == tau
    assert (node["beam_width"], node["active"], node["hops"]) == (32, 32, 1)


def test_ask_returns_the_gold_answer_with_a_browsable_record(store, trained, neo4j_settings):
    result, _ = trained
    r = ask(
        store,
        "which movie was [John Pasquin] the director for",
        0.1,
        "metaqa",
        model_id=result.model_id,
    )
    names = {a.name for a in r.answers}
    assert {"The Santa Clause", "Jungle 2 Jungle", "Joe Somebody"} & names
    assert all(a.cost <= r.tau for a in r.answers) and r.topics[0]["id"] == "John Pasquin"
    rec = records.ask_record(store, r.ask_id)
    assert len(rec["answers"]) == len(r.answers) and rec["topics"] == ["John Pasquin"]
    best = rec["answers"][0]  # its best path, hop by hop, as the printed path says
    assert best["nodes"] == r.answers[0].entities and len(best["rels"]) == len(best["nodes"]) - 1
    arrow = "-{}->" if best["forward"][0] else "<-{}-"
    assert arrow.format(best["rels"][0]) in r.answers[0].path
    paths = store.read("ask_paths", id=r.ask_id)
    hops = {row["r"].element_id for row in paths if row["r"].type not in ("TOPIC", "ANSWER")}
    recorded = {  # each hop as (tail, type, head) of its relationship
        (a["nodes"][i + 1 - f], a["rels"][i], a["nodes"][i + f])
        for a in rec["answers"]
        for i, f in enumerate(a["forward"] or [])
    }
    assert len(hops) == len(recorded)
    assert "directed_by" in {row["r"].type for row in paths}
    if neo4j_settings.source != "environment" and neo4j_settings.source != "testcontainers":
        assert r.browser_url.startswith("http://127.0.0.1:") and "cmd=edit" in r.browser_url


def test_calibration_stores_the_attainable_range(store, trained):
    result, cal = trained
    node = records.latest_calibration(store, "metaqa", result.model_id)
    finite = sum(math.isfinite(s) for s in node["scores"])
    assert node["n_finite"] == finite and node["recall"] == pytest.approx(finite / node["n"])
    assert node["alpha_min"] == pytest.approx(1 - finite / (node["n"] + 1))
    assert cal.alpha_min == node["alpha_min"] and node.get("delta") is None
    assert node["centre"] == DEFAULT_CENTRE


def test_unattainable_alpha_is_refused_and_answered_only_on_request(store, trained):
    result, cal = trained
    q, tiny = "what was [Shane Acker] the director of", 0.5 / (cal.n + 1)  # k > n
    with pytest.raises(Unattainable, match="too few"):
        ask(store, q, tiny, "metaqa", model_id=result.model_id)
    assert not store.query(
        "MATCH (a:Ask {model_id: $m}) WHERE a.alpha = $a RETURN a",
        {"m": result.model_id, "a": tiny},
    )[0]  # a refusal records nothing
    r = ask(store, q, tiny, "metaqa", model_id=result.model_id, all_candidates=True)
    assert math.isinf(r.tau) and r.guarantee is None
    assert any(n.startswith("NO GUARANTEE") and "too few" in n for n in r.notes)
    ok = ask(store, q, 0.3, "metaqa", model_id=result.model_id)
    assert ok.guarantee and "at least 70%" in ok.guarantee


def test_pac_tau_is_larger_and_says_what_it_promises(store, trained):
    result, _ = trained
    q = "what was [Shane Acker] the director of"
    plain = ask(store, q, 0.3, "metaqa", model_id=result.model_id)
    pac = ask(store, q, 0.3, "metaqa", model_id=result.model_id, delta=0.05)
    assert pac.tau >= plain.tau and {a.id for a in plain.answers} <= {a.id for a in pac.answers}
    assert "over the calibration draw" in pac.guarantee and pac.delta == 0.05


def test_smaller_alpha_gives_a_superset(store, trained):
    result, _ = trained
    q = "what was [Shane Acker] the director of"
    wide = ask(store, q, 0.1, "metaqa", model_id=result.model_id)
    narrow = ask(store, q, 0.5, "metaqa", model_id=result.model_id)
    assert {a.id for a in narrow.answers} <= {a.id for a in wide.answers}
    assert narrow.tau <= wide.tau or math.isinf(wide.tau)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"beam_width": 8}, "beam_width 8 (calibrated with 32)"),
        ({"active": 64}, "active 64 (calibrated with 32)"),
    ],
)
def test_mismatched_settings_are_refused(store, trained, kwargs, message):
    result, _ = trained
    with pytest.raises(CprError, match="does not match") as info:
        ask(
            store,
            "what was [Shane Acker] the director of",
            0.1,
            "metaqa",
            model_id=result.model_id,
            **kwargs,
        )
    assert message in str(info.value)


def test_llm_hint_mode_differing_from_calibration_is_refused(store, trained):
    from cpr_neo4j.search.hints import OpenAIHints

    result, _ = trained
    hints = OpenAIHints("http://127.0.0.1:9", "some-model", timeout=1)
    with pytest.raises(CprError, match="hint_mode llm:some-model"):
        ask(
            store,
            "what was [Shane Acker] the director of",
            0.1,
            "metaqa",
            model_id=result.model_id,
            hints=hints,
        )


@pytest.mark.parametrize(
    "question, entity, message",
    [
        ("", None, "empty question"),
        ("who directed [No Such Film 123]", None, "unknown entity"),
        ("who directed it", "No Such Film 123", "drop --entity"),  # calibrated with text
    ],
)
def test_bad_questions_are_one_line_errors(store, trained, question, entity, message):
    result, _ = trained
    with pytest.raises(CprError, match=message) as info:
        ask(store, question, 0.1, "metaqa", entity=entity, model_id=result.model_id)
    assert "\n" not in str(info.value)


def test_full_text_linking_without_brackets(store, trained):
    result, _ = trained
    r = ask(store, "what was Shane Acker the director of", 0.1, "metaqa", model_id=result.model_id)
    assert r.topics[0]["id"] == "Shane Acker"


def test_no_calibration_yet_is_a_clear_error(store):
    with pytest.raises(CprError, match="no calibration"):
        ask(store, "who directed [Alien]", 0.1, "metaqa_never_calibrated")


def test_a_centred_calibration_is_what_ask_serves(store, trained):
    """`--centre c`: costs minus c x the question's best; ask cuts the same scores."""
    result, plain = trained
    q = "what was [Shane Acker] the director of"
    raw = ask(store, q, 0.3, "metaqa", model_id=result.model_id)  # the default centre
    cal = calibrate(store, "metaqa", result.model_id, alphas=(0.3,), centre=0.5)
    try:
        node = records.latest_calibration(store, "metaqa", result.model_id)
        assert node["id"] == cal.id != plain.id and node["centre"] == 0.5
        r = ask(store, q, 0.3, "metaqa", model_id=result.model_id)
        assert r.calibration_id == cal.id and r.answers
        assert all(a.cost <= r.tau for a in r.answers)
        best = raw.answers[0] if raw.answers else raw.best_outside  # scored at the default
        assert r.answers[0].id == best.id
        raw_best = best.cost / (1 - DEFAULT_CENTRE)  # the best answer scores (1 - c) x best
        assert r.answers[0].cost == pytest.approx(0.5 * raw_best, rel=1e-4)
    finally:
        store.query("MATCH (c:Calibration {id: $id}) DETACH DELETE c", {"id": cal.id}, write=True)


def test_ask_file_answers_each_line_in_order(store, trained):
    """`cpr ask --file -`: one JSON line per input line; bad lines fail alone."""
    import json

    from click.testing import CliRunner

    from cpr_neo4j.cli.main import cli

    result, _ = trained
    lines = [
        json.dumps({"question": "what was [Shane Acker] the director of", "id": "q1"}),
        "which movie was [John Pasquin] the director for",
        "",
        "{not json",
        json.dumps({"question": "who directed [No Such Film 123]"}),
    ]
    args = ["ask", "--file", "-", "--dataset", "metaqa", "--model", result.model_id]
    out = CliRunner().invoke(cli, [*args, "--alpha", "0.5"], input="\n".join(lines) + "\n")
    rows = [json.loads(x) for x in out.stdout.splitlines()]
    assert out.exit_code == 1 and "2 of 4 questions failed" in out.stderr
    assert [r["line"] for r in rows] == [1, 2, 4, 5] and rows[0]["id"] == "q1"
    assert rows[0]["topics"][0]["id"] == "Shane Acker" and rows[0]["ask_id"]
    assert {"The Santa Clause", "Jungle 2 Jungle", "Joe Somebody"} & {
        a["name"] for a in rows[1]["answers"]
    }
    assert "not a question object" in rows[2]["error"] and "error" not in rows[1]
    assert "unknown entity" in rows[3]["error"] and rows[3]["type"] == "CprError"
    single = CliRunner().invoke(
        cli, ["ask", rows[0]["question"], *args[3:], "--alpha", "0.5", "--json"]
    )
    assert single.exit_code == 0
    assert {a["id"] for a in json.loads(single.stdout)["answers"]} == {
        a["id"] for a in rows[0]["answers"]
    }


def test_ask_many_answers_like_single_asks_with_one_round_trip_per_hop_per_chunk(
    store, trained, monkeypatch
):
    """`ask --file`'s engine: per chunk, one hop round trip for all its searches (counted
    by the session's real Neo4j source), one name lookup and one :Ask write; each answer
    is the one a single ask gives, and a failing question fails alone, in its place."""
    from dataclasses import asdict

    from cpr_neo4j.stages.ask import answer, ask_many, open_session

    result, _ = trained
    session = open_session(store, 0.5, "metaqa", result.model_id)
    questions = [
        ("what was [Shane Acker] the director of", None),
        ("which movie was [John Pasquin] the director for", None),
        ("who directed [No Such Film 123]", None),
        ("what films did [Tom Hanks] act in", None),
        ("what was [Shane Acker] the director of", None),  # a repeat shares the frontier
        ("which films did [Ridley Scott] direct", None),
    ]
    calls = {"save_asks": [], "entity_names": 0}
    save_asks, entity_names = records.save_asks, records.entity_names

    def counted_save(s, asks):
        calls["save_asks"].append(len(asks))
        return save_asks(s, asks)

    def counted_names(*args):
        calls["entity_names"] += 1
        return entity_names(*args)

    monkeypatch.setattr(records, "save_asks", counted_save)
    monkeypatch.setattr(records, "entity_names", counted_names)
    source, hops = session.retriever.source, session.cal["hops"]
    before = source.round_trips
    got = list(ask_many(session, questions, chunk=4))
    batched = source.round_trips - before
    # two chunks, each at most one round trip per hop (the second reuses cached rows)
    assert hops <= batched <= 2 * hops
    assert calls == {"save_asks": [3, 2], "entity_names": 2}
    session.retriever.source = source  # ask_many's cache off again: fetch every hop
    before = source.round_trips
    singles = []
    for text, entity in questions:
        try:
            singles.append(answer(session, text, entity))
        except CprError as exc:
            singles.append(exc)
    assert source.round_trips - before == 5 * hops  # alone: every question, every hop
    per_ask = {"ask_id", "browser_url", "cypher"}
    for g, s in zip(got, singles, strict=True):
        assert type(g) is type(s)
        if isinstance(g, CprError):
            assert str(g) == str(s) and "unknown entity" in str(g)
            continue
        assert {k: v for k, v in asdict(g).items() if k not in per_ask} == {
            k: v for k, v in asdict(s).items() if k not in per_ask
        }
        rec = records.ask_record(store, g.ask_id)
        assert rec["ask"]["question"] == g.question and len(rec["answers"]) == len(g.answers)
    assert got[0].answers and got[0].ask_id != got[4].ask_id
