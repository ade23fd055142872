"""bench/scale.py's graph scaling (tests/data/scaled_graph.py): disjoint copies sharing the
hubs, questions re-targeted."""

from __future__ import annotations

import json

import polars as pl
import pytest

from cpr_neo4j.loaders.triples import load_triples
from tests.data.scaled_graph import SEP, hub_ids, scale_graph, write_files

KB = pl.DataFrame(
    [
        ("Alien", "directed_by", "Ridley Scott"),
        ("Alien", "has_genre", "Horror"),
        ("Alien", "release_year", "1979"),
        ("Gladiator", "directed_by", "Ridley Scott"),
        ("Gladiator", "has_genre", "Drama"),
        ("Drama", "directed_by", "Someone"),  # a film titled like a genre: a film, not a hub
        ("Drama", "has_genre", "Horror"),
    ],
    schema=["head", "relation", "tail"],
    orient="row",
)
QUESTIONS = pl.DataFrame(
    {
        "id": ["q0", "q1", "q2"],
        "text": ["films by the director of [Alien]", "genre of [Gladiator]", "year of [Alien]"],
        "split": ["test"] * 3,
        "hops": [2, 1, 1],
        "topics": [["Alien"], ["Gladiator"], ["Alien"]],
        "answers": [["Gladiator"], ["Drama"], ["1979"]],
    },
    schema_overrides={"hops": pl.Int32},
)


def test_hubs_are_hub_relation_tails_that_are_never_heads():
    assert sorted(hub_ids(KB)) == ["1979", "Horror"]  # "Drama" is also a film


def test_copies_are_disjoint_but_share_the_hubs():
    k = 3
    s = scale_graph(KB, QUESTIONS, k)
    assert s.triples.height == KB.height * k and s.triples.unique().height == s.triples.height
    copy_of = pl.col("id").str.extract(f"{SEP}(\\d+)$").cast(pl.Int32).fill_null(0)
    per_copy = s.entities.filter(~pl.col("id").is_in(["1979", "Horror"])).with_columns(
        copy_of.alias("copy")
    )
    assert per_copy.group_by("copy").len().sort("copy")["len"].to_list() == [5] * k  # 5 non-hubs
    assert s.entities["id"].n_unique() == s.entities.height == 5 * k + 2
    assert set(s.entities.filter(pl.col("id") == f"Gladiator{SEP}2")["name"]) == {"Gladiator"}
    # every triple stays inside one copy, except edges into a shared hub
    ends = s.triples.with_columns(
        pl.col("head").str.extract(f"{SEP}(\\d+)$").fill_null("0").alias("h"),
        pl.col("tail").str.extract(f"{SEP}(\\d+)$").fill_null("0").alias("t"),
    )
    assert ends.filter(
        (pl.col("h") != pl.col("t")) & ~pl.col("tail").is_in(["1979", "Horror"])
    ).is_empty()
    # the hubs grow k-fold: each copy's films link to the same Horror node
    horror = s.triples.filter(pl.col("tail") == "Horror")
    assert horror.height == 2 * k and horror["head"].n_unique() == 2 * k


def test_questions_are_retargeted_to_their_copy():
    s = scale_graph(KB, QUESTIONS, 2)
    q = {r["id"]: r for r in s.questions.to_dicts()}
    assert q["q0"]["topics"] == ["Alien"] and q["q0"]["copy"] == 0  # copy 0 keeps the ids
    assert q[f"q1{SEP}1"]["topics"] == [f"Gladiator{SEP}1"]
    assert q[f"q1{SEP}1"]["answers"] == [f"Drama{SEP}1"]  # Drama the film is copied
    assert q["q2"]["answers"] == ["1979"]  # question 2 -> copy 0; a hub answer keeps its id
    assert q[f"q1{SEP}1"]["question"] == "genre of [Gladiator]"  # names unchanged: same masking
    # and each answer is still reached from the topic in the scaled graph
    edges = set(s.triples.select("head", "tail").iter_rows())
    assert (f"Gladiator{SEP}1", f"Drama{SEP}1") in edges


def test_written_files_load_with_the_triples_loader(tmp_path):
    s = scale_graph(KB, QUESTIONS, 2)
    paths = write_files(s, tmp_path)
    ds = load_triples(
        "scaled", paths["triples"], paths["entities"], paths["questions"], strict=True
    )
    assert ds.triples.height == s.triples.height and ds.entities.height == s.entities.height
    assert dict(ds.entities.iter_rows())[f"Alien{SEP}1"] == "Alien"
    assert (
        ds.questions.sort("id")["answers"].to_list() == s.questions.sort("id")["answers"].to_list()
    )
    first = json.loads(paths["questions"].read_text().splitlines()[0])
    assert set(first) == {"id", "question", "split", "hops", "topics", "answers"}


def test_refuses_ids_that_would_collide():
    with pytest.raises(ValueError, match="collide"):
        scale_graph(
            KB.with_columns(pl.col("head").str.replace("Alien", f"Alien{SEP}1")), QUESTIONS, 2
        )
