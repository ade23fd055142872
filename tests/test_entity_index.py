"""The in-memory entity index against the Neo4j lookups it replaces, on the real MetaQA:
the same topics and errors, every name considered (not only the full-text index's best
hits), a rebuild after an ingest changes the graph, and the fallback for big graphs."""

from __future__ import annotations

import random
import re
import time

import polars as pl
import pytest

from cpr_neo4j.errors import CprError
from cpr_neo4j.graph import entity_index, linking, records
from cpr_neo4j.graph.ingest import ingest
from cpr_neo4j.loaders.base import build_dataset, questions_frame
from tests.conftest import drop_dataset

pytestmark = pytest.mark.neo4j
TINY = "test_entity_index"


def outcome(call):
    """Topics, or the error's first words and the ids it lists (the order of tied names
    differs: the full-text path lists them by score, the index by place in the question)."""
    try:
        return call()[0]
    except CprError as exc:
        text = str(exc)
        return text.split(":")[0], frozenset(re.findall(r"\(id ([^)]*)\)", text))


def link_all(store, texts, entities=None):
    entities = entities or [None] * len(texts)
    return [
        outcome(lambda: linking.link(store, "metaqa", t, e))  # noqa: B023
        for t, e in zip(texts, entities, strict=True)
    ]


def neo4j_only(monkeypatch):
    """link() without an index: the Neo4j queries it made before the index existed."""
    monkeypatch.setattr(entity_index, "get", lambda *a, **k: None)


@pytest.fixture(scope="module")
def dev(store, metaqa):
    rows = records.questions(store, "metaqa", "dev")
    return random.Random(7).sample(rows, 2000)


@pytest.fixture(scope="module")
def index(store, metaqa):
    entity_index.clear()
    began = time.perf_counter()
    built = entity_index.get(store, "metaqa")
    print(f"MetaQA entity index: {len(built)} entities in {time.perf_counter() - began:.2f} s")
    assert len(built) == 42_797
    return built


@pytest.mark.slow  # ~30 s: `make test-slow`
def test_unbracketed_questions_find_every_name_the_fulltext_path_finds(store, dev, index):
    """The index sees every name the full-text hits showed (and names beyond those 50)."""
    for q in dev:
        text = q.text.replace("[", "").replace("]", "")
        old_inside = linking._fulltext_inside(store, "metaqa", text)
        new_inside = index.verbatim(text)
        assert {h["id"] for h in old_inside} <= {h["id"] for h in new_inside}, text


def test_verbatim_finds_every_name_as_whole_words(dev, index):
    """Against a scan of all 42,797 names (the definition of "found verbatim"); the index
    also finds names with a plural or possessive s dropped, so it may find more."""

    def padded(t):
        return " " + " ".join(entity_index.words(t)) + " "

    names = [(i, padded(n)) for i, n in index.name_of.items() if n and entity_index.words(n)]
    for q in dev[:20]:
        text = q.text.replace("[", "").replace("]", "")
        every = {i for i, w in names if w in padded(text)}
        assert every <= {h["id"] for h in index.verbatim(text)}, text


def test_bracketed_questions_and_entities_link_as_before(store, dev, index, monkeypatch):
    texts = [q.text for q in dev[:400]]
    texts += ["who directed [tom hanks]", "who directed [TOM HANKS]", "[Inception] and [Up]"]
    entities = ["John Krasinski", "tom hanks", "TOM HANKS", "no such entity 42", "Inception"]
    new = link_all(store, texts), link_all(store, ["q"] * len(entities), entities)
    neo4j_only(monkeypatch)
    assert new == (link_all(store, texts), link_all(store, ["q"] * len(entities), entities))


def test_errors_read_as_before(store, index, monkeypatch):
    cases = [
        ("who directed [No Such Entity 42]", None),
        ("what", "no such entity 42"),
        ("zzqx qqzz", None),
    ]

    def messages():
        out = []
        for text, entity in cases:
            with pytest.raises(CprError) as exc:
                linking.link(store, "metaqa", text, entity)
            out.append(str(exc.value))
        return out

    with_index = messages()
    assert "unknown entity 'No Such Entity 42'" in with_index[0]
    assert "no entity of the graph found in the question" in with_index[2]
    neo4j_only(monkeypatch)
    assert messages() == with_index
    monkeypatch.undo()
    # a name two entities share in any case: written as the question writes it wins ...
    tie = "what movies did Tom Hanks star in"
    found = linking.resolve(store, "metaqa", tie)
    assert found.topics == [{"id": "Tom Hanks", "name": "Tom Hanks"}]
    assert found.rule == "exact case"
    # ... and in a lower-case question both are searched (stages/linked.py decides)
    found = linking.resolve(store, "metaqa", tie.lower())
    assert {c.topics[0]["id"] for c in found.choices} == {"Tom Hanks", "tom hanks"}
    assert any("the best-scoring path decides" in n for n in found.notes)
    # a bracketed name shared in any case is searched from both too, never refused
    found = linking.resolve(store, "metaqa", "who directed [TOM HANKS]")
    assert {c.topics[0]["id"] for c in found.choices} == {"Tom Hanks", "tom hanks"}


def test_names_match_entity_names(store, index):
    ids = ["Tom Hanks", "tom hanks", "Inception", "no such id", *list(index.name_of)[:500]]
    assert entity_index.names(store, "metaqa", ids) == records.entity_names(store, "metaqa", ids)


def _tiny(*triples):
    rows = pl.DataFrame(list(triples), schema=["head", "relation", "tail"], orient="row")
    frame = rows.with_row_index("line", 1)
    return build_dataset(TINY, "mem", frame, questions_frame(), [], False, None)


@pytest.fixture
def tiny(store):
    """A fresh tiny dataset each time: a dropped and re-ingested dataset starts again at
    generation 1, so its fingerprint can repeat: clear the cache along with it."""
    drop_dataset(store, TINY)
    entity_index.clear()
    yield
    drop_dataset(store, TINY)
    entity_index.clear()


def test_index_is_rebuilt_after_an_ingest_changes_the_graph(store, tiny, monkeypatch):
    monkeypatch.setattr(entity_index, "PAGE", 2)  # several pages for three entities
    ingest(store, _tiny(("Alpha Beta", "r", "Gamma"), ("Gamma", "r", "Delta")))
    first = entity_index.get(store, TINY)
    assert len(first) == 3 and entity_index.get(store, TINY) is first  # cached
    question = "what about alpha beta epsilon"
    assert linking.link(store, TINY, question) == ([{"id": "Alpha Beta", "name": "Alpha Beta"}], [])
    with pytest.raises(CprError, match="unknown entity 'Alpha Beta Epsilon'"):
        linking.link(store, TINY, "what about [Alpha Beta Epsilon]")
    ingest(store, _tiny(("Alpha Beta Epsilon", "r", "Gamma")))  # a new fingerprint
    second = entity_index.get(store, TINY)
    assert second is not first and len(second) == 4
    topics, notes = linking.link(store, TINY, question)
    assert topics == [{"id": "Alpha Beta Epsilon", "name": "Alpha Beta Epsilon"}]
    assert notes == []  # "Alpha Beta" is inside the name taken: not worth a note
    assert not any(k[2] == TINY and v is first for k, v in entity_index._CACHE.items())


def test_a_graph_over_the_cap_falls_back_to_neo4j(store, tiny, monkeypatch):
    ingest(store, _tiny(("Alpha Beta", "r", "Gamma"), ("Gamma", "r", "Delta")))
    monkeypatch.setattr(entity_index, "MAX_ENTITIES", 2)
    assert entity_index.get(store, TINY) is None
    reads = []
    read = store.read
    monkeypatch.setattr(store, "read", lambda what, /, **p: reads.append(what) or read(what, **p))
    assert entity_index.get(store, TINY) is None  # remembered: not read again
    assert reads == ["dataset_info"]
    assert linking.link(store, TINY, "[gamma]")[0] == [{"id": "Gamma", "name": "Gamma"}]
    assert "entities_by_name" in reads
    assert linking.linker(store, TINY) == "fulltext-50"
    monkeypatch.setattr(entity_index, "MAX_ENTITIES", 3)
    entity_index.clear()
    assert linking.linker(store, TINY) == linking.LINKER


def test_underscored_names_of_a_generic_graph_link_written_either_way(store, tiny):
    """Issue 33.4, through Neo4j: names that carry underscores (`Nathaniel_P._Banks`, as
    generic triples files often write them) link from a question that writes them with
    spaces, and the other way round."""
    ingest(store, _tiny(("Nathaniel_P._Banks", "r", "Boston"), ("Boston", "r", "Gamma")))
    for text in ("who was Nathaniel P. Banks", "who was nathaniel p banks", "Nathaniel_P._Banks"):
        assert linking.link(store, TINY, text)[0] == [
            {"id": "Nathaniel_P._Banks", "name": "Nathaniel_P._Banks"}
        ], text
    ingest(store, _tiny(("Ada Lovelace", "r", "Boston")))
    assert linking.link(store, TINY, "who was ada_lovelace")[0][0]["id"] == "Ada Lovelace"
