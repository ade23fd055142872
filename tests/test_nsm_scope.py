"""NSM loader subgraph membership, reproducible hash splits, and Freebase text (no Neo4j)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cpr_neo4j.errors import BadInput
from cpr_neo4j.loaders.nsm import load_nsm
from cpr_neo4j.loaders.registry import answerable_only, hash_split, parse_shares
from cpr_neo4j.search.base import Step
from cpr_neo4j.stages.ask import describe
from cpr_neo4j.text import cvt_label, is_mid, readable_relation

LINES = [
    {
        "id": "q1",
        "question": "who acts in coronation street",
        "entities": ["m.show"],
        "answers": [{"kb_id": "m.actor", "text": "William Roache"}],
        "subgraph": {
            "tuples": [
                ["m.show", "tv.tv_program.regular_cast", "m.cvt"],
                ["m.cvt", "tv.regular_tv_appearance.actor", "m.actor"],
            ]
        },
    },
    {
        "id": "q2",
        "question": "where was william roache born",
        "entities": ["m.actor"],
        "answers": [{"kb_id": "m.place", "text": "Ilkeston"}],
        "subgraph": {"tuples": [["m.actor", "people.person.nationality", "m.uk"]]},
    },
]


@pytest.fixture
def nsm_file(tmp_path: Path) -> Path:
    path = tmp_path / "dev_simple.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in LINES) + "\n")
    return path


def test_nsm_emits_each_question_subgraph(nsm_file: Path) -> None:
    ds = load_nsm(nsm_file)
    got = {(q, e) for q, e in ds.subgraphs.iter_rows()}
    assert got == {
        ("q1", "m.show"),
        ("q1", "m.cvt"),
        ("q1", "m.actor"),
        ("q2", "m.actor"),
        ("q2", "m.uk"),
    }  # the shared entity m.actor belongs to both; q2's answer is in neither subgraph
    kept = answerable_only(ds)
    assert kept.questions["id"].to_list() == ["q1"]
    assert set(kept.subgraphs["question"]) == {"q1"}
    assert kept.triples.height == ds.triples.height  # the graph stays the union


def test_hash_split_is_reproducible_and_follows_the_shares(nsm_file: Path) -> None:
    ds = load_nsm(nsm_file)
    a, b = hash_split(ds, (0.5, 0.0, 0.5)), hash_split(ds, (0.5, 0.0, 0.5))
    assert a.questions["split"].to_list() == b.questions["split"].to_list()
    assert set(hash_split(ds, (0.0, 0.0, 1.0)).questions["split"]) == {"test"}
    assert parse_shares("70,0,30") == pytest.approx((0.7, 0.0, 0.3))
    with pytest.raises(BadInput, match="TRAIN,DEV,TEST"):
        parse_shares("70,30")


def test_sample_membership_counts() -> None:
    from cpr_neo4j.loaders.registry import NSM_SAMPLE, load_dataset

    if not NSM_SAMPLE.is_file():
        pytest.skip("the NSM sample is not beside this checkout")
    ds = load_dataset("webqsp-nsm")
    assert ds.subgraphs["question"].n_unique() == 247  # 3 questions have no subgraph tuples
    assert answerable_only(ds).questions.height == 53  # the sample README's 53 / 250


def test_freebase_relation_text() -> None:
    assert readable_relation("people.person.place_of_birth") == "person place of birth"
    assert readable_relation("directed_by") == "directed by"
    assert readable_relation("m.0xyz") == "m.0xyz"  # an id, not words
    assert (
        readable_relation("base.schemastaging.person_extra.net_worth") == "person extra net worth"
    )
    assert is_mid("m.0abc_1") and is_mid("g.11b6") and not is_mid("Coronation Street")


def test_cvt_reads_as_its_type() -> None:
    cast = Step("tv.tv_program.regular_cast", True)
    actor = Step("tv.regular_tv_appearance.actor", True)
    assert cvt_label(cast, actor) == "[regular tv appearance]"
    back = (Step(actor.relation, False), Step(cast.relation, False))
    assert cvt_label(*back) == "[regular tv appearance]"  # reverse into the CVT: its head
    assert cvt_label(Step("cast", True), None) == "[cast]"
    assert cvt_label(None, None) == "[CVT]"
    names = {"m.show": "Coronation Street", "m.actor": "William Roache"}
    text = describe((cast, actor), ["m.show", "m.cvt", "m.actor"], names)
    assert text == (
        "Coronation Street -tv.tv_program.regular_cast-> [regular tv appearance] "
        "-tv.regular_tv_appearance.actor-> William Roache"
    )
    # a named intermediate and an unnamed answer at the end keep their names / ids
    assert describe((cast,), ["m.show", "m.cvt"], names).endswith("-> m.cvt")


def test_inverse_twins_and_back_steps_are_not_counted_twice() -> None:
    """Freebase stores many facts twice, as r and as its reverse property (film.film.starring
    / film.performance.film: 10% of the NSM sample's triples). TreeG keeps both relation
    sequences (they may score differently) but an answer is one entity at its best cost, and a
    step straight back along the same triple (or its twin) is never taken (simple paths)."""
    from cpr_neo4j.search.base import InMemoryGraph
    from cpr_neo4j.search.treeg import retrieve
    from tests.test_treeg import TableScorer

    graph = InMemoryGraph(
        [
            ("film", "film.film.starring", "cvt"),
            ("cvt", "film.performance.film", "film"),  # the twin of the triple above
            ("cvt", "film.performance.actor", "actor"),
        ]
    )
    costs = {
        ("film.film.starring",): 0.1,
        ("~film.performance.film",): 0.2,
        ("film.film.starring", "film.performance.actor"): 0.3,
        ("~film.performance.film", "film.performance.actor"): 0.4,
    }
    r = retrieve(graph, TableScorer(costs), None, ["film"], 2)
    assert len([c for c in r.candidates() if "actor" in c.ends]) == 2  # two sequences ...
    assert r.ranked_answers() == [("cvt", 0.1), ("actor", 0.3)]  # ... one answer each
    assert all("film" not in c.ends for c in r.candidates())  # never back to the topic
