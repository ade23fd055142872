"""Topics as answers, a per-dataset convention: detected at ingest, recorded on the dataset
(and in its fingerprint), honoured by TreeG, open expansion and PUCT. In-memory graphs for
the search rules; real Neo4j and a generic-loader dataset over the MetaQA KB whose gold
answers include the topic (tests/data/make_topic_answers.py) for the rest."""

from __future__ import annotations

import json
import math
import random
from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import polars as pl
import pytest

from cpr_neo4j.errors import BadInput
from cpr_neo4j.loaders.base import build_dataset, questions_frame
from cpr_neo4j.loaders.topic_answers import count_with_topic, decide
from cpr_neo4j.search.answers import answer_columns
from cpr_neo4j.search.base import InMemoryGraph, RelPath, Step
from cpr_neo4j.search.open_expansion import expand_open
from cpr_neo4j.search.treeg import Job, retrieve, retrieve_many, retrieve_naive
from cpr_neo4j.stages.retrieval import RetrievalSettings, Retriever
from cpr_neo4j.training.puct import PuctCollector, shortest_paths
from tests.conftest import REPO, drop_dataset

# X's children are Y1, Y2; their mother is X: "who is the mother of X's children" = X
FAMILY = [
    ("X", "parent_of", "Y1"),
    ("X", "parent_of", "Y2"),
    ("Y1", "mother", "X"),
    ("Y2", "mother", "X"),
    ("Y1", "sibling", "Y2"),
    ("X", "born_in", "Paris"),
    ("Z", "born_in", "Paris"),
    ("Z", "parent_of", "Y3"),
]
CYCLE = ("parent_of", "mother")


class TableScorer:
    """Cost per relation sequence (step keys); anything else costs 10 + length."""

    model_id = "table"

    def __init__(self, table: dict[tuple[str, ...], float]):
        self.table = table

    def question(self, masked_text: str) -> str:
        return masked_text

    def score(self, ctx: object, paths: Sequence[RelPath]) -> np.ndarray:
        keys = [tuple(s.key() for s in p) for p in paths]
        return np.array([self.table.get(k, 10.0 + len(k)) for k in keys])

    def v_sem(self, ctx: object, paths: Sequence[RelPath]) -> np.ndarray:
        return self.score(ctx, paths)


class OracleScorer(TableScorer):
    """The question context is its template's relation path (step keys): it costs 0."""

    def score(self, ctx: object, paths: Sequence[RelPath]) -> np.ndarray:
        return np.array([0.0 if tuple(s.key() for s in p) == ctx else 5.0 for p in paths])


def _family(hops: int, on: bool, **kw):
    scorer = TableScorer({CYCLE: 0.0, ("parent_of",): 1.0})
    return retrieve(InMemoryGraph(FAMILY), scorer, "q", ["X"], hops, topic_answers=on, **kw)


def _entity_paths(r):
    return [(c, e, r.chain(c, e)) for c in r.candidates() for e in c.ends]


def test_topic_is_an_answer_only_when_the_setting_is_on():
    on, off = _family(2, True), _family(2, False)
    assert on.answer_costs()["X"] == 0.0 and on.ranked_answers()[0] == ("X", 0.0)
    path, chain, cost = on.witness("X")
    assert [s.key() for s in path] == list(CYCLE) and chain == ["X", "Y1", "X"] and cost == 0.0
    ids, costs = on.answer_columns()
    assert "X" in ids and costs[ids.index("X")] == 0.0
    assert "X" not in off.answer_costs() and "X" not in off.answer_columns()[0]
    assert all(e != "X" for c in off.candidates() for e in c.ends)


@pytest.mark.parametrize("on", [False, True])
def test_a_topic_end_is_never_expanded_and_paths_stay_simple(on):
    r = _family(3, on, beam_width=64, active=64)
    assert r.round_trips == 3
    for _, end, chain in _entity_paths(r):
        inner = chain[1:-1]
        assert "X" not in inner  # the topic is never passed through
        assert len(set(chain[:-1])) == len(chain) - 1  # simple up to the last step
        if end == "X":
            assert on and chain[0] == "X"  # the only repeat: a cycle back to the topic
        else:
            assert end not in chain[:-1]


def test_batches_naive_and_settings_carry_the_flag():
    scorer = TableScorer({CYCLE: 0.0})
    g = InMemoryGraph(FAMILY)
    one = retrieve(g, scorer, "q", ["X"], 3, topic_answers=True)
    naive = retrieve_naive(g, scorer, "q", ["X"], 3, topic_answers=True)
    jobs = [Job("q", ["X"]), Job("q", ["X"], topic_answers=False), ("q", ["Z"])]
    batch = retrieve_many(g, scorer, jobs, 3, topic_answers=True)
    assert one.per_hop == naive.per_hop == batch[0].per_hop
    assert "X" in batch[0].answer_costs() and "X" not in batch[1].answer_costs()
    assert (
        batch[2].topic_answers
        and batch[2].per_hop == retrieve(g, scorer, "q", ["Z"], 3, topic_answers=True).per_hop
    )
    plain = retrieve_many(g, scorer, [Job("q", ["X"])], 3)
    assert "X" not in plain[0].answer_costs()  # the default is off


def test_retriever_passes_the_setting_and_keeps_old_calibration_keys():
    off = RetrievalSettings(hops=2)
    assert "topic_answers" not in off.key()  # calibration ids made before it stay the same
    on = RetrievalSettings(hops=2, topic_answers=True)
    assert on.key()["topic_answers"] is True
    scorer = TableScorer({CYCLE: 0.0})
    for settings, expect in ((on, True), (off, False)):
        r = Retriever(None, "family", scorer, settings, source=InMemoryGraph(FAMILY))
        assert ("X" in r.run("q", ["X"]).answer_costs()) is expect
        [many] = r.run_many([("q", ["X"], None, None)])
        assert ("X" in many.answer_costs()) is expect


def _random_graph(seed: int) -> list[tuple[str, str, str]]:
    rng = random.Random(seed)
    ents = [f"e{i:02d}" for i in range(20)]
    return [(rng.choice(ents), rng.choice("abc"), rng.choice(ents)) for _ in range(60)]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("on", [False, True])
def test_treeg_columns_and_open_expansion_sets_agree(seed, on):
    """TreeG (integer columns) and open expansion (string sets) share the rule: with no
    budget binding, both reach the same entities by every sequence of length H."""
    triples = _random_graph(seed)
    topics = random.Random(seed).sample(sorted({h for h, _, _ in triples}), 2)
    scorer = TableScorer({})
    for hops in (1, 2, 3):
        r = retrieve(
            InMemoryGraph(triples), scorer, "q", topics, hops, 10**6, 10**6, topic_answers=on
        )
        tree = {c.path: set(c.ends) for c in r.per_hop[-1]}
        cost = lambda paths: np.zeros(len(paths))  # noqa: E731
        opened = expand_open(
            InMemoryGraph(triples), cost, topics, [math.inf] * hops, topic_answers=on
        )
        assert tree == {s.path: set(s.ends) for s in opened.sequences}
        assert on or not any(set(topics) & ends for ends in tree.values())


@pytest.mark.parametrize("seed", range(6))
def test_columns_named_lazily_by_node_equal_the_named_ones(seed):
    """A search's answer columns (its topic nodes and node id order known, as over Neo4j)
    drop topic ends by node and name answers on demand; without them every answer is
    named and ranked by id strings: the same columns either way, topic ends present."""
    triples = _random_graph(seed)
    topics = random.Random(seed).sample(sorted({h for h, _, _ in triples}), 2)
    r = retrieve(
        InMemoryGraph(triples), TableScorer({}), "q", topics, 3, 64, 64, topic_answers=True
    )
    names = r.candidates()[0].ends.names
    by_id = {n: i for i, n in enumerate(sorted(names, key=names.__getitem__))}
    r = replace(r, id_rank=lambda nodes: np.array([by_id[n] for n in nodes.tolist()]))
    assert r.topic_nodes is not None and len(r.topic_nodes) == 2
    named = replace(r, topic_nodes=None, id_rank=None)
    for keep_topics in (False, True):
        lazy = answer_columns(r, 0.5, keep_topics)
        eager = answer_columns(named, 0.5, keep_topics)
        assert lazy.named is None and eager.named is not None
        assert lazy.ids == eager.ids and [lazy.id_at(k) for k in range(len(lazy))] == eager.ids
        for a, b in (
            (lazy.cost, eager.cost),
            (lazy.length, eager.length),
            (lazy.surprisal, eager.surprisal),
            (lazy.nodes, eager.nodes),
        ):
            assert np.array_equal(a, b)
        assert keep_topics == bool(set(topics) & set(lazy.ids))


def test_gold_cycles_and_puct_pairs():
    g = InMemoryGraph(FAMILY)
    rng = random.Random(0)
    assert shortest_paths(g, ["X"], {"X"}, 2, 8, rng) == []  # off: a topic never answers
    cycles = shortest_paths(g, ["X"], {"X", "Y1"}, 2, 8, rng, topic_answers=True)
    ends = {(p.end, tuple(s.key() for s in p.steps)) for p in cycles}
    assert ("X", CYCLE) in ends and ("Y1", ("parent_of",)) in ends
    assert all(p.entities.count("X") <= 1 for p in cycles)
    scorer = TableScorer({CYCLE: 0.0})
    for on in (False, True):
        c = PuctCollector(g, scorer, rollouts=16, seed=1, topic_answers=on)
        pairs = c.collect(["X"], ["X"], "who is the mother of ENT's children", 2)
        positives = {p.end for p in c.last_positives}
        assert positives == ({"X"} if on else set())
        assert all(p.neg.end != "X" for p in pairs)  # X is gold: never a negative
        for p in pairs:  # a cycle's end is never extended
            assert "X" not in p.pos.entities[:-1] and "X" not in p.neg.entities[:-1]
        # gold paths given (Cypher's never join a topic to itself): cycles are added
        c.collect(["X"], ["X"], "q", 2, gold_paths=[])
        assert ({p.end for p in c.last_positives} == {"X"}) is on


def _questions(rows: list[tuple[str, list[str], list[str]]]):
    return questions_frame(
        [
            {
                "id": qid,
                "text": qid,
                "split": "test",
                "hops": 2,
                "topics": t,
                "answers": a,
                "_file": "f",
                "_line": i,
            }
            for i, (qid, t, a) in enumerate(rows)
        ]
    )


def test_detection_threshold_overrides_and_loader_conventions():
    triples = pl.DataFrame(FAMILY, schema=["head", "relation", "tail"], orient="row")
    many = [(f"q{i}", ["Y1"], ["Z"]) for i in range(199)]
    one = build_dataset("d", "f", triples, _questions([*many, ("c", ["X"], ["X"])]), [])
    both = [*many[:-1], ("c", ["X"], ["X", "Y1"]), ("e", ["X", "Z"], ["Z"])]
    two = build_dataset("d", "f", triples, _questions(both), [])
    assert count_with_topic(one.questions) == 1 and count_with_topic(two.questions) == 2
    ds, why = decide(one)
    assert not ds.topic_answers and "1 of 200 questions" in why.message()  # under 1%: off
    assert "--topic-answers on forces it" in why.message()
    ds, why = decide(two)
    assert ds.topic_answers
    assert why.message().endswith("topic answers on (auto: at least 1% of questions)")
    assert decide(two, "off")[0].topic_answers is False
    assert decide(one, "on")[0].topic_answers is True
    known = replace(two, topic_answers=False)  # a loader that knows (MetaQA): kept on auto
    assert decide(known)[0].topic_answers is False and "d's convention" in decide(known)[1].why
    with pytest.raises(BadInput, match="--topic-answers takes auto, on, off"):
        decide(one, "maybe")
    alone = build_dataset("d", "f", triples, _questions([]), [])  # a graph, no questions yet
    ds, why = decide(alone)
    assert not ds.topic_answers and "0 of 0" not in why.message()
    assert why.message().startswith("no questions to decide from: topic answers off (auto;")


def test_rog_rows_with_the_topic_among_answers_turn_it_on(tmp_path):
    from cpr_neo4j.loaders.rog import load_rog

    rows = [
        {
            "id": f"q{i}",
            "question": "who is the mother of x's children",
            "answer": ["X"] if i % 2 else ["Y1"],
            "q_entity": ["X"],
            "a_entity": ["X"] if i % 2 else ["Y1"],
            "graph": [list(t) for t in FAMILY],
        }
        for i in range(4)
    ]
    path = tmp_path / "test.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    ds, why = decide(load_rog("webqsp", path))
    assert ds.topic_answers and why.with_topic == 2 and why.questions == 4


# --- real Neo4j: a generic-loader dataset over the MetaQA KB ----------------------------

NAME = "topic_answers_test"
PER_TEMPLATE = 30


def _slice(tmp_path) -> tuple:
    """The first questions of every template in tests/data/topic_answers.jsonl, every KB
    triple touching their topics, and the person-movie triples touching an entity one hop
    away: every 2-hop walk along the templates' relations (hence every gold answer) is
    kept, while the hubs (genres, years) one hop away do not bring their thousands."""
    from tests.data.make_topic_answers import QUESTIONS, write_triples

    rows, taken = [], {}
    for line in QUESTIONS.read_text().splitlines():
        row = json.loads(line)
        template = row["id"].split(":")[0]
        if taken.get(template, 0) < PER_TEMPLATE:
            taken[template] = taken.get(template, 0) + 1
            rows.append(row)
    from cpr_neo4j.loaders.metaqa import load_metaqa

    kb = load_metaqa(hops=(1,), splits=("dev",)).triples
    topics = pl.Series([t for r in rows for t in r["topics"]]).unique().implode()
    near = kb.filter(pl.col("head").is_in(topics) | pl.col("tail").is_in(topics))
    ball = pl.concat([near["head"], near["tail"]]).unique().implode()
    people = pl.col("relation").is_in(["directed_by", "written_by", "starred_actors"])
    kept = kb.filter(
        pl.col("head").is_in(topics)
        | pl.col("tail").is_in(topics)
        | (people & (pl.col("head").is_in(ball) | pl.col("tail").is_in(ball)))
    )
    qs = tmp_path / "questions.jsonl"
    qs.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return write_triples(tmp_path / "triples.tsv.gz", sorted(kept.iter_rows())), qs, rows


def _ingest(triples, questions, *extra: str):
    from click.testing import CliRunner

    from cpr_neo4j.cli.main import cli

    args = ["ingest", NAME, "--triples", str(triples), "--questions", str(questions), *extra]
    out = CliRunner().invoke(cli, args)
    assert out.exit_code == 0, out.output
    return " ".join(out.stdout.split())  # rich wraps long lines


@pytest.fixture(scope="module")
def ingested(store, tmp_path_factory):
    drop_dataset(store, NAME)
    triples, questions, rows = _slice(tmp_path_factory.mktemp("topic_answers"))
    printed = _ingest(triples, questions)
    yield triples, questions, rows, printed
    drop_dataset(store, NAME)


@pytest.mark.neo4j
def test_detection_at_ingest_and_the_fingerprint_follows_the_setting(store, ingested):
    from cpr_neo4j.graph import fingerprint, records

    triples, questions, rows, printed = ingested
    n = sum(r["topics"][0] in r["answers"] for r in rows)
    assert n > 0.2 * len(rows)
    said = f"{n} of {len(rows)} questions have a topic entity among their gold answers"
    assert f"{said}: topic answers on" in printed
    assert records.topic_answers(store, NAME) is True
    first = fingerprint.current(store, NAME)
    _ingest(triples, questions)  # same setting: nothing changes
    assert fingerprint.current(store, NAME) == first
    assert "topic answers off (--topic-answers off)" in _ingest(
        triples, questions, "--topic-answers", "off"
    )
    assert records.topic_answers(store, NAME) is False
    second = fingerprint.current(store, NAME)
    assert second != first and fingerprint.stale_reason(first, second) is not None
    _ingest(triples, questions)  # auto again: on, and a model made while off is stale
    assert records.topic_answers(store, NAME) is True
    third = fingerprint.current(store, NAME)
    assert len({first, second, third}) == 3 and fingerprint.stale_reason(second, third)


@pytest.mark.neo4j
def test_treeg_on_neo4j_reaches_the_topic_only_with_the_setting(store, ingested):
    """An oracle scorer (the template's own relation path costs 0) isolates the search
    rule: on, every gold answer is reached, the topic included; off, never the topic."""
    from cpr_neo4j.graph.neighbours import Neo4jNeighbours
    from tests.data.make_topic_answers import TEMPLATES

    _, _, rows, _ = ingested
    paths = {name: tuple(Step(r, f).key() for r, f in path) for name, _, path in TEMPLATES}
    jobs = [Job(paths[r["id"].split(":")[0]], r["topics"]) for r in rows]
    source = Neo4jNeighbours(store, NAME)
    oracle = OracleScorer({})
    on = retrieve_many(source, oracle, jobs, 2, topic_answers=True)
    off = retrieve_many(source, oracle, jobs, 2, topic_answers=False)
    only_topic = 0
    for row, a, b in zip(rows, on, off, strict=True):
        topic, gold = row["topics"][0], set(row["answers"])
        assert gold <= a.answer_costs().keys(), row["id"]
        assert topic not in b.answer_costs() and gold - {topic} <= b.answer_costs().keys()
        if gold == {topic}:
            only_topic += 1
            assert not gold & b.answer_costs().keys()
            path, chain, cost = a.witness(topic)
            assert chain[0] == chain[-1] == topic and cost == 0.0
    assert only_topic > 0
    one = retrieve(source, oracle, jobs[0].ctx, jobs[0].topics, 2, topic_answers=True)
    assert one.per_hop == on[0].per_hop


@pytest.mark.neo4j
def test_metaqa_stays_off(store, metaqa):
    from cpr_neo4j.graph import records

    ds, _ = metaqa
    assert ds.topic_answers is False
    assert records.topic_answers(store, "metaqa") is False
    assert "metaqa's convention" in decide(ds)[1].why and count_with_topic(ds.questions) == 4


def test_generator_output_is_the_committed_file(tmp_path):
    from tests.data.make_topic_answers import QUESTIONS, write

    write(tmp_path / "q.jsonl")
    assert (tmp_path / "q.jsonl").read_bytes() == QUESTIONS.read_bytes()
    assert QUESTIONS.stat().st_size < 1_000_000
    assert REPO in QUESTIONS.parents


@pytest.mark.neo4j
def test_questions_added_to_a_graph_ingested_alone_decide_the_setting(store, ingested):
    """The own-graph path: a graph without questions decides nothing (off), so the first
    labelled questions added with `--questions` decide it (on here, the fingerprint moves);
    adding them again changes nothing; `--topic-answers off` on that path sets it off. A graph
    ingested with its questions keeps its decision when more are added."""
    from click.testing import CliRunner

    from cpr_neo4j.cli.main import cli
    from cpr_neo4j.graph import fingerprint, records

    triples, questions, rows, _ = ingested
    alone = NAME + "_alone"
    drop_dataset(store, alone)

    def run(*args: str) -> str:
        out = CliRunner().invoke(cli, list(args))
        assert out.exit_code == 0, out.output
        return " ".join(out.stdout.split())

    try:
        said = run("ingest", alone, "--triples", str(triples))
        assert "no questions to decide from: topic answers off" in said
        assert records.topic_answers(store, alone) is False
        before = fingerprint.current(store, alone)
        n = sum(r["topics"][0] in r["answers"] for r in rows)
        said = run("ingest", alone, "--questions", str(questions))
        assert f"{n} of {len(rows)} questions have a topic entity among their gold" in said
        assert "topic answers turned on" in said and "run `cpr calibrate` again" in said
        assert records.topic_answers(store, alone) is True
        after = fingerprint.current(store, alone)
        assert fingerprint.stale_reason(before, after) is not None
        assert "turned" not in run("ingest", alone, "--questions", str(questions))
        assert fingerprint.current(store, alone) == after
        said = run("ingest", alone, "--questions", str(questions), "--topic-answers", "off")
        assert "topic answers turned off" in said
        assert records.topic_answers(store, alone) is False
        # the dataset ingested with its questions (on): auto keeps it
        said = run("ingest", NAME, "--questions", str(questions))
        assert "decided when the graph was ingested with its questions" in said
        assert records.topic_answers(store, NAME) is True
    finally:
        drop_dataset(store, alone)
