"""The linker's index of one dataset's entity names, kept by Neo4j: every entity carries
its folded name (`link_key`), the same without plural or possessive s (`link_stem`) and its
initials (`link_acro`, `link_acro_short`), each behind a range index; every word of a name
is a (:LinkWord) with how many names hold it (and, when few do, which). It is built once
per graph (at ingest, or on first use for a dataset ingested before it: `ensure`), stored
with the graph, and read per question with one query for the question's own words and
word n-grams (two when a name is written only in part), so a process holds nothing that
grows with the graph: linking at 100x MetaQA's entities costs what it costs at 1x
(docs/benchmarks.md).

`EntityIndex` is the same index in memory, built from (id, name, degree) rows: the
reference the stored one is tested against, and what the offline benches and the rules'
unit tests link with. Both answer the rules (linking/name_rules.py, linking/resolve.py)
through the same methods; the stored one through `view`, a question's share of it."""

from __future__ import annotations

import copy
import re
import threading
import time
import unicodedata
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cpr_neo4j.graph.store import GraphStore
from cpr_neo4j.text import is_mid

if TYPE_CHECKING:  # polars stays off `cpr ask`'s imports (tests/test_ask_path_imports.py)
    import polars as pl

PAGE = 20_000  # entities per round trip while building
MAX_CACHED = 16  # datasets x fingerprints whose (small) index records are kept
RARE = 50  # names a word may occur in and still lead to a partial match
FIELDS = "link-v1"  # how link_key/stem/acro and LinkWord are computed: a change rebuilds
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


def initials_of(key: str) -> tuple[str, ...]:
    """The initials a folded name of two words or more is looked up by, with and without its
    little words ("usa", "usoa": United States of America; "jfk": John F. Kennedy)."""
    w = key.split(" ")
    if len(w) < 2:
        return ()
    letters = dict.fromkeys(("".join(x[0] for x in w), "".join(x[0] for x in w if x not in LITTLE)))
    return tuple(x for x in letters if 2 <= len(x) <= MAX_INITIALS)


@dataclass(frozen=True)
class LinkFields:
    """What the stored index keeps of one entity's name; "" where it has none (a nameless
    entity, or one named by a Freebase id, is found by its id only), so that an entity
    without the properties is one whose fields were never written."""

    key: str
    stem: str
    acro: str
    acro_short: str

    @classmethod
    def of(cls, name: str | None) -> LinkFields:
        key = name_key(name) if name is not None and not is_mid(name) else ""
        if not key:
            return cls("", "", "", "")
        full = "".join(x[0] for x in key.split(" "))
        letters = initials_of(key)
        acro = full if full in letters else ""
        short = next((x for x in letters if x != full), "")
        return cls(key, stem_key(key), acro, short)

    @classmethod
    def columns(cls, names: pl.Series) -> pl.DataFrame:
        """link_key, link_stem, link_acro, link_acro_short of each name (bulk import's
        CSV columns), computed once per distinct name."""
        import polars as pl

        distinct = names.unique()
        fields = [cls.of(n) for n in distinct.to_list()]
        table = pl.DataFrame(
            {
                "name": distinct,
                "link_key": [f.key for f in fields],
                "link_stem": [f.stem for f in fields],
                "link_acro": [f.acro for f in fields],
                "link_acro_short": [f.acro_short for f in fields],
            },
            schema_overrides={"name": names.dtype},
        )
        frame = names.to_frame("name")
        return frame.join(table, on="name", how="left", nulls_equal=True, maintain_order="left")


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
            for letters in initials_of(k):
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

    def view(self, toks, letters) -> EntityIndex:  # noqa: ARG002
        """What the rules need of the index for one question (`toks`: entity_index.tokens
        of its text): all of it, in memory."""
        return self

    def verbatim(self, text: str) -> list[dict]:
        """Every entity whose name's words occur as consecutive whole words of `text`: the
        word n-grams of the question looked up among all names; in the order they occur
        (then by id), so an error listing tied names reads like the question."""
        found: dict[str, None] = {}  # ordered and without repeats
        for _, _, ids in self.ngrams(words(text)):
            found.update(dict.fromkeys(ids))
        return [self._entity(i) for i in found]


class StoredIndex:
    """One dataset's stored index (see the module): what every question needs besides its
    own words (the entity count, the longest name, the relation words), a few hundred bytes,
    whatever the graph's size."""

    def __init__(self, dataset: str, entities: int, longest: int, relations, store=None):
        self.dataset, self.entities, self.longest = dataset, entities, longest
        self.relation_prefixes = {stem(w)[:5] for r in relations for w in words(r)}
        self.store: GraphStore | None = store  # None in the cache: `on` binds a connection

    def on(self, store: GraphStore) -> StoredIndex:
        """This index read through `store` (the cached one outlives any connection)."""
        bound = copy.copy(self)
        bound.store = store
        return bound

    def __len__(self) -> int:
        return self.entities

    def view(self, toks, letters) -> QuestionNames:
        """What the rules need of the index for one question (`toks`: entity_index.tokens
        of its text; `letters`: its words the acronym rule may look up, as
        linking/name_rules.py `acronym_words` picks them): one query."""
        return QuestionNames(self, toks, letters)

    def by_key(self, name: str) -> list[dict]:
        """Entities whose name has the same folded words as `name`, by id."""
        key = name_key(name)
        if not key:
            return []
        rows = self.store.read("entities_by_link_key", dataset=self.dataset, key=key)
        return [{"id": r["id"], "name": r["name"]} for r in rows]

    def by_name(self, name: str) -> list[dict]:
        """As cypher/entities_by_name (case-insensitive equal names, at most 20, by id), from
        the names with the same folded words (equal lower-cased names have equal words)."""
        lowered = name.lower()
        return [e for e in self.by_key(name) if (e["name"] or "").lower() == lowered][:20]


class QuestionNames:
    """A question's share of the stored index, read with one query: the entities named by
    the question's word n-grams (whole, or without plural s), its words' LinkWords, and the
    entities its words could be the initials of. Answers the rules as EntityIndex does."""

    def __init__(self, stored: StoredIndex, toks, letters):
        folded = [t[0] for t in toks]
        self.stored = stored
        self.relation_prefixes = stored.relation_prefixes
        n, longest = len(folded), stored.longest
        grams = [
            " ".join(folded[s:e]) for s in range(n) for e in range(s + 1, min(s + longest, n) + 1)
        ]
        self._grams = grams
        row = stored.store.read(
            "link_candidates",
            dataset=stored.dataset,
            keys=grams,
            stems=sorted({stem_key(g) for g in grams}),
            words=sorted(set(folded)),
            letters=sorted(letters),
        )[0]
        self.name_of: dict[str, str | None] = {}
        self.degree: dict[str, int] = {}
        self._by_key = self._group(row["by_key"])
        self._by_stem = self._group(row["by_stem"])
        self._by_initials = self._group(row["initials"])
        self.names_with = {w["word"]: w["names"] for w in row["words"]}
        self._keys_with = {w["word"]: tuple(w["keys"]) for w in row["words"] if w["keys"]}

    def _group(self, rows) -> dict[str, tuple[str, ...]]:
        out: dict[str, set[str]] = {}
        for r in rows:
            self.name_of[r["id"]] = r["name"]
            self.degree[r["id"]] = r["degree"]
            out.setdefault(r["key"], set()).add(r["id"])
        return {k: tuple(sorted(v)) for k, v in out.items()}

    def __len__(self) -> int:
        return len(self.stored)

    def _entity(self, i: str) -> dict:
        return {"id": i, "name": self.name_of[i]}

    def ngrams(self, folded: list[str]) -> list[tuple[int, int, tuple[str, ...]]]:
        """As EntityIndex.ngrams: every n-gram up to the longest name was looked up, which
        covers the n-grams its first-word bound lets it try."""
        out = []
        for start in range(len(folded)):
            for end in range(start + 1, min(start + self.stored.longest, len(folded)) + 1):
                key = " ".join(folded[start:end])
                ids = self._by_key.get(key) or self._by_stem.get(stem_key(key))
                if ids:
                    out.append((start, end, ids))
        return out

    def partial(self, folded: list[str]) -> list[str]:
        """As EntityIndex.partial; reads the LinkWords of those names' other words and
        their entities (one more query), which the partial rule weighs and takes."""
        out: dict[str, None] = {}
        for w in folded:
            out.update(dict.fromkeys(self._keys_with.get(w, ())))
        keys = list(out)
        more = {w for k in keys for w in k.split(" ")} - self.names_with.keys()
        todo = [k for k in keys if k not in self._by_key]
        if more or todo:
            row = self.stored.store.read(
                "link_partial", dataset=self.stored.dataset, words=sorted(more), keys=todo
            )[0]
            self.names_with.update({w["word"]: w["names"] for w in row["words"]})
            self._by_key.update(self._group(row["by_key"]))
        return keys

    def initials(self, word: str) -> tuple[str, ...]:
        return self._by_initials.get(word, ())

    def key_ids(self, key: str) -> tuple[str, ...]:
        return self._by_key.get(key, ())


_CACHE: OrderedDict[tuple, StoredIndex] = OrderedDict()
_CACHE_LOCK = threading.Lock()
_BUILD_LOCK = threading.Lock()  # concurrent first questions build once, not once each


def get(store: GraphStore, dataset: str, graph: str | None = None) -> StoredIndex | None:
    """The stored index of `dataset` at graph fingerprint `graph` (None: read the stored
    one), built first if the graph has none yet (`ensure`); None for a dataset without a
    fingerprint (not in Neo4j)."""
    info = None if graph else _info(store, dataset)  # a caller with the graph: no query
    graph = graph or (info or {}).get("fingerprint")
    if not graph:
        return None
    key = (store.settings.uri, store.database, dataset, graph)
    with _CACHE_LOCK:
        found = _CACHE.get(key)
        if found is not None:
            _CACHE.move_to_end(key)
            return found.on(store)
    with _BUILD_LOCK:
        info = info or _info(store, dataset)
        if info.get("link_index") != version(graph):
            build(store, dataset, graph)
            info = _info(store, dataset)
        relations = info.get("link_relations")
        if relations is None:  # an index built before it kept them
            from cpr_neo4j.graph import records

            relations = records.relation_text(store, dataset)
        found = StoredIndex(
            dataset,
            int(info.get("link_entities") or 0),
            int(info.get("link_longest") or 0),
            relations,
        )
    with _CACHE_LOCK:
        _CACHE[key] = found
        for old in [k for k in _CACHE if k[:3] == key[:3] and k != key]:
            del _CACHE[old]  # older fingerprints of this dataset are dead
        while len(_CACHE) > MAX_CACHED:
            _CACHE.popitem(last=False)
    return found.on(store)


def version(graph: str) -> str:
    """What the Dataset's link_index says when its index matches graph `graph`."""
    return f"{FIELDS}@{graph}"


def _info(store: GraphStore, dataset: str) -> dict:
    rows = store.read("dataset_info", dataset=dataset)
    return dict(rows[0]["d"]) if rows else {}


def ensure(store: GraphStore, dataset: str) -> None:
    """Build the stored index unless the dataset's graph already has it (ingest calls this
    once the graph is written and fingerprinted)."""
    info = _info(store, dataset)
    graph = info.get("fingerprint")
    if graph and info.get("link_index") != version(graph):
        build(store, dataset, graph)


def build(store: GraphStore, dataset: str, graph: str) -> int:
    """Write the LinkFields of every entity that has none yet (all of them when FIELDS
    changed), page by page (the process holds one page), then the LinkWords in Neo4j;
    returns the entities whose fields were written. Entities that an ingest adds have no
    fields yet, and a re-ingest that renames an entity drops its fields, so an ingest
    writes only those (`cpr ingest --bulk` writes them with the graph)."""
    from cpr_neo4j.graph.schema import bootstrap

    began = time.perf_counter()
    # A dataset ingested by an older cpr lacks the link indexes (bootstrap runs at ingest):
    # without them every lookup scans the dataset's entities (0.2 s a question on MetaQA).
    bootstrap(store)
    made_with = (_info(store, dataset).get("link_index") or "").split("@")[0]
    every = bool(made_with) and made_with != FIELDS  # fields of another cpr: rewrite all
    after, written = "", 0  # "" sorts below every id (ids are strings)
    while True:
        row = store.read("link_names_page", dataset=dataset, after=after, page=PAGE, every=every)
        ids = row[0]["ids"]
        if ids:
            fields = [LinkFields.of(n) for n in row[0]["names"]]
            store.write(
                "set_link_fields",
                dataset=dataset,
                ids=ids,
                keys=[f.key for f in fields],
                stems=[f.stem for f in fields],
                acros=[f.acro for f in fields],
                shorts=[f.acro_short for f in fields],
            )
        written += len(ids)
        if len(ids) < PAGE:
            break
        after = ids[-1]
    stamp = f"{version(graph)}/{time.time_ns()}"
    store.autocommit("link_words_build", dataset=dataset, rare=RARE, build=stamp)
    store.write("link_words_prune", dataset=dataset, build=stamp)
    summary = store.read("link_fields_summary", dataset=dataset)[0]
    from cpr_neo4j.graph import records

    store.write(
        "link_index_done",
        dataset=dataset,
        version=version(graph),
        entities=summary["entities"],
        longest=summary["longest"] or 0,
        relations=sorted(records.relation_text(store, dataset)),
        seconds=round(time.perf_counter() - began, 3),
    )
    return written


def names(
    store: GraphStore,
    dataset: str,
    ids: Iterable[str],
    graph: str | None = None,  # noqa: ARG001
) -> dict[str, str]:
    """id -> name of the entities among `ids` (one query: records.entity_names)."""
    from cpr_neo4j.graph import records

    return records.entity_names(store, dataset, list(ids))


def clear() -> None:
    """Forget every index record (tests)."""
    with _CACHE_LOCK:
        _CACHE.clear()
