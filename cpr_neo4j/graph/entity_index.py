"""In-memory index of one dataset's entity names: id -> name, and word-normalised name ->
ids, so that entity linking and answer names cost no Neo4j query per question.

An index belongs to one graph: it is built once per (server, database, dataset, graph
fingerprint) (graph/fingerprint.py; every ingest that changes the dataset changes it) and
kept in a small process-wide cache, so `cpr serve` builds it on its first question and
again only after an ingest. MetaQA's 42,797 entities: one page read, ~0.2 s in all.

Datasets with more than MAX_ENTITIES entities are not indexed (the index would hold most
of a gigabyte of process memory): `get` answers None for them, and for datasets without a
fingerprint, and callers fall back to today's Neo4j queries (graph/linking.py)."""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Iterable

from cpr_neo4j.graph.store import GraphStore

MAX_ENTITIES = 2_000_000  # ~0.6 GB (MetaQA: 12.6 MB for 42,797); above, query Neo4j
PAGE = 100_000  # entities per round trip while building
MAX_CACHED = 4  # indexes kept (datasets x fingerprints); the oldest used goes first
TOO_BIG = "too big"  # cached in place of an index: don't read a huge graph again

_WORD = re.compile(r"\w+")


def words(text: str) -> list[str]:
    """Lower-cased `\\w+` words: the normalisation of whole-word matching
    (graph/linking.py `_words` pads the same words with spaces)."""
    return _WORD.findall(text.lower())


def name_key(text: str) -> str:
    return " ".join(words(text))


class EntityIndex:
    """The entities of one dataset at one graph fingerprint."""

    def __init__(self, ids: Iterable[str], names: Iterable[str | None]):
        self.name_of: dict[str, str | None] = dict(zip(ids, names, strict=True))
        by_key: dict[str, list[str]] = {}
        for i, name in self.name_of.items():
            if name is not None:  # a nameless entity is found by its id only, as in Neo4j
                by_key.setdefault(name_key(name), []).append(i)
        self._by_key = {k: tuple(sorted(v)) for k, v in by_key.items()}
        # First word -> most words of a name starting with it: bounds the n-grams tried at
        # each position of a question (most words start no name at all).
        self._span: dict[str, int] = {}
        for k in self._by_key:
            w = k.split(" ")
            if w[0]:
                self._span[w[0]] = max(self._span.get(w[0], 0), len(w))

    def __len__(self) -> int:
        return len(self.name_of)

    def _entity(self, i: str) -> dict:
        return {"id": i, "name": self.name_of[i]}

    def by_id(self, ids: Iterable[str]) -> list[dict]:
        """As cypher/entities_by_id: the entities among `ids`."""
        return [self._entity(i) for i in ids if i in self.name_of]

    def by_name(self, name: str) -> list[dict]:
        """As cypher/entities_by_name: case-insensitive equal names, at most 20, by id. Equal
        lower-cased names have equal words, so the candidates are one key's ids."""
        lowered = name.lower()
        same = [i for i in self._by_key.get(name_key(name), ()) if self._lower(i) == lowered]
        return [self._entity(i) for i in same[:20]]

    def _lower(self, i: str) -> str:
        return (self.name_of[i] or "").lower()

    def verbatim(self, text: str) -> list[dict]:
        """Every entity whose name's words occur as consecutive whole words of `text`: the
        word n-grams of the question looked up among all names; in the order they occur
        (then by id), so an error listing tied names reads like the question."""
        w = words(text)
        found: dict[str, None] = {}  # ordered and without repeats
        for start, first in enumerate(w):
            for end in range(start + 1, min(start + self._span.get(first, 0), len(w)) + 1):
                found.update(dict.fromkeys(self._by_key.get(" ".join(w[start:end]), ())))
        return [self._entity(i) for i in found]


_CACHE: OrderedDict[tuple, EntityIndex | str] = OrderedDict()
_CACHE_LOCK = threading.Lock()
_BUILD_LOCK = threading.Lock()  # concurrent first questions build once, not once each


def get(
    store: GraphStore, dataset: str, graph: str | None = None, build_missing: bool = True
) -> EntityIndex | None:
    """The index of `dataset` at graph fingerprint `graph` (None: read the stored one, one
    small query); None when the dataset has no fingerprint or is too big to index.
    build_missing=False only returns one already built: a one-shot `cpr ask` with a
    [bracketed] entity needs one exact lookup, not the whole index (~0.2-0.6 s)."""
    graph = graph or _stored_fingerprint(store, dataset)
    if not graph:
        return None
    key = (store.settings.uri, store.database, dataset, graph)
    found = _cached(key)
    if found is None and not build_missing:
        return None
    if found is None:
        with _BUILD_LOCK:
            found = _cached(key)
            if found is None:
                found = build(store, dataset) or TOO_BIG
                with _CACHE_LOCK:
                    _CACHE[key] = found
                    # older fingerprints of this dataset are dead: drop them first
                    for old in [k for k in _CACHE if k[:3] == key[:3] and k != key]:
                        del _CACHE[old]
                    while len(_CACHE) > MAX_CACHED:
                        _CACHE.popitem(last=False)
    return found if isinstance(found, EntityIndex) else None


def _cached(key: tuple) -> EntityIndex | str | None:
    with _CACHE_LOCK:
        found = _CACHE.get(key)
        if found is not None:
            _CACHE.move_to_end(key)
        return found


def build(store: GraphStore, dataset: str, limit: int | None = None) -> EntityIndex | None:
    """Read the dataset's (id, name) pairs page by page; None past `limit` entities
    (default MAX_ENTITIES)."""
    limit = MAX_ENTITIES if limit is None else limit
    ids: list[str] = []
    names: list[str | None] = []
    after = ""  # below every id: ids are strings (loaders/base.py ENTITIES_SCHEMA)
    while True:
        row = store.read("entity_names_page", dataset=dataset, after=after, page=PAGE)[0]
        ids += row["ids"]
        names += row["names"]
        if len(ids) > limit:
            return None
        if len(row["ids"]) < PAGE:
            return EntityIndex(ids, names)
        after = max(row["ids"])


def _stored_fingerprint(store: GraphStore, dataset: str) -> str | None:
    rows = store.read("dataset_info", dataset=dataset)
    return rows[0]["d"].get("fingerprint") if rows else None


def names(
    store: GraphStore, dataset: str, ids: Iterable[str], graph: str | None = None
) -> dict[str, str]:
    """id -> name of the entities among `ids` (as records.entity_names, without a query
    when the dataset's index is already built: naming a few answers never builds one)."""
    ids = list(ids)
    index = get(store, dataset, graph, build_missing=False)
    if index is None:
        from cpr_neo4j.graph import records

        return records.entity_names(store, dataset, ids)
    return {e["id"]: e["name"] for e in index.by_id(ids)}


def clear() -> None:
    """Forget every index (tests; a process that wants the memory back)."""
    with _CACHE_LOCK:
        _CACHE.clear()
