"""Training questions generated from the graph: relation paths walked from sampled entities.

A generated question is a start entity, a relation path of 1..H steps (each with its
direction: a reverse step walks a relationship from its tail to its head) and every entity
at the end of that relation path from the start, read off Neo4j. Its words come from the
relation texts (the readable text the encoder embeds for a step; a Freebase-style name says
its property alone, `question_words`) and, where the graph has them, the node labels of the
answers; several templates per step and per question, because diversity matters more than
grammar (DESIGN.md section 6).

They are training data only: their ids start with `gen:`, they are never written to Neo4j,
the questions loader refuses their split, and calibration refuses any question id of this
form, so no guarantee is ever calibrated on them.

Answers: the walk picks one neighbour per step (to find paths that exist); the answers are
then every end of the whole relation path, hop by hop over sets of entities (one batched
Cypher query per hop for every walk), without the start itself unless the dataset lets a
topic be its own answer. A walk whose frontier passes `frontier_cap`, or whose answers pass
`max_answers`, or end only on unnamed (MID) nodes, is dropped.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from cpr_neo4j.graph.neighbours import DEFAULT_FANOUT_CAP, Neo4jNeighbours
from cpr_neo4j.graph.store import GraphStore
from cpr_neo4j.linking.named import mask_named
from cpr_neo4j.loaders.base import GENERATED_SPLIT
from cpr_neo4j.model.encoder import relation_words
from cpr_neo4j.search.base import RelPath, Step
from cpr_neo4j.text import freebase_property, is_mid, readable_relation
from cpr_neo4j.training.questions import Question

PREFIX = "gen:"  # every generated question id starts with it
SPLIT = GENERATED_SPLIT  # the split a generated questions file names (never ingested)
MAX_ANSWERS = 100
FRONTIER_CAP = 500

# How one step wraps the phrase of the path so far ({np}); {t} is the relation text.
FORWARD = ("the {t} of {np}", "{np}'s {t}", "what {np} is {t}", "{np} {t}")
REVERSE = ("things {t} {np}", "the ones {t} {np}", "what is {t} {np}", "{t} {np}")
# How a question wraps its whole phrase; {kind}: the answers' node label, else "ones".
OUTER = (
    "{np}?",
    "what is {np}",
    "which are {np}",
    "name {np}",
    "list {np}",
    "tell me {np}",
    "who or what is {np}",
    "which {kind} are {np}",
)


def labelled_splits(store: GraphStore, dataset: str) -> dict[str, dict]:
    """split -> {n, max_hops} of the dataset's labelled questions; {} when it has none (a
    graph alone, which generated questions can train)."""
    rows = store.read("question_splits", dataset=dataset)
    return {r["split"]: {"n": r["n"], "max_hops": r["max_hops"]} for r in rows}


def is_generated(question_id: str) -> bool:
    return question_id.startswith(PREFIX)


@dataclass(frozen=True)
class Generated:
    id: str
    text: str
    topic: str
    topic_name: str
    path: RelPath
    answers: tuple[str, ...]

    @property
    def hops(self) -> int:
        return len(self.path)

    def question(self) -> Question:
        """The training question (topic mention masked as for real questions)."""
        return Question(
            id=self.id,
            text=self.text,
            masked=mask_named(self.text, [self.topic_name]),
            hops=self.hops,
            topics=[self.topic],
            answers=list(self.answers),
        )

    def to_json(self) -> dict:
        """The questions.jsonl shape, with the split that keeps it out of Neo4j."""
        return {
            "id": self.id,
            "question": self.text,
            "topics": [self.topic],
            "answers": list(self.answers),
            "hops": self.hops,
            "split": SPLIT,
            "path": [s.key() for s in self.path],
        }


def question_words(relation: str, relation_text: Mapping[str, str]) -> str:
    """The words a generated question says for `relation`: its readable text, except that
    a Freebase-style name (domain.type.property) with no text of its own says the property
    alone ("place of birth", not "person place of birth"): a question names the property,
    the type is what its topic already is. Chosen on webqsp-names's inner dev split
    (docs/method.md, "Wording generated questions from Freebase names")."""
    words = relation_words(relation, relation_text)
    prop = freebase_property(relation)
    return prop if prop and words == readable_relation(relation) else words


def word(
    name: str,
    path: RelPath,
    relation_text: Mapping[str, str],
    kind: str | None,
    rng: random.Random,
) -> str:
    """A question for the relation path from `name`, templates drawn from `rng`."""
    np_ = name
    for i, step in enumerate(path):
        t = question_words(step.relation, relation_text)
        forms = FORWARD if step.forward else REVERSE
        if i < len(path) - 1:  # "what ..." forms only as the outermost step
            forms = tuple(f for f in forms if not f.startswith("what"))
        np_ = rng.choice(forms).format(t=t, np=np_)
    if np_.startswith("what "):
        return np_
    outer = rng.choice(OUTER if kind else OUTER[:-1])
    return outer.format(np=np_, kind=kind or "ones")


def _walk(
    source: Neo4jNeighbours, starts: list[str], lengths: list[int], rng: random.Random
) -> list[RelPath]:
    """One random simple walk per start: at each entity a step type drawn uniformly among
    those leading to an unvisited neighbour, then one such neighbour. One round trip per
    hop for every walk; a walk stops early at a dead end."""
    at = list(starts)
    seen = [{s} for s in starts]
    paths: list[list[Step]] = [[] for _ in starts]
    for hop in range(max(lengths, default=0)):
        live = [i for i, n in enumerate(lengths) if len(paths[i]) == hop < n]
        if not live:
            break
        adj = source.neighbours(sorted({at[i] for i in live}))
        for i in live:
            options: dict[Step, list[str]] = {}
            for step, nb in adj.get(at[i], []):
                if nb not in seen[i]:
                    options.setdefault(step, []).append(nb)
            if not options:
                lengths[i] = hop  # dead end: keep what was walked
                continue
            step = rng.choice(sorted(options))
            nxt = rng.choice(options[step])
            paths[i].append(step)
            seen[i].add(nxt)
            at[i] = nxt
    return [tuple(p) for p in paths]


def path_ends(
    store: GraphStore,
    dataset: str,
    walks: list[tuple[str, RelPath]],
    frontier_cap: int = FRONTIER_CAP,
) -> list[set[str] | None]:
    """Per (start, relation path): every entity at its end, hop by hop over entity sets;
    None where a frontier passed `frontier_cap`. One query per hop for all walks."""
    frontier: list[set[str] | None] = [{start} for start, _ in walks]
    for hop in range(max((len(p) for _, p in walks), default=0)):
        rows = [
            {"walk": i, "ids": sorted(f), "type": p[hop].relation, "forward": p[hop].forward}
            for i, ((_, p), f) in enumerate(zip(walks, frontier, strict=True))
            if f is not None and hop < len(p)
        ]
        if not rows:
            break
        found = {
            r["walk"]: set(r["ends"])
            for r in store.read("generated_hop", rows=rows, dataset=dataset, cap=frontier_cap)
        }
        for row in rows:
            ends = found.get(row["walk"], set())
            frontier[row["walk"]] = ends if len(ends) <= frontier_cap else None
    return frontier


def _info(store: GraphStore, dataset: str, ids: list[str]) -> dict[str, tuple[str, list[str]]]:
    out: dict[str, tuple[str, list[str]]] = {}
    for chunk in range(0, len(ids), 5000):
        rows = store.read("generated_entity_info", ids=ids[chunk : chunk + 5000], dataset=dataset)
        out.update((r["id"], (r["name"] or r["id"], r["types"])) for r in rows)
    return out


def generate(
    store: GraphStore,
    dataset: str,
    n: int,
    hops: int,
    relation_text: Mapping[str, str],
    seed: int = 0,
    topic_answers: bool = False,
    max_answers: int = MAX_ANSWERS,
    frontier_cap: int = FRONTIER_CAP,
    fanout_cap: int = DEFAULT_FANOUT_CAP,
    paraphrase: Callable[[list[Generated]], list[Generated]] | None = None,
) -> list[Generated]:
    """Up to `n` distinct generated questions of 1..`hops` steps (fewer when the graph
    has too few distinct walks within the caps), reproducible from `seed`."""
    if n <= 0:
        return []
    starts = store.read("generated_starts", dataset=dataset)[0]["ids"]
    if not starts:
        return []
    rng = random.Random(seed)
    source = Neo4jNeighbours(store, dataset, fanout_cap)
    out: dict[tuple[str, RelPath], Generated] = {}
    for _ in range(4):  # rounds: walks that die or explode are replaced by fresh ones
        want = n - len(out)
        if want <= 0:
            break
        batch = [rng.choice(starts) for _ in range(2 * want)]
        names = _info(store, dataset, sorted(set(batch)))
        batch = [s for s in batch if s in names and not is_mid(names[s][0])]
        lengths = [rng.randint(1, hops) for _ in batch]
        paths = _walk(source, batch, lengths, rng)
        walks = [(s, p) for s, p in zip(batch, paths, strict=True) if p]
        walks = list(dict.fromkeys(w for w in walks if w not in out))
        ends = path_ends(store, dataset, walks, frontier_cap)
        kept = [
            (w, sorted(e if topic_answers else e - {w[0]}))
            for w, e in zip(walks, ends, strict=True)
            if e is not None
        ]
        kept = [(w, a) for w, a in kept if 0 < len(a) <= max_answers]
        info = _info(store, dataset, sorted({x for _, a in kept for x in a}))
        for (start, path), answers in kept:
            answers = [a for a in answers if not is_mid(info.get(a, (a, []))[0])]
            if not answers or len(out) >= n:
                continue
            kinds = {t for a in answers for t in info.get(a, ("", []))[1]}
            kind = next(iter(kinds)).lower() if len(kinds) == 1 else None
            name = names[start][0]
            qid = f"{PREFIX}{start}:" + ">".join(s.key() for s in path)
            out[(start, path)] = Generated(
                id=qid,
                text=word(name, path, relation_text, kind, rng),
                topic=start,
                topic_name=name,
                path=path,
                answers=tuple(answers),
            )
    made = list(out.values())
    return paraphrase(made) if paraphrase else made
