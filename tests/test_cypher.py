"""Named statements and relationship-type quoting (no server needed)."""

from __future__ import annotations

import pytest

from cpr_neo4j.config import resource_dir
from cpr_neo4j.errors import BadInput
from cpr_neo4j.graph.cypher import rel_type, statement, with_rel_type

ALL = sorted(p.stem for p in resource_dir("cypher").glob("*.cypher"))


@pytest.mark.parametrize("name", ALL)
def test_every_statement_loads_and_says_what_it_returns(name):
    text = statement(name)
    assert text.startswith("//"), f"{name}.cypher must open with a comment saying what it returns"
    code = "\n".join(ln for ln in text.splitlines() if not ln.lstrip().startswith("//"))
    assert ";" not in code, "one statement per file"


def test_unknown_and_malformed_names_are_refused():
    with pytest.raises(FileNotFoundError):
        statement("no_such_statement")
    with pytest.raises(ValueError):
        statement("../pyproject")


@pytest.mark.parametrize(
    "name",
    ["directed_by", "people.person.place_of_birth", "has imdb rating", "rel-1:x/y", "ünïcode_rel"],
)
def test_valid_relation_names_are_backtick_quoted(name):
    assert rel_type(name) == f"`{name}`"


@pytest.mark.parametrize(
    "name",
    [
        "a`b",
        "x`]->() DETACH DELETE n //",
        "`",
        "rel\\u0060",
        "a\nb",
        "",
        " padded",
        "x" * 201,
        "DELETE n; MATCH (m)",
    ],
)
def test_injection_attempts_are_rejected(name):
    with pytest.raises(BadInput):
        rel_type(name)


def test_template_gets_only_validated_types():
    text = with_rel_type("merge_triples", "directed_by")
    assert "MERGE (h)-[:`directed_by`]->(t)" in text
    with pytest.raises(BadInput):
        with_rel_type("merge_triples", "a`]->(t) DETACH DELETE h //")
    with pytest.raises(ValueError):
        with_rel_type("neighbours", "directed_by")  # has no placeholder
