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
import unicodedata
from collections import OrderedDict
from collections.abc import Iterable

from cpr_neo4j.graph.store import GraphStore
from cpr_neo4j.text import is_mid

MAX_ENTITIES = 2_000_000  # ~0.6 GB (MetaQA: 12.6 MB for 42,797); above, query Neo4j
PAGE = 100_000  # entities per round trip while building
MAX_CACHED = 4  # indexes kept (datasets x fingerprints); the oldest used goes first
RARE = 50  # names a word may occur in and still lead to a partial match
TOO_BIG = "too big"  # cached in place of an index: don't read a huge graph again
MAX_INITIALS = 5  # the longest acronym looked up ("usa", "nasa", "nato")
LITTLE = frozenset({"a", "an", "and", "de", "for", "in", "of", "on", "the", "to"})  # acronyms skip

# Words are runs of letters and digits: underscores, apostrophes and other punctuation
# separate them ("Nathaniel_P._Banks" and "Nathaniel P. Banks" read alike), accents and
# case are folded ("Michèle" = "michele"), so a name matches however a user writes it.
_WORD = re.compile(r"[^\W_]+")
_MARKS = re.compile(r"[\u0300-\u036f]")  # combining accents left by NFKD


def fold(word: str) -> str:
    """One word without accents, case-folded."""
    return _MARKS.sub("", unicodedata.normalize("NFKD", word)).casefold()


def tokens(text: str) -> list[tuple[str, int, int]]:
    """(folded word, start, end) of each word of `text`, positions in the original text
    (for masking the very words a mention used)."""
    out = []
    for m in _WORD.finditer(text):
        if w := fold(m.group()):
            out.append((w, m.start(), m.end()))
    return out


def words(text: str) -> list[str]:
    """The folded words of `text`: the normalisation of whole-word matching."""
    return [w for m in _WORD.finditer(text) if (w := fold(m.group()))]


def name_key(text: str) -> str:
    return " ".join(words(text))


def stem(word: str) -> str:
    """A folded word without a plural or possessive s (`vaders` -> `vader`)."""
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def stem_key(key: str) -> str:
    return " ".join(stem(w) for w in key.split(" "))


def stripped(text: str) -> str:
    """Accents removed, case kept: how a name is compared when case matters."""
    return " ".join(
        _MARKS.sub("", unicodedata.normalize("NFKD", m.group())) for m in _WORD.finditer(text)
    )


class EntityIndex:
    """The entities of one dataset at one graph fingerprint: names by folded words, each
    entity's degree (a weak prior between homonyms), and rare name words -> entities (for
    names a question writes only in part: "dumbledore" for "Professor Albus Dumbledore")."""

    def __init__(
        self,
        ids: Iterable[str],
        names: Iterable[str | None],
        degrees: Iterable[int] | None = None,
        relations: Iterable[str] = (),
    ):
        self.name_of: dict[str, str | None] = dict(zip(ids, names, strict=True))
        self.degree: dict[str, int] = (
            dict(zip(self.name_of, degrees, strict=True)) if degrees is not None else {}
        )
        by_key: dict[str, list[str]] = {}
        for i, name in self.name_of.items():
            # a nameless entity, or one named by a Freebase id, is found by its id only
            if name is not None and not is_mid(name):
                by_key.setdefault(name_key(name), []).append(i)
        self._by_key = {k: tuple(sorted(v)) for k, v in by_key.items() if k}
        # the same names with each word's plural or possessive s dropped ("darth vaders")
        by_stem: dict[str, set[str]] = {}
        for k, v in self._by_key.items():
            by_stem.setdefault(stem_key(k), set()).update(v)
        self._by_stem = {k: tuple(sorted(v)) for k, v in by_stem.items()}
        # words of the graph's relation names: a question's "language" or "children" points
        # to a relation, so an entity named only by such words is a weak candidate
        self.relation_prefixes = {stem(w)[:5] for r in relations for w in words(r)}
        # First word -> most words of a name starting with it: bounds the n-grams tried at
        # each position of a question (most words start no name at all).
        self._span: dict[str, int] = {}
        by_word: dict[str, set[str]] = {}
        for k in self._by_key:
            w = k.split(" ")
            for first in {w[0], stem(w[0])}:
                self._span[first] = max(self._span.get(first, 0), len(w))
            for word in set(w):
                by_word.setdefault(word, set()).add(k)
        # initials of names of two words or more, with and without their little words
        # ("usa", "usoa": United States of America; "jfk": John F. Kennedy)
        by_initials: dict[str, set[str]] = {}
        for k, v in self._by_key.items():
            w = k.split(" ")
            if len(w) < 2:
                continue
            for letters in {"".join(x[0] for x in w), "".join(x[0] for x in w if x not in LITTLE)}:
                if 2 <= len(letters) <= MAX_INITIALS:
                    by_initials.setdefault(letters, set()).update(v)
        self._by_initials = {k: tuple(sorted(v)) for k, v in by_initials.items()}
        # a word in many names says little about which: only rare ones lead to partial matches
        self._keys_with = {w: tuple(sorted(ks)) for w, ks in by_word.items() if len(ks) <= RARE}
        self.names_with = {w: len(ks) for w, ks in by_word.items()}

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

    def by_key(self, name: str) -> list[dict]:
        """Entities whose name has the same folded words (case, accents, punctuation and
        underscores aside): `--entity "nathaniel p banks"` finds `Nathaniel_P._Banks`."""
        return [self._entity(i) for i in self._by_key.get(name_key(name), ())]

    def _lower(self, i: str) -> str:
        return (self.name_of[i] or "").lower()

    def ngrams(self, folded: list[str]) -> list[tuple[int, int, tuple[str, ...]]]:
        """(first word, end word, entity ids) of every name whose folded words occur as
        consecutive words of the question, in the order they occur."""
        out = []
        for start, first in enumerate(folded):
            reach = max(self._span.get(first, 0), self._span.get(stem(first), 0))
            for end in range(start + 1, min(start + reach, len(folded)) + 1):
                key = " ".join(folded[start:end])
                ids = self._by_key.get(key) or self._by_stem.get(stem_key(key))
                if ids:
                    out.append((start, end, ids))
        return out

    def partial(self, folded: list[str]) -> list[str]:
        """Keys of the names that share a rare word with the question, in order."""
        out: dict[str, None] = {}
        for w in folded:
            out.update(dict.fromkeys(self._keys_with.get(w, ())))
        return list(out)

    def initials(self, word: str) -> tuple[str, ...]:
        """Entities whose name's initials spell `word` (folded), by id."""
        return self._by_initials.get(word, ())

    def key_ids(self, key: str) -> tuple[str, ...]:
        return self._by_key.get(key, ())

    def verbatim(self, text: str) -> list[dict]:
        """Every entity whose name's words occur as consecutive whole words of `text`: the
        word n-grams of the question looked up among all names; in the order they occur
        (then by id), so an error listing tied names reads like the question."""
        found: dict[str, None] = {}  # ordered and without repeats
        for _, _, ids in self.ngrams(words(text)):
            found.update(dict.fromkeys(ids))
        return [self._entity(i) for i in found]


_CACHE: OrderedDict[tuple, EntityIndex | str] = OrderedDict()
_CACHE_LOCK = threading.Lock()
_BUILD_LOCK = threading.Lock()  # concurrent first questions build once, not once each


def get(
    store: GraphStore, dataset: str, graph: str | None = None, build_missing: bool = True
) -> EntityIndex | None:
    """The index of `dataset` at graph fingerprint `graph` (None: read the stored one, one
    small query); None when the dataset has no fingerprint or is too big to index.
    build_missing=False only returns one already built (a named or [bracketed] entity
    builds it in graph/linking.py `_find` when it is not an id: folded names need it)."""
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
    degrees: list[int] = []
    after = ""  # below every id: ids are strings (loaders/base.py ENTITIES_SCHEMA)
    while True:
        row = store.read("entity_names_page", dataset=dataset, after=after, page=PAGE)[0]
        ids += row["ids"]
        names += row["names"]
        degrees += row["degrees"]
        if len(ids) > limit:
            return None
        if len(row["ids"]) < PAGE:
            from cpr_neo4j.graph import records

            return EntityIndex(ids, names, degrees, records.relation_text(store, dataset))
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
