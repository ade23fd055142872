"""Entity linking: question text -> topic entities of one dataset, with the reasons.

`resolve` is the linker that `cpr ask`, `cpr serve` and `cpr calibrate --linking text`
share, so a text-linked calibration covers the linking its questions are asked with.
Rules, in order (graph/entity_index.py folds case, accents, punctuation and underscores):

1. Named topics: --entity / the request's `entity` (an id, else a name in any case or
   spelling), then [bracketed] mentions: exact lookups.
2. Whole names: every entity whose folded name occurs as consecutive words of the
   question. A name inside a longer one found there ("Scott" in "Ridley Scott") is dropped;
   the most words win, then, when the question is written in mixed case, names written
   exactly as the question writes them (`Ridley Scott` over the tag `ridley scott`).
   Acronyms, only where no whole name (but everyday or relation words) is found: a word
   that spells the initials of a name ("jfk": John F. Kennedy, "usa": United States of
   America), written in capitals in a mixed-case question, and in a one-case one only if
   it has three letters or more, is no everyday or family word ("mom", "dad", "kid") and
   no name or relation of the graph uses it as a word; it counts as many words as it has
   letters. A name the question writes whole is never displaced by an acronym.
3. Partial names, only when no whole name (or acronym) is found: names sharing a rare
   word with the question ("dumbledore" -> "Professor Albus Dumbledore"), by the share of
   the name's words the question holds (weighted by rarity).
4. What is still tied (at most MAX_TIED, by degree, then id) goes to the search: the
   caller runs TreeG from each and takes the one whose best path scores best
   (linking/readings.py); a choice made that way is recorded as such.

The candidates come from the index Neo4j keeps of the dataset's names (entity_index.py:
one query per question, two for a partial name), the same at every graph size."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from cpr_neo4j.errors import CprError
from cpr_neo4j.graph import entity_index
from cpr_neo4j.graph.entity_index import EntityIndex
from cpr_neo4j.graph.store import GraphStore
from cpr_neo4j.linking.name_rules import (
    acronym_words,
    acronyms,
    mixed_case,
    partial,
    weak,
    written_as,
)
from cpr_neo4j.text import bracket_mentions

RUNNERS_UP = 0  # readings beyond the tied ones handed to the search too (bench/linking_search.py)
ACRONYMS_WITH_WHOLE = False  # ablation only (bench): v3's acronyms beside whole names
MAX_TIED = 4  # candidates searched from when the names cannot decide
# recorded with a text-linked calibration: the rules above (v3: acronyms; v4: an acronym
# never displaces a whole name, no everyday word as initials, candidates from Neo4j)
LINKER = "names-v4"


@dataclass
class Choice:
    """One way to read the question: its topics and the question words they used."""

    topics: list[dict]  # [{id, name}]
    mentions: list[tuple[int, int]]  # (start, end) character spans in the question text


@dataclass
class Linking:
    """What the linker found and why; `choices` has one entry unless names tied."""

    choices: list[Choice]
    rule: str  # named | bracketed | whole name | exact case | partial name
    notes: list[str] = field(default_factory=list)
    others: list[dict] = field(default_factory=list)  # names found but not taken

    @property
    def topics(self) -> list[dict]:
        return self.choices[0].topics

    def record(self, taken: int = 0, how: str | None = None) -> dict:
        """The linker's decision for an :Ask record and the answer: candidates, the one
        taken, and why."""
        return {
            "rule": how or self.rule,
            "taken": [t["id"] for t in self.choices[taken].topics],
            "candidates": [[t["id"] for t in c.topics] for c in self.choices],
            "also_found": [o["id"] for o in self.others[:8]],
        }


def _by_id_or_name(store: GraphStore, dataset: str, mention: str) -> list[dict]:
    rows = store.read("entities_by_id", dataset=dataset, ids=[mention])
    return [dict(r) for r in rows] or [
        dict(r) for r in store.read("entities_by_name", dataset=dataset, name=mention)
    ]


def _find(store: GraphStore, dataset: str, index, mention: str) -> list:
    """A named entity: its id, else every entity whose name has the same folded words
    (linking/named.py: the one rule `--entity` and the named curves share)."""
    if isinstance(index, EntityIndex):
        return index.by_id([mention]) or index.by_key(mention)
    by_id = store.read("entities_by_id", dataset=dataset, ids=[mention])
    if by_id:  # an id: one query
        return [dict(r) for r in by_id]
    if index is None:  # a dataset with no fingerprint yet: its name, any case
        return _by_id_or_name(store, dataset, mention)
    return index.by_key(mention)


def _named(store, dataset, index, mention: str, field_name: str) -> list[dict]:
    found = _find(store, dataset, index, mention)
    if not found:
        raise CprError(
            f"unknown entity {mention!r} in dataset {dataset!r}: check the spelling, "
            f"or give {field_name} an entity id"
        )
    return found


def resolve(
    store: GraphStore,
    dataset: str,
    text: str,
    entity: str | Sequence[str] | None = None,
    graph: str | None = None,
    field_name: str = "--entity",
    index: EntityIndex | None = None,
) -> Linking:
    """The topic entities of `text` (see the module's rules). field_name: how the caller's
    user names the entity option in messages (`--entity` on the command line, `entity`
    over HTTP). graph: the dataset's fingerprint when the caller has read it. index: an
    index built elsewhere (bench/linking.py builds one from the dataset's files)."""
    named = [entity] if isinstance(entity, str) else list(dict.fromkeys(entity or ()))
    mentions = named or bracket_mentions(text)
    if index is None:
        index = entity_index.get(store, dataset, graph)
    if mentions:
        rule = "named" if named else "bracketed"
        found = [_named(store, dataset, index, m, field_name) for m in mentions]
        # a name several entities share (any case): one choice per entity, the search decides
        options = [f for f in found if len(f) > 1]
        if len(options) > 1 or (options and len(options[0]) > MAX_TIED):
            listed = "; ".join(
                ", ".join(f"{r['name']} (id {r['id']})" for r in f[:8]) for f in options
            )
            raise CprError(f"names shared by several entities: {listed}; give {field_name} ids")
        base = [f[0] for f in found if len(f) == 1]
        alts = options[0] if options else [None]
        choices = [Choice(base + ([a] if a else []), []) for a in alts]
        return Linking([_plain(c) for c in choices], rule)
    if index is None:
        raise CprError(f"dataset {dataset!r} is not in Neo4j: run `cpr ingest {dataset}`")
    return _from_index(index, text, field_name)


def _plain(c: Choice) -> Choice:
    return Choice([{"id": t["id"], "name": t["name"]} for t in c.topics], c.mentions)


def _not_found(field_name: str) -> CprError:
    return CprError(
        "no entity of the graph found in the question: check the spelling of its name, "
        f"put it in [brackets], or give {field_name} NAME"
    )


def _also(others: list[dict], field_name: str) -> list[str]:
    names = sorted({o["name"] for o in others if o.get("name")})
    if not names:
        return []
    return [f"also found in the question: {', '.join(names[:5])} (give {field_name} to choose)"]


def _from_index(index, text: str, field_name: str) -> Linking:
    toks = entity_index.tokens(text)
    folded = [t[0] for t in toks]
    # the stored index: this question's names, one query
    index = index.view(toks, acronym_words(text, toks))
    found = index.ngrams(folded)
    # rule 2: whole names, not inside a longer name found in the question
    kept = [
        (s, e, ids)
        for s, e, ids in found
        if not any(s2 <= s and e <= e2 and (e2 - s2) > (e - s) for s2, e2, _ in found)
    ]
    strong = [(s, e, ids) for s, e, ids in kept if not weak(index, folded[s:e])]
    # rule 3 only where no whole name is found (or only weak ones): a partial name beating a
    # whole one-word name was wrong more often than right on the dev questions
    # an acronym counts as the words its letters stand for ("jfk" as three), and only where
    # no whole name is found: a name written whole is never displaced by initials
    acro = [] if strong and not ACRONYMS_WITH_WHOLE else acronyms(index, text, toks, found)
    part = [] if strong or acro else partial(index, folded)
    if part:
        noted = _worth_noting(index, text, toks, found, part)
        return _linking(index, toks, part, "partial name", _ids(index, found), noted, field_name)
    kept = strong or kept
    if not kept and not acro:
        raise _not_found(field_name)
    most = max([e - s for s, e, _ in kept] + [n for *_, n in acro])
    best = [(s, e, i) for s, e, ids in kept if e - s == most for i in ids]
    best += [(s, e, i) for s, e, i, n in acro if n == most]
    rule = "whole name" if best[0][2] in {i for *_, ids in kept for i in ids} else "acronym"
    if text != text.lower() and len({i for _, _, i in best}) > 1:
        exact = [b for b in best if written_as(index, text, toks, b)]
        if exact and len(exact) < len(best):
            best, rule = exact, "exact case"
    taken = {i for _, _, i in best}
    others = [o for o in _ids(index, found) if o["id"] not in taken]
    noted = _worth_noting(index, text, toks, found, best)
    extra = []
    if RUNNERS_UP:  # other names found, then names written in part: the search decides
        rest = sorted(
            ((s, e, i) for s, e, ids in kept for i in ids if i not in taken),
            key=lambda m: (-(m[1] - m[0]), -index.degree.get(m[2], 0), m[2]),
        )
        extra = (rest + [p for p in partial(index, folded) if p[2] not in taken])[:RUNNERS_UP]
    return _linking(index, toks, best, rule, others, noted, field_name, extra)


def _ids(index: EntityIndex, found) -> list[dict]:
    return [index._entity(i) for i in dict.fromkeys(i for _, _, ids in found for i in ids)]


def _worth_noting(index: EntityIndex, text: str, toks, found, taken) -> list[dict]:
    """The other names found that a user might have meant: not among the words taken
    ("Blade" in "Blade Runner"), not only everyday or relation words ("What?"), and
    written as a name is: capitalised in a mixed-case question ("writer" and "fall" in
    one are words, not titles), of two words or more in a one-case question."""
    spans = [(s, e) for s, e, _ in taken]
    ids = {i for _, _, i in taken}
    cased = mixed_case(text)

    def named(s: int, e: int) -> bool:
        return text[toks[s][1]].isupper() if cased else e - s > 1

    keep = [
        i
        for s, e, found_ids in found
        if not any(s < e2 and s2 < e for s2, e2 in spans)
        and not weak(index, [t[0] for t in toks[s:e]])
        and named(s, e)
        for i in found_ids
        if i not in ids
    ]
    return [index._entity(i) for i in dict.fromkeys(keep)]


def _linking(index, toks, best, rule, others, noted, field_name, extra=()) -> Linking:
    """Tied candidates in a fixed order (degree first: a weak prior), at most MAX_TIED;
    `others`: every other name found (the record), `noted`: those the note names."""
    by_id: dict[str, tuple[int, int]] = {}
    for s, e, i in best:
        by_id.setdefault(i, (s, e))
    order = sorted(by_id, key=lambda i: (-index.degree.get(i, 0), i))
    for s, e, i in extra:  # runners-up, after the tied ones, in their own order
        if i not in by_id:
            by_id[i] = (s, e)
            order.append(i)
    choices = [
        Choice(
            [index._entity(i)],
            [(toks[by_id[i][0]][1], toks[by_id[i][1] - 1][2])],
        )
        for i in order[:MAX_TIED]
    ]
    notes = _also(noted, field_name)
    if len(choices) > 1:
        listed = ", ".join(f"{c.topics[0]['name']} (id {c.topics[0]['id']})" for c in choices)
        notes.append(f"the names tie between {listed}: the best-scoring path decides")
    return Linking(choices=choices, rule=rule, notes=notes, others=others)


def link(
    store: GraphStore,
    dataset: str,
    text: str,
    entity: str | Sequence[str] | None = None,
    graph: str | None = None,
) -> tuple[list[dict], list[str]]:
    """(topics [{id, name}], notes) of the linker's first choice: for callers without a
    search to break ties (tests, tools); `cpr ask` and `cpr calibrate` use `resolve`."""
    found = resolve(store, dataset, text, entity, graph)
    return found.topics, found.notes


def linker(store: GraphStore, dataset: str, graph: str | None = None) -> str:  # noqa: ARG001
    """How `resolve` finds names in question text: LINKER, at every graph size. A
    calibration that links from the text covers the linker it was made with: record it
    with the calibration."""
    return LINKER
