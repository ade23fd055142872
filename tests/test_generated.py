"""Questions generated from the graph (training/generate.py) against a real Neo4j: every
answer is an end of the question's relation path, reverse steps walk relationships
backwards, and no generated question can reach calibration. Also the label split rule
(training/labels.py) and the paraphrase client's wire format."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from cpr_neo4j.errors import BadInput, CprError
from cpr_neo4j.graph.cypher import rel_type
from cpr_neo4j.search.base import Step
from cpr_neo4j.training import labels
from cpr_neo4j.training.generate import (
    PREFIX,
    Generated,
    generate,
    path_ends,
    question_words,
    word,
)
from cpr_neo4j.training.questions import Question
from tests import toy_movies
from tests.conftest import drop_dataset

NAME = "test-generated-toy"


@pytest.fixture(scope="module")
def toy(store, tmp_path_factory):
    from cpr_neo4j.graph.ingest import ingest
    from cpr_neo4j.loaders.triples import load_triples

    t, e = toy_movies.write(tmp_path_factory.mktemp("toy"))
    drop_dataset(store, NAME)
    ingest(store, load_triples(NAME, t, e))
    yield NAME
    drop_dataset(store, NAME)


def _ends_by_walks(store, dataset: str, start: str, path) -> set[str]:
    """Independent of the generator: one MATCH clause per step (so a walk may reuse a
    relationship, as the generator's hop-by-hop sets do), types backtick-quoted."""
    text = "MATCH (x0:Entity {dataset: $d, id: $s})\n"
    for i, step in enumerate(path, 1):
        arrow = f"-[:{rel_type(step.relation)}]->" if step.forward else (
            f"<-[:{rel_type(step.relation)}]-"
        )  # fmt: skip
        text += f"MATCH (x{i - 1}){arrow}(x{i}:Entity {{dataset: $d}})\n"
    text += f"RETURN collect(DISTINCT x{len(path)}.id) AS ends"
    records, _ = store.query(text, {"d": dataset, "s": start})
    return set(records[0]["ends"])


@pytest.mark.neo4j
def test_every_answer_is_an_end_of_the_relation_path(store, toy):
    from cpr_neo4j.graph import records

    made = generate(store, toy, 60, 3, records.relation_text(store, toy), seed=3)
    assert len(made) >= 40
    assert {g.hops for g in made} == {1, 2, 3}
    assert len({g.id for g in made}) == len(made)
    for g in made:
        assert g.id.startswith(PREFIX)
        truth = _ends_by_walks(store, toy, g.topic, g.path) - {g.topic}
        assert set(g.answers) == truth, g
        assert g.topic_name in g.text
        assert "ENT" in g.question().masked and g.topic_name not in g.question().masked


@pytest.mark.neo4j
def test_reverse_steps_walk_backwards(store, toy):
    from cpr_neo4j.graph import records

    made = generate(store, toy, 60, 2, records.relation_text(store, toy), seed=5)
    reverse = [g for g in made if not g.path[0].forward]
    forward = [g for g in made if g.path[0].forward]
    assert reverse and forward
    heads = {h for h, _, _ in toy_movies.triples()}
    tails = {t for _, _, t in toy_movies.triples()}
    for g in reverse:  # a reverse first step starts at a tail of that relation
        rel = g.path[0].relation
        assert any(t == g.topic and r == rel for _, r, t in toy_movies.triples())
    # a known case by hand: the movies a director made are the reverse of directed_by
    ana = "ana_lindqvist"
    ends = path_ends(store, toy, [(ana, (Step("directed_by", False),))])[0]
    expect = {h for h, r, t in toy_movies.triples() if r == "directed_by" and t == ana}
    assert ends == expect and ends <= heads and ana in tails
    # and forward from one of them comes back to the director
    one = sorted(expect)[0]
    assert path_ends(store, toy, [(one, (Step("directed_by", True),))])[0] == {ana}


@pytest.mark.neo4j
def test_generation_is_reproducible_and_capped(store, toy):
    from cpr_neo4j.graph import records

    text = records.relation_text(store, toy)
    a = generate(store, toy, 30, 2, text, seed=11)
    b = generate(store, toy, 30, 2, text, seed=11)
    assert [g.to_json() for g in a] == [g.to_json() for g in b]
    few = generate(store, toy, 30, 2, text, seed=11, max_answers=1)
    assert few and all(len(g.answers) == 1 for g in few)
    assert all(json.loads(json.dumps(g.to_json()))["split"] == "generated" for g in a)


@pytest.mark.neo4j
@pytest.mark.slow
def test_with_no_label_held_out_the_temperature_is_fixed(store, toy, tmp_path_factory, monkeypatch):
    """The toy graph before any label (the next test adds them): generated questions alone,
    scored at UNLABELLED_TEMPERATURE, not at a fit on held-out generated questions."""
    from cpr_neo4j.model.store import read_config
    from cpr_neo4j.stages.train import UNLABELLED_TEMPERATURE, TrainSettings, train
    from tests.conftest import drop_models, private_home

    monkeypatch.setenv("CPR_HOME", str(private_home(tmp_path_factory, "cpr_home_no_labels")))
    result = train(store, TrainSettings(toy, generated=20, rollouts=2, epochs=1, seed=4))
    try:
        assert result.figures["labels"] == 0 and result.figures["questions_heldout"] > 0
        assert result.figures["temperature_fitted_on"] == 0
        assert read_config(result.model_id)["meta"]["temperature"] == UNLABELLED_TEMPERATURE
    finally:
        drop_models(store, [result.model_id])


@pytest.mark.neo4j
@pytest.mark.slow
def test_training_keeps_its_calibration_labels_apart(
    store, toy, tmp_path, tmp_path_factory, monkeypatch
):
    """100 labels added to the graph-only dataset: `train` keeps 59 for calibration, trains
    on none of them, lists no generated question for calibration, and calibrate uses them."""
    import polars as pl

    from cpr_neo4j.graph.ingest import add_questions
    from cpr_neo4j.loaders.base import QUESTIONS_SCHEMA, Dataset
    from cpr_neo4j.loaders.triples import read_questions
    from cpr_neo4j.model.store import read_config
    from cpr_neo4j.stages.calibrate import GOLD, calibrate
    from cpr_neo4j.stages.train import TrainSettings, train
    from tests.conftest import drop_models, private_home

    f = tmp_path / "labels.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in toy_movies.labelled_rows()))
    qs, problems = read_questions(f)
    assert not problems and qs.height == 100
    none = pl.DataFrame(schema={"head": pl.Utf8, "relation": pl.Utf8, "tail": pl.Utf8})
    ents = pl.DataFrame(schema={"id": pl.Utf8, "name": pl.Utf8})
    add_questions(store, Dataset(toy, none, ents, qs.select(list(QUESTIONS_SCHEMA))))
    monkeypatch.setenv("CPR_HOME", str(private_home(tmp_path_factory, "cpr_home_few_labels")))
    result = train(store, TrainSettings(toy, generated=20, rollouts=2, epochs=1, seed=4))
    try:
        meta = read_config(result.model_id)["meta"]
        cal, trained = set(meta["calibration_ids"]), set(meta["training_ids"])
        inner = set(meta["inner_dev_ids"])
        assert len(cal) == 59 and not cal & trained and not cal & inner and not trained & inner
        assert len(cal | trained | inner) == 100
        assert not any(i.startswith(PREFIX) for i in cal | trained | inner)
        assert result.figures["questions_generated"] == 20
        # labelled questions held out: the temperature is fitted on them (grid 0.02-3)
        assert result.figures["temperature_fitted_on"] > 0 and meta["temperature"] <= 3
        c = calibrate(store, toy, result.model_id, alphas=(0.5,), linking=GOLD)
        assert c.n == 59
    finally:
        drop_models(store, [result.model_id])


def test_default_generated_count():
    from cpr_neo4j.stages.train import generated_count

    assert [generated_count(n) for n in (0, 1, 41, 299, 300, 35000)] == [300, 299, 259, 1, 0, 0]


def test_real_pairs_repeated_to_their_share():
    from cpr_neo4j.search.paths import EntityPath, PathPair
    from cpr_neo4j.stages.train import weigh_real
    from cpr_neo4j.training.generate import PREFIX

    path = EntityPath("a", ("r",), ("b",))

    def pairs(qid: str, n: int) -> list[PathPair]:
        return [PathPair(question_id=qid, masked_question="q", pos=path, neg=path)] * n

    real, made = pairs("q1", 10), pairs(PREFIX + "7", 90)
    mixed = real + made
    assert weigh_real(mixed, None) is mixed
    out = weigh_real(mixed, 0.5)
    assert out[:100] == mixed and len(out) == 180  # the 10 real ones 9 times: 90 against 90
    assert sum(p.question_id == "q1" for p in out) == 90
    assert len(weigh_real(mixed, 0.75)) == 100 + 260  # 27 times: 270 against 90
    assert weigh_real(real, 0.5) == real and weigh_real(made, 0.5) == made
    assert weigh_real(pairs("q1", 60) + made[:40], 0.5) == pairs("q1", 60) + made[:40]
    with pytest.raises(CprError, match="strictly between 0 and 1"):
        weigh_real(mixed, 1.0)


@pytest.mark.neo4j
def test_training_an_unknown_dataset_says_so(store):
    from cpr_neo4j.stages.train import TrainSettings, train

    with pytest.raises(
        CprError, match=r"unknown dataset 'test-no-such-dataset' .*`cpr ingest test-no-such-dataset"
    ):
        train(store, TrainSettings("test-no-such-dataset", generated=None))


def test_wording_uses_relation_text_and_direction():
    import random

    path = (Step("directed_by", False), Step("starred_actors", True))
    text = {"directed_by": "directed by", "starred_actors": "starred actors"}
    seen = {word("Ana Lindqvist", path, text, None, random.Random(i)) for i in range(40)}
    assert len(seen) >= 8  # several templates
    assert all("directed by" in s and "starred actors" in s and "Ana Lindqvist" in s for s in seen)


def test_a_freebase_name_is_worded_by_its_property():
    import random

    from cpr_neo4j.text import readable_relation

    birth, spouse = "people.person.place_of_birth", "people.marriage.spouse"
    assert question_words(birth, {birth: readable_relation(birth)}) == "place of birth"
    assert question_words(birth, {}) == "place of birth"
    # a text the dataset gave is its own wording; a name without a type part keeps its text
    assert question_words(birth, {birth: "born in"}) == "born in"
    assert question_words("directed_by", {"directed_by": "directed by"}) == "directed by"
    assert question_words("film.film", {}) == "film film"
    seen = {word("Ana", (Step(birth, True),), {}, None, random.Random(i)) for i in range(20)}
    assert all("place of birth" in q and "person" not in q for q in seen)
    rev = word("Ana", (Step(spouse, False),), {}, None, random.Random(0))
    assert "spouse" in rev and "marriage" not in rev


def _q(i: int) -> Question:
    return Question(f"q{i:03d}", "t", "t", 1, ["a"], ["b"])


@pytest.mark.parametrize("n", [0, 1, 30, 58, 59, 60, 100, 300, 589, 590, 1000, 4000])
def test_the_split_never_puts_a_training_label_in_calibration(n):
    pool = [_q(i) for i in range(n)]
    for seed in (0, 1, 2):
        train, cal = labels.reserve(pool, None, seed)
        assert not {q.id for q in train} & {q.id for q in cal}
        assert len(train) + len(cal) == n
        assert len(cal) == (n if n <= 59 else max(59, round(n * 0.1)))
    train, cal = labels.reserve(pool, 0.5, 0)  # an explicit share is taken as it is
    assert len(cal) == round(n * 0.5)


def test_needs_follow_the_pac_rule():
    need = {r.alpha: r for r in labels.needs()}
    assert need[0.05].one_group == 59 and need[0.1].one_group == 29
    assert need[0.05].per_group == 3 * 59 and need[0.3].per_group == 3 * 30
    assert "no alpha is attainable" in labels.needs_text(4)
    assert "smallest alpha it can attain is 0.05" in labels.needs_text(59)


def test_calibration_refuses_generated_questions():
    from cpr_neo4j.stages.calibrate import calibration_ids

    meta = {"calibration_ids": ["q1", f"{PREFIX}x:directed_by"], "labels_trained": 5}
    with pytest.raises(CprError, match="generated questions are training data only"):
        calibration_ids(None, "any", "m1", meta)
    assert calibration_ids(None, "any", "m1", {**meta, "calibration_ids": ["q1"]}) == {"q1"}


def test_the_questions_loader_refuses_generated_questions(tmp_path):
    from cpr_neo4j.loaders.triples import read_questions

    g = Generated("gen:a:r", "r of A", "a", "A", (Step("r", True),), ("b",))
    f = tmp_path / "g.jsonl"
    f.write_text(json.dumps(g.to_json()) + "\n")
    rows, problems = read_questions(f)
    assert rows.is_empty() and "training data only" in problems[0].reason


class _Fake(BaseHTTPRequestHandler):
    """WIRE TEST ONLY: a tiny in-process stand-in for an OpenAI-compatible chat server, to
    check the request the paraphraser sends and how it reads replies; it says nothing about
    a real model's paraphrases."""

    replies: list[str] = []
    seen: list[dict] = []

    def do_POST(self):  # noqa: N802 (http.server's name)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).seen.append({"path": self.path, **body})
        content = type(self).replies.pop(0)
        out = json.dumps({"choices": [{"message": {"content": content}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args):  # quiet
        pass


def test_paraphrase_wire_format():
    from cpr_neo4j.training.paraphrase import Paraphraser

    server = HTTPServer(("127.0.0.1", 0), _Fake)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        _Fake.replies = [
            json.dumps({"question": "Which films did Ana Lindqvist make?"}),
            json.dumps({"question": "Which films did she make?"}),  # name dropped: refused
            "not json",
            json.dumps({"question": "Ana Lindqvist?"}),  # the bare name asks nothing: refused
        ]
        _Fake.seen = []
        g = Generated("gen:a:r", "things directed by Ana Lindqvist?", "a", "Ana Lindqvist",
                      (Step("directed_by", False),), ("m",))  # fmt: skip
        p = Paraphraser(f"http://127.0.0.1:{server.server_port}", "some-model")
        out = p([g, g, g, g])
        assert out[0].text == "Which films did Ana Lindqvist make?"
        assert out[1].text == g.text and out[2].text == g.text and out[3].text == g.text
        assert (p.stats.rewritten, p.stats.failed) == (1, 3)
        req = _Fake.seen[0]
        assert req["path"] == "/v1/chat/completions" and req["model"] == "some-model"
        assert req["temperature"] == 0 and req["response_format"] == {"type": "json_object"}
        assert "Ana Lindqvist" in req["messages"][-1]["content"]
    finally:
        server.shutdown()


def test_label_input_parsing():
    from cpr_neo4j.training.labelling import Label, parse

    assert parse("1 3 5-7", 9) == Label("marked", numbers=(1, 3, 5, 6, 7))
    assert parse("2,4", 9) == Label("marked", numbers=(2, 4))
    assert parse("s", 9) == Label("skipped")
    assert parse("a Someone Else", 9) == Label("typed", typed="Someone Else")
    assert "outside 1-9" in parse("12", 9)
    assert "not a number" in parse("x", 9)
    assert isinstance(parse("", 9), str)


def test_label_files_resume_and_refuse_garbage(tmp_path):
    from cpr_neo4j.training.labelling import Choice, Label, Shown, done_ids, read_questions, save

    out = tmp_path / "l.jsonl"
    shown = Shown("label-1", "who directed X", ["x"], ["X"], [Choice("d", "D", "X -> D", 1, 0.1)])
    save(out, shown, Label("marked", numbers=(1,)))
    save(out, Shown("label-2", "q2", [], [], []), Label("skipped"))
    assert done_ids(out) == {"label-1", "label-2"}
    row = json.loads(out.read_text())
    assert row["answers"] == ["d"] and row["topics"] == ["x"] and row["hops"] == 1
    out.write_text(out.read_text() + "{broken\n")
    with pytest.raises(BadInput, match="not a label line"):
        done_ids(out)
    (tmp_path / "q.txt").write_text("# a comment\n\n  who   directed X \nwho directed X\n")
    assert read_questions(tmp_path / "q.txt") == ["who directed X"]
