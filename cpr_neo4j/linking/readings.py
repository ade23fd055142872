"""Linking a question for search, the same way at calibration and at ask time.

linking/resolve.py proposes one or more ways to read the question (ties its names cannot
break); here each is searched and the one whose best path scores best is taken. Because
`cpr calibrate --linking text` calls the same `link_text` + `choose` as `cpr ask`, the
guarantee covers these choices, ties included."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from cpr_neo4j.errors import CprError
from cpr_neo4j.graph.store import GraphStore
from cpr_neo4j.linking.named import mask_named
from cpr_neo4j.linking.resolve import Choice, Linking, resolve
from cpr_neo4j.text import MASK, mask_question


@dataclass
class Linked:
    topics: list[dict]  # [{id, name}] of the choice taken
    notes: list[str]
    masked: str  # the question with its topic mentions masked, as the scorer reads it
    choices: list[tuple[list[str], str]] = field(default_factory=list)  # (ids, masked) each
    linking: Linking | None = None
    taken: int = 0  # the choice taken (the search decides between tied ones)

    def record(self) -> dict:
        how = "best-scoring path" if len(self.choices) > 1 else None
        return self.linking.record(self.taken, how) if self.linking else {}


def masked_text(text: str, choice: Choice) -> str:
    """The question with the words the linker used for its topics replaced by MASK; a
    choice without spans (named entities) masks the names wherever the text writes them as
    whole words (linking/named.py, the rule the named curves are calibrated with)."""
    if not choice.mentions:
        return mask_named(text, [t["name"] for t in choice.topics if t.get("name")])
    out, last = [], 0
    for start, end in sorted(choice.mentions):
        if start >= last:
            out += [text[last:start], MASK]
            last = end
    return mask_question("".join(out) + text[last:])


def from_linking(text: str, found: Linking) -> Linked:
    choices = [([t["id"] for t in c.topics], masked_text(text, c)) for c in found.choices]
    return Linked(
        topics=found.topics,
        notes=list(found.notes),
        masked=choices[0][1],
        choices=choices,
        linking=found,
    )


def link_text(
    store: GraphStore,
    dataset: str,
    text: str,
    entity: str | Sequence[str] | None = None,
    graph: str | None = None,
    field_name: str = "--entity",
) -> Linked:
    return from_linking(text, resolve(store, dataset, text, entity, graph, field_name))


def best_cost(retrieval) -> float:
    """The cost of the retrieval's best candidate path that reaches an entity."""
    costs = [c.cost for c in retrieval.candidates() if len(c.ends)]
    return min(costs) if costs else math.inf


def taken_index(retrievals: list) -> int:
    """The reading the search takes: its best path costs least, ties by the linker's order
    (degree, then id); a reading whose search failed (a CprError in its place) only when
    every one did."""
    costs = [math.inf if isinstance(r, CprError) else best_cost(r) for r in retrievals]
    return min(range(len(costs)), key=lambda k: (costs[k], k))


def choose(linked: Linked, retrievals: list, option: str = "--entity") -> tuple[int, Linked]:
    """(index of the choice taken, the Linked for it, with a note saying so): `taken_index`
    decides."""
    if len(retrievals) == 1:
        return 0, linked
    i = taken_index(retrievals)
    c = linked.linking.choices[i]
    name = ", ".join(t["name"] or t["id"] for t in c.topics)
    others = [
        ", ".join(t["name"] or t["id"] for t in o.topics)
        for j, o in enumerate(linked.linking.choices)
        if j != i
    ]
    notes = [n for n in linked.notes if "the best-scoring path decides" not in n]
    other = linked.linking.choices[1 if i == 0 else 0].topics[0]["id"]
    # where the tie came from: the name the user gave, or the question's own words
    rule = linked.linking.rule
    whose = {"named": f"the name given to {option} fits", "bracketed": "the [bracketed] name fits"}
    fits = whose.get(rule, "the question's names fit")
    notes.append(
        f"{fits} {len(retrievals)} entities equally well; took {name} (its best "
        f"path scored best), not {'; '.join(others)}: to choose another, give {option} its "
        f"id (e.g. {option} {other!r})"
    )
    return i, Linked(
        topics=c.topics,
        notes=notes,
        masked=linked.choices[i][1],
        choices=linked.choices,
        linking=linked.linking,
        taken=i,
    )


def search_readings(retriever, choices: list, q) -> tuple:
    """(retrieval, (topic ids, masked) taken) as `cpr ask` searches: ties between readings
    decided as `choose` decides them (`taken_index`); (None, ([], text)) unlinked."""
    choices = [c for c in choices if c[0]]
    if not choices:
        return None, ([], q.text)
    found = [retriever.run(m, t, q.text, q.id) for t, m in choices]
    i = taken_index(found)
    return found[i], choices[i]


def named_readings(
    store: GraphStore,
    dataset: str,
    text: str,
    topics: Sequence[str],
    names: dict[str, str],
    graph: str | None = None,
) -> list[tuple[list[str], str]]:
    """The readings `cpr ask --entity NAME` searches for a question whose topics are
    `topics`, NAME being each topic's name as the graph has it (its id when it has none):
    resolved and masked by linking/named.py's rules, ties included, so the named curves are
    calibrated as named questions are answered. A name shared by more than MAX_TIED
    entities is refused at ask time with "give ids": then the ids, as the user would."""
    given = [names.get(t) or t for t in topics]
    try:
        return link_text(store, dataset, text, given, graph).choices
    except CprError:
        return link_text(store, dataset, text, list(topics), graph).choices


def link_readings(
    store: GraphStore, dataset: str, text: str, graph: str | None = None
) -> list[tuple[list[str], str]]:
    """The (topic ids, masked question) readings `cpr ask` would search; [] when linking
    fails (a miss at calibration, as the refusal is at ask time)."""
    try:
        return link_text(store, dataset, text, graph=graph).choices
    except CprError:
        return []
