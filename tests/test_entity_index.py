"""The linker's stored index (graph/entity_index.py: names kept by Neo4j, read per
question) against the in-memory index of the same rows, on the real MetaQA: the same
readings, rules and errors; built at ingest, rebuilt when an ingest changes the graph, built
on first use for a dataset ingested before it; the acronym rule on a genealogy graph."""

from __future__ import annotations

import random

import polars as pl
import pytest

from cpr_neo4j.errors import CprError
from cpr_neo4j.graph import entity_index, records
from cpr_neo4j.graph.ingest import ingest
from cpr_neo4j.linking import resolve
from cpr_neo4j.loaders.base import build_dataset, questions_frame
from tests.conftest import drop_dataset

pytestmark = pytest.mark.neo4j
TINY = "test_entity_index"


def memory_index(store, dataset: str) -> entity_index.EntityIndex:
    """The in-memory index of the dataset's rows as the server has them (names, degrees)."""
    row = store.read("entity_names_page", dataset=dataset, after="", page=10**7)[0]
    relations = records.relation_text(store, dataset)
    return entity_index.EntityIndex(row["ids"], row["names"], row["degrees"], relations)


def readings(call):
    try:
        found = call()
    except CprError as exc:
        return str(exc)
    return found.rule, [[t["id"] for t in c.topics] for c in found.choices], found.notes


@pytest.fixture(scope="module")
def dev(store, metaqa):
    rows = records.questions(store, "metaqa", "dev")
    return random.Random(7).sample(rows, 2000)


@pytest.fixture(scope="module")
def index(store, metaqa):
    entity_index.clear()
    built = entity_index.get(store, "metaqa")
    assert len(built) == 42_797
    return built


@pytest.fixture(scope="module")
def memory(store, metaqa):
    return memory_index(store, "metaqa")


def test_the_stored_index_links_as_the_in_memory_one(store, dev, index, memory):
    """Every reading, rule and note alike, plain and bracketed, on 500 dev questions."""
    texts = [q.text.replace("[", "").replace("]", "") for q in dev[:400]]
    texts += [q.text for q in dev[400:500]]
    texts += ["who directed [tom hanks]", "what movies did Tom Hanks star in", "zzqx qqzz"]
    for text in texts:
        stored = readings(lambda: resolve.resolve(store, "metaqa", text))  # noqa: B023
        mem = readings(lambda: resolve.resolve(store, "metaqa", text, index=memory))  # noqa: B023
        assert stored == mem, text
    for name in ("John Krasinski", "tom hanks", "TOM HANKS", "no such entity 42", "Inception"):
        stored = readings(lambda: resolve.resolve(store, "metaqa", "q", name))  # noqa: B023
        mem = readings(lambda: resolve.resolve(store, "metaqa", "q", name, index=memory))  # noqa: B023
        assert stored == mem, name


def test_verbatim_finds_every_name_as_whole_words(dev, memory):
    """Against a scan of all 42,797 names (the definition of "found verbatim"); the index
    also finds names with a plural or possessive s dropped, so it may find more."""

    def padded(t):
        return " " + " ".join(entity_index.words(t)) + " "

    names = [(i, padded(n)) for i, n in memory.name_of.items() if n and entity_index.words(n)]
    for q in dev[:20]:
        text = q.text.replace("[", "").replace("]", "")
        every = {i for i, w in names if w in padded(text)}
        assert every <= {h["id"] for h in memory.verbatim(text)}, text


def test_errors_read_as_before(store, index):
    cases = [
        ("who directed [No Such Entity 42]", None),
        ("what", "no such entity 42"),
        ("zzqx qqzz", None),
    ]

    def messages():
        out = []
        for text, entity in cases:
            with pytest.raises(CprError) as exc:
                resolve.link(store, "metaqa", text, entity)
            out.append(str(exc.value))
        return out

    with_index = messages()
    assert "unknown entity 'No Such Entity 42'" in with_index[0]
    assert "unknown entity 'no such entity 42'" in with_index[1]
    assert "no entity of the graph found in the question" in with_index[2]
    # a name two entities share in any case: written as the question writes it wins ...
    tie = "what movies did Tom Hanks star in"
    found = resolve.resolve(store, "metaqa", tie)
    assert found.topics == [{"id": "Tom Hanks", "name": "Tom Hanks"}]
    assert found.rule == "exact case"
    # ... and in a lower-case question both are searched (linking/readings.py decides)
    found = resolve.resolve(store, "metaqa", tie.lower())
    assert {c.topics[0]["id"] for c in found.choices} == {"Tom Hanks", "tom hanks"}
    assert any("the best-scoring path decides" in n for n in found.notes)
    # a bracketed name shared in any case is searched from both too, never refused
    found = resolve.resolve(store, "metaqa", "who directed [TOM HANKS]")
    assert {c.topics[0]["id"] for c in found.choices} == {"Tom Hanks", "tom hanks"}


def test_names_match_entity_names(store, memory):
    ids = ["Tom Hanks", "tom hanks", "Inception", "no such id", *list(memory.name_of)[:500]]
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
    graph = store.read("dataset_info", dataset=TINY)[0]["d"]["fingerprint"]
    assert len(entity_index.get(store, TINY)) == 3
    reads = []
    read = store.read
    monkeypatch.setattr(store, "read", lambda what, /, **p: reads.append(what) or read(what, **p))
    assert len(entity_index.get(store, TINY, graph)) == 3 and reads == []  # kept, no query
    monkeypatch.setattr(store, "read", read)
    question = "what about alpha beta epsilon"
    assert resolve.link(store, TINY, question) == ([{"id": "Alpha Beta", "name": "Alpha Beta"}], [])
    with pytest.raises(CprError, match="unknown entity 'Alpha Beta Epsilon'"):
        resolve.link(store, TINY, "what about [Alpha Beta Epsilon]")
    # a re-ingest replaces the dataset (graph/changes.py): Alpha Beta and Delta go
    ingest(store, _tiny(("Alpha Beta Epsilon", "r", "Gamma")))  # a new fingerprint
    assert len(entity_index.get(store, TINY)) == 2
    words = store.query("MATCH (w:LinkWord {dataset: $d}) RETURN w.word AS w", {"d": TINY})[0]
    assert sorted(r["w"] for r in words) == ["alpha", "beta", "epsilon", "gamma"]  # no delta
    topics, notes = resolve.link(store, TINY, question)
    assert topics == [{"id": "Alpha Beta Epsilon", "name": "Alpha Beta Epsilon"}]
    assert notes == []  # "Alpha Beta" is inside the name taken: not worth a note
    assert not any(k[2] == TINY and k[3] == graph for k in entity_index._CACHE)  # dropped


def test_the_kept_index_outlives_the_connection_that_read_it(store, tiny, neo4j_settings):
    """A server's app and a test share the process cache; each reads through its own."""
    from cpr_neo4j.graph.store import GraphStore

    ingest(store, _tiny(("Alpha Beta", "r", "Gamma")))
    with GraphStore(neo4j_settings) as other:
        assert resolve.link(other, TINY, "alpha beta")[0][0]["id"] == "Alpha Beta"
    assert resolve.link(store, TINY, "[alpha beta]")[0][0]["id"] == "Alpha Beta"


def test_a_dataset_ingested_before_the_index_gets_it_on_first_use(store, tiny, monkeypatch):
    monkeypatch.setattr(entity_index, "PAGE", 2)  # several pages for three entities
    ingest(store, _tiny(("Alpha Beta", "r", "Gamma"), ("Gamma", "r", "Delta")))
    wipe = "MATCH (e:Entity {dataset: $d}) REMOVE e.link_key, e.link_stem"
    store.query(wipe, {"d": TINY}, write=True)
    store.query("MATCH (d:Dataset {name: $d}) REMOVE d.link_index", {"d": TINY}, write=True)
    store.query("DROP INDEX entity_link_key IF EXISTS", {}, write=True)  # an older server's
    entity_index.clear()
    assert resolve.link(store, TINY, "what about alpha beta")[0] == [
        {"id": "Alpha Beta", "name": "Alpha Beta"}
    ]
    shown = store.query("SHOW INDEXES YIELD name WHERE name = 'entity_link_key' RETURN name", {})
    assert [r["name"] for r in shown[0]] == ["entity_link_key"]  # lookups use an index again
    info = store.read("dataset_info", dataset=TINY)[0]["d"]
    assert info["link_index"] == entity_index.version(info["fingerprint"])
    assert info["link_entities"] == 3 and info["link_longest"] == 2
    assert resolve.linker(store, TINY) == resolve.LINKER


def test_a_whole_name_beats_an_acronym_on_a_genealogy_graph(store, tiny):
    """Issue 56.6 through Neo4j: "mom" spells Mary of Montpellier's initials, "dad" David
    Andrew Dunn's, "kid" Kira Ida Dunn's; a question that writes a two-word name whole
    links that name, and a family word alone is not read as initials in a one-case
    question, while initials that are no everyday word still are ("kid" in capitals too)."""
    ingest(
        store,
        _tiny(
            ("prince_william", "mother", "princess_diana"),
            ("james_of_montpellier", "mother", "Mary of Montpellier"),
            ("james_of_montpellier", "father", "David Andrew Dunn"),
            ("kira_ida_dunn", "father", "David Andrew Dunn"),
        ),
    )
    for text in ("who is the mom of prince_william", "who is prince william's dad"):
        assert resolve.link(store, TINY, text)[0] == [
            {"id": "prince_william", "name": "prince_william"}
        ], text
    for text in ("who is the mom", "name a kid", "who is the dad"):
        with pytest.raises(CprError, match="no entity of the graph found"):
            resolve.link(store, TINY, text)
    found = resolve.resolve(store, TINY, "who is the father of DAD")  # capitals: initials
    assert found.topics[0]["id"] == "David Andrew Dunn" and found.rule == "acronym"


def test_underscored_names_of_a_generic_graph_link_written_either_way(store, tiny):
    """Issue 33.4, through Neo4j: names that carry underscores (`Nathaniel_P._Banks`, as
    generic triples files often write them) link from a question that writes them with
    spaces, and the other way round."""
    ingest(store, _tiny(("Nathaniel_P._Banks", "r", "Boston"), ("Boston", "r", "Gamma")))
    for text in ("who was Nathaniel P. Banks", "who was nathaniel p banks", "Nathaniel_P._Banks"):
        assert resolve.link(store, TINY, text)[0] == [
            {"id": "Nathaniel_P._Banks", "name": "Nathaniel_P._Banks"}
        ], text
    ingest(store, _tiny(("Ada Lovelace", "r", "Boston")))
    assert resolve.link(store, TINY, "who was ada_lovelace")[0][0]["id"] == "Ada Lovelace"
