"""Entity linking: question text -> topic entity ids of one dataset."""

from __future__ import annotations

import re

from cpr_neo4j.errors import CprError
from cpr_neo4j.graph.store import GraphStore
from cpr_neo4j.text import bracket_mentions

_LUCENE_SPECIAL = re.compile(r'([+\-&|!(){}\[\]^"~*?:\\/])')
_WORD = re.compile(r"\w+")


def _words(text: str) -> str:
    """Lower-cased words padded with spaces, for whole-word containment tests."""
    return " " + " ".join(_WORD.findall(text.lower())) + " "


def _by_id_or_name(store: GraphStore, dataset: str, mention: str) -> list[dict]:
    rows = store.read("entities_by_id", dataset=dataset, ids=[mention])
    return [dict(r) for r in rows] or [
        dict(r) for r in store.read("entities_by_name", dataset=dataset, name=mention)
    ]


def _one(store: GraphStore, dataset: str, mention: str) -> dict:
    found = _by_id_or_name(store, dataset, mention)
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
    store: GraphStore, dataset: str, text: str, entity: str | None = None
) -> tuple[list[dict], list[str]]:
    """(topics [{id, name}], notes). --entity wins, then [bracketed] mentions, then the
    full-text index: the longest entity name found verbatim in the question."""
    if entity:
        return [_one(store, dataset, entity)], []
    mentions = bracket_mentions(text)
    if mentions:
        return [_one(store, dataset, m) for m in mentions], []
    query = _LUCENE_SPECIAL.sub(r"\\\1", text.lower())
    hits = store.read("link_entities", dataset=dataset, text=query, limit=50)
    lowered = _words(text)
    inside = [dict(h) for h in hits if _words(h["name"]) in lowered]
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
