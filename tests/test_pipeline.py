"""End to end on the real bundled MetaQA in a real Neo4j: train (small), calibrate, ask."""

from __future__ import annotations

import math

import pytest

from cpr_neo4j.conformal.guarantee import DEFAULT_DELTA, Calibrated, request
from cpr_neo4j.conformal.threshold import TOLERANCE, within
from cpr_neo4j.errors import CprError, Unattainable
from cpr_neo4j.graph import records
from cpr_neo4j.stages.ask import ask
from cpr_neo4j.stages.calibrate import calibrate
from cpr_neo4j.stages.train import TrainSettings, train
from tests.conftest import drop_models, private_home

pytestmark = pytest.mark.neo4j


@pytest.fixture(scope="module")
def trained(store, metaqa, tmp_path_factory, monkeypatch_module):
    """A small 1-hop model and its calibration, under a private CPR_HOME (models, hints);
    the local server's credentials are copied there so Browser links still resolve."""
    home = private_home(tmp_path_factory, "cpr_home")
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


def in_set(cost: float, r) -> bool:
    """An answer belongs to r's set: within its threshold (tolerance included), or tied
    with the top-ranked answer (sets are never empty unless allow_empty)."""
    top = r.answers[0].cost if r.answers else math.inf
    return bool(within([cost], r.tau)[0] or within([cost], top)[0])


def test_calibration_round_trips_through_neo4j(store, trained):
    """The node keeps every calibration question's score and group: the thresholds read
    back from it are the calibration's, for every alpha, delta, risk and group."""
    result, cal = trained
    node = records.latest_calibration(store, "metaqa", result.model_id)
    assert node["id"] == cal.id and node["model"] == result.model_id
    assert node["n"] == cal.n == len(node["scores"]) == len(node["q_scores"])
    assert len(node["q_groups"]) == cal.n and node["hint_mode"] == "none"
    assert node["scores"] == sorted(node["scores"])
    back = Calibrated.from_node(node)
    for alpha in (0.1, 0.3, 0.5):
        for req in (request(alpha), request(alpha, 0), request(alpha, 0, "fnr")):
            for g in sorted(cal.groups):
                assert back.threshold(req, g) == cal.calibrated.threshold(req, g), (req, g)
    assert set(cal.groups) <= {0, 1} and cal.groups.get(1, 0) > 0.9 * cal.n  # 1-hop paths
    assert (node["beam_width"], node["active"], node["hops"]) == (32, 32, 1)
    assert node["hops_filter"] == 1 and node["hop_counts"] == [1]


def test_ask_returns_the_gold_answer_with_a_browsable_record(store, trained, neo4j_settings):
    result, _ = trained
    r = ask(
        store,
        "which movie was [John Pasquin] the director for",
        0.1,
        dataset="metaqa",
        model_id=result.model_id,
    )
    names = {a.name for a in r.answers}
    assert {"The Santa Clause", "Jungle 2 Jungle", "Joe Somebody"} & names
    assert all(in_set(a.cost, r) for a in r.answers) and r.topics[0]["id"] == "John Pasquin"
    assert r.group == 1 and r.n > 0 and r.risk == "coverage" and r.delta == DEFAULT_DELTA
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


def test_calibration_stores_its_score_family_recall_and_guarantee(store, trained):
    import json

    from cpr_neo4j.model.store import read_config

    result, cal = trained
    node = records.latest_calibration(store, "metaqa", result.model_id)
    finite = sum(math.isfinite(s) for s in node["q_scores"])
    assert node["recall"] == pytest.approx(finite / node["n"]) == pytest.approx(cal.recall)
    assert node["delta"] == DEFAULT_DELTA and node["tolerance"] == TOLERANCE
    spec = json.loads(node["score_family"])
    temperature = read_config(result.model_id)["meta"]["temperature"]
    assert spec == {"family": "surprisal", "T": pytest.approx(temperature)}
    assert node["score_note"] == "fitted at training"
    # surprisal: -log of a probability mass, so every finite score is >= 0
    assert all(s >= 0 for s in node["q_scores"] if math.isfinite(s))
    canary = json.loads(node["canary"])
    assert canary and all(len(c["paths"]) == len(c["costs"]) for c in canary)
    # every gold candidate's score is stored with its question's |Y| (the FNR curve)
    assert len(node["fnr_qidx"]) == len(node["fnr_scores"]) and len(node["q_n_gold"]) == cal.n


def test_unattainable_alpha_is_refused_and_answered_only_on_request(store, trained):
    result, cal = trained
    q, tiny = "what was [Shane Acker] the director of", 0.5 / (cal.n + 1)  # k > n
    with pytest.raises(Unattainable, match="too few"):
        ask(store, q, tiny, dataset="metaqa", model_id=result.model_id)
    assert not store.query(
        "MATCH (a:Ask {model_id: $m}) WHERE a.alpha = $a RETURN a",
        {"m": result.model_id, "a": tiny},
    )[0]  # a refusal records nothing
    r = ask(store, q, tiny, dataset="metaqa", model_id=result.model_id, all_candidates=True)
    assert math.isinf(r.tau) and r.guarantee is None
    assert any(n.startswith("NO GUARANTEE") and "too few" in n for n in r.notes)
    ok = ask(store, q, 0.3, dataset="metaqa", model_id=result.model_id)
    assert ok.guarantee and "at least 70%" in ok.guarantee


def test_pac_tau_is_larger_and_says_what_it_promises(store, trained):
    """PAC (delta 0.05) is the default; delta 0 asks for the marginal guarantee."""
    result, _ = trained
    q = "what was [Shane Acker] the director of"
    plain = ask(store, q, 0.3, dataset="metaqa", model_id=result.model_id, delta=0)
    pac = ask(store, q, 0.3, dataset="metaqa", model_id=result.model_id)
    assert pac.tau >= plain.tau and {a.id for a in plain.answers} <= {a.id for a in pac.answers}
    assert "over the calibration draw" in pac.guarantee and pac.delta == 0.05
    assert plain.delta is None and "on average over calibration draws" in plain.guarantee


def test_smaller_alpha_gives_a_superset(store, trained):
    result, _ = trained
    q = "what was [Shane Acker] the director of"
    wide = ask(store, q, 0.1, dataset="metaqa", model_id=result.model_id)
    narrow = ask(store, q, 0.5, dataset="metaqa", model_id=result.model_id)
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
            dataset="metaqa",
            model_id=result.model_id,
            **kwargs,
        )
    assert message in str(info.value)


def test_llm_hint_mode_differing_from_calibration_is_refused(store, trained):
    from cpr_neo4j.hints.llm import OpenAIHints

    result, _ = trained
    hints = OpenAIHints("http://127.0.0.1:9", "some-model", timeout=1)
    with pytest.raises(CprError, match="hint_mode llm:some-model"):
        ask(
            store,
            "what was [Shane Acker] the director of",
            0.1,
            dataset="metaqa",
            model_id=result.model_id,
            hints=hints,
        )


@pytest.mark.parametrize(
    "question, entity, message",
    [
        ("", None, "empty question"),
        ("who directed [No Such Film 123]", None, "unknown entity"),
        ("who directed it", "No Such Film 123", "unknown entity"),  # named, under text
    ],
)
def test_bad_questions_are_one_line_errors(store, trained, question, entity, message):
    result, _ = trained
    with pytest.raises(CprError, match=message) as info:
        ask(store, question, 0.1, dataset="metaqa", entity=entity, model_id=result.model_id)
    assert "\n" not in str(info.value)


def test_full_text_linking_without_brackets(store, trained):
    result, _ = trained
    q = "what was Shane Acker the director of"
    r = ask(store, q, 0.1, dataset="metaqa", model_id=result.model_id)
    assert r.topics[0]["id"] == "Shane Acker"


def test_an_unknown_dataset_is_named_unknown(store):
    # (a dataset that exists without calibration answers without a guarantee:
    # tests/test_next_steps.py)
    with pytest.raises(CprError, match="unknown dataset 'metaqa_never_ingested'"):
        ask(store, "who directed [Alien]", 0.1, dataset="metaqa_never_ingested")


def test_ask_cuts_the_scores_the_calibration_family_gives(store, trained):
    """The answers' costs are the calibration's score family (the surprisal at the model's
    temperature) of this retrieval, recomputed here: what ask cuts is what was calibrated."""
    import json

    from cpr_neo4j.model.store import load_scorer
    from cpr_neo4j.stages.retrieval import RetrievalSettings, Retriever
    from cpr_neo4j.stages.scoring import answer_scores, columns
    from cpr_neo4j.text import mask_question

    result, _ = trained
    r = ask(store, "what was [Shane Acker] the director of", 0.3, dataset="metaqa",
            model_id=result.model_id)  # fmt: skip
    node = records.latest_calibration(store, "metaqa", result.model_id)
    spec = json.loads(node["score_family"])
    retriever = Retriever(store, "metaqa", load_scorer(result.model_id), RetrievalSettings(1))
    masked = mask_question("what was [Shane Acker] the director of", ["Shane Acker"])
    cols = columns(retriever.run(masked, ["Shane Acker"]), spec, False)
    scores = dict(zip(cols.ids, answer_scores(cols, spec).tolist(), strict=True))
    assert r.answers and {a.id for a in r.answers} <= set(scores)
    for a in r.answers:
        assert a.cost == pytest.approx(scores[a.id], rel=1e-6, abs=1e-9)
    best = min(scores, key=lambda k: (scores[k], k))
    assert r.answers[0].id == best


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
    from cpr_neo4j.graph import entity_index

    calls = {"save_asks": [], "entity_names": 0}
    save_asks, entity_names = records.save_asks, entity_index.names

    def counted_save(s, asks):
        calls["save_asks"].append(len(asks))
        return save_asks(s, asks)

    def counted_names(*args):  # the index when built, else one query (records.entity_names)
        calls["entity_names"] += 1
        return entity_names(*args)

    monkeypatch.setattr(records, "save_asks", counted_save)
    monkeypatch.setattr(entity_index, "names", counted_names)
    source, hops = session.retriever.source, session.cal.hops
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
