"""Entity linking: question text -> topic entity ids of one dataset.

Names come from the dataset's in-memory entity index (graph/entity_index.py) when it has
one, so a question costs no Neo4j query; else from Neo4j (exact lookups and the full-text
index), as before the index existed. `cpr calibrate --linking text` and `cpr ask` both call
`link`, so a calibration covers the linking its questions are asked with."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from cpr_neo4j.errors import CprError
from cpr_neo4j.graph import entity_index
from cpr_neo4j.graph.store import GraphStore
from cpr_neo4j.text import bracket_mentions

_LUCENE_SPECIAL = re.compile(r'([+\-&|!(){}\[\]^"~*?:\\/])')
FULLTEXT_HITS = 50  # full-text hits checked for whole-word containment (no index only)


def _words(text: str) -> str:
    """Lower-cased words padded with spaces, for whole-word containment tests."""
    return " " + " ".join(entity_index.words(text)) + " "


def _by_id_or_name(store: GraphStore, dataset: str, mention: str) -> list[dict]:
    rows = store.read("entities_by_id", dataset=dataset, ids=[mention])
    return [dict(r) for r in rows] or [
        dict(r) for r in store.read("entities_by_name", dataset=dataset, name=mention)
    ]


def _fulltext_inside(store: GraphStore, dataset: str, text: str) -> list[dict]:
    """Entities among the full-text index's best hits whose name's words occur in `text`
    as whole words (a name outside those hits is missed: the index has no such limit)."""
    query = _LUCENE_SPECIAL.sub(r"\\\1", text.lower())
    hits = store.read("link_entities", dataset=dataset, text=query, limit=FULLTEXT_HITS)
    lowered = _words(text)
    return [dict(h) for h in hits if _words(h["name"]) in lowered]


def _one(find: Callable[[str], list[dict]], dataset: str, mention: str) -> dict:
    found = find(mention)
    if not found:
        raise CprError(
            f"unknown entity {mention!r} in dataset {dataset!r}: check the spelling, "
            "or pass --entity with an entity id"
        )
    if len(found) > 1:
        listed = ", ".join(f"{r['name']} (id {r['id']})" for r in found[:8])
        raise CprError(f"{mention!r} names several entities: {listed}; pass --entity ID")
    return found[0]


def link(
    store: GraphStore,
    dataset: str,
    text: str,
    entity: str | Sequence[str] | None = None,
    graph: str | None = None,
) -> tuple[list[dict], list[str]]:
    """(topics [{id, name}], notes). --entity wins (an id, else an exact name; repeated
    for a question with several topics), then
    [bracketed] mentions, then the longest entity name found verbatim as whole words in the
    question. graph: the dataset's fingerprint when the caller has read it (saves a query).
    """
    named = [entity] if isinstance(entity, str) else list(dict.fromkeys(entity or ()))
    mentions = named or bracket_mentions(text)
    # exact lookups need no index (one query each), unless one is built already
    index = entity_index.get(store, dataset, graph, build_missing=not mentions)

    def find(mention: str) -> list[dict]:
        if index is None:
            return _by_id_or_name(store, dataset, mention)
        return index.by_id([mention]) or index.by_name(mention)

    if mentions:
        return [_one(find, dataset, m) for m in mentions], []
    inside = _fulltext_inside(store, dataset, text) if index is None else index.verbatim(text)
    return _longest(inside)


def linker(store: GraphStore, dataset: str, graph: str | None = None) -> str:
    """How `link` finds names in question text for this dataset now: "all-names" (the
    entity index) or "fulltext-50" (only names among the full-text index's best hits; the
    only way before the index, and still for datasets too big for it). The two differ on a
    few questions (3 of 2,000 MetaQA dev questions), so a calibration that links from the
    text covers the linker it was made with: record it with the calibration."""
    indexed = entity_index.get(store, dataset, graph) is not None
    return "all-names" if indexed else f"fulltext-{FULLTEXT_HITS}"


def _longest(inside: list[dict]) -> tuple[list[dict], list[str]]:
    """The longest name found (ties between entities refused), other names as a note."""
    if not inside:
        raise CprError(
            "no entity of the graph found in the question: put its name in "
            "[brackets] or pass --entity NAME"
        )
    longest = max(len(h["name"]) for h in inside)
    best = [h for h in inside if len(h["name"]) == longest]
    if len({h["id"] for h in best}) > 1:
        listed = ", ".join(f"{h['name']} (id {h['id']})" for h in best[:8])
        raise CprError(
            f"the question names several entities equally well: {listed}; pass --entity ID"
        )
    others = sorted({h["name"] for h in inside} - {best[0]["name"]})
    notes = [f"also matched: {', '.join(others[:5])} (use --entity to choose)"] if others else []
    return [{"id": best[0]["id"], "name": best[0]["name"]}], notes
