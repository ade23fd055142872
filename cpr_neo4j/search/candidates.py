"""What a TreeG retrieval returns: candidate relation sequences with the entities they reach.

A Candidate is one retained sequence, its cost V' and its ends (end entity -> predecessor);
a Retrieval holds every hop's candidates and reads answers off them: an answer's cost is
the min cost over the candidates ending there (answer_costs / answer_columns), and its
witness is the best such candidate's recorded entity path.

Topics as answers: a Retrieval made with `topic_answers` (a dataset convention, see
search/frontier.py) keeps a topic end (a cycle X -> ... -> X) as an answer; otherwise
topics never appear among its answers, as on MetaQA, whose gold lists exclude them.
"""

from __future__ import annotations

import math
from collections import ChainMap
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

import numpy as np

from cpr_neo4j.search.base import RelPath

# Bump when what a retrieval keeps as candidates or how an answer's cost is read off them
# changes: a calibration records it (stages/pins.py) and is stale under another.
CANDIDATE_RULES = "candidates-v1"


class Ends(Mapping[str, "str | None"]):
    """A candidate's end entity -> predecessor, kept as node columns and named on first use:
    most of a retrieval's candidates are never read entity by entity (answer costs and
    witnesses use the columns), and naming them all was a fifth of a 3-hop retrieval."""

    __slots__ = ("nodes", "preds", "names", "_named")

    def __init__(self, nodes: np.ndarray, preds: np.ndarray, names: Mapping[int, str]):
        self.nodes, self.preds, self.names = nodes, preds, names
        self._named: dict[str, str | None] | None = None

    def _dict(self) -> dict[str, str | None]:
        if self._named is None:
            ends = name_all(self.names, self.nodes.tolist())
            preds = name_all(self.names, self.preds.tolist())
            # in id order, as the string-set version built them
            self._named = dict(sorted(zip(ends, preds, strict=True)))
        return self._named

    def __getitem__(self, entity: str) -> str | None:
        return self._dict()[entity]

    def __iter__(self) -> Iterator[str]:
        return iter(self._dict())

    def __len__(self) -> int:
        return len(self.nodes)

    def pred_node(self, node: int) -> int:
        return int(self.preds[np.flatnonzero(self.nodes == node)[0]])


@dataclass(frozen=True)
class Candidate:
    path: RelPath
    cost: float  # V' = V - hint_beta * bonus; the number calibration and answer sets use
    ends: Mapping[str, str | None]  # end entity -> its predecessor (None only at hop 0)


@dataclass
class Retrieval:
    topics: list[str]
    per_hop: list[list[Candidate]]  # per_hop[t - 1]: sequences retained at hop t, best first
    round_trips: int
    topic_answers: bool = False  # a topic end (a cycle back to it) counts as an answer
    # node ids -> numbers ordered as their entity ids (frontier.Adjacency.rank), or None
    id_rank: Callable[[np.ndarray], np.ndarray] | None = field(
        default=None, repr=False, compare=False
    )
    # the topics' node ids (a search's), so node columns drop topic ends without names
    topic_nodes: np.ndarray | None = field(default=None, repr=False, compare=False)
    # the last hop's ends came without their ids (DeferredNames names them when read)
    names_deferred: bool = False
    _index: dict[RelPath, Candidate] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    _node_of: dict[str, int] = field(default_factory=dict, init=False, repr=False, compare=False)
    # every candidate's end nodes stacked, with the candidate each row belongs to
    _stack: tuple[np.ndarray, np.ndarray] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def candidates(self) -> list[Candidate]:
        return [c for hop in self.per_hop for c in hop]

    def answer_costs(self) -> dict[str, float]:
        """Entity -> min cost over candidates ending there (topics only with topic_answers)."""
        cands = self.candidates()
        if cands and all(isinstance(c.ends, Ends) for c in cands):
            return self._answer_costs_by_node(cands)
        best: dict[str, float] = {}
        topics = self._banned()
        for c in cands:
            for e in c.ends:
                if e not in topics and c.cost < best.get(e, math.inf):
                    best[e] = c.cost
        return best

    def _answer_costs_by_node(self, cands: list[Candidate]) -> dict[str, float]:
        """answer_costs over node columns; keeps the end nodes' names for `witness`."""
        nodes, costs = _best_by_node(cands)
        names = name_all(cands[0].ends.names, nodes.tolist())  # type: ignore[attr-defined]
        topics = self._banned()
        best: dict[str, float] = {}
        for n, name, c in zip(nodes.tolist(), names, costs.tolist(), strict=True):
            self._node_of[name] = n
            if name not in topics:
                best[name] = c
        return best

    def answer_columns(self) -> tuple[list[str], np.ndarray]:
        """answer_costs as (entity ids, costs) columns, for callers that only need numbers
        (`cpr eval`: a 3-hop question has thousands of answers; a dict costs more)."""
        cands = self.candidates()
        if not (cands and all(isinstance(c.ends, Ends) for c in cands)):
            best = self.answer_costs()
            return list(best), np.fromiter(best.values(), float, len(best))
        nodes, costs = _best_by_node(cands)
        ids = name_all(cands[0].ends.names, nodes.tolist())  # type: ignore[attr-defined]
        topics = self._banned()
        keep = ~np.fromiter(map(topics.__contains__, ids), bool, len(ids))
        if keep.all():
            return ids, costs
        return [i for i, k in zip(ids, keep.tolist(), strict=True) if k], costs[keep]

    def _banned(self) -> set[str]:
        """Entities never answers: the topics, unless a cycle back to one may answer.

        Search never ends a path on a topic with the setting off, so this only guards
        candidates built by hand (tests, older callers)."""
        return set() if self.topic_answers else set(self.topics)

    def ranked_answers(self) -> list[tuple[str, float]]:
        """(entity, cost) by cost, ties by entity id; the first is the Hits@1 answer."""
        return sorted(self.answer_costs().items(), key=lambda kv: (kv[1], kv[0]))

    def prefix_costs(self) -> list[dict[RelPath, float]]:
        """Per hop, cost of each retained sequence (what hop-level calibration thresholds)."""
        return [{c.path: c.cost for c in hop} for hop in self.per_hop]

    def witness(self, entity: str, node: int | None = None) -> tuple[RelPath, list[str], float]:
        """Best candidate reaching `entity`: (relation path, entity ids e0..eL, cost).
        node: its node id when the caller has it (answer columns), else looked up."""
        cands = self.candidates()
        columns = bool(cands) and isinstance(cands[0].ends, Ends)
        node = (self._node_of.get(entity) if node is None else node) if columns else None
        if node is not None:
            if self._stack is None:  # the same candidates on every call: stacked once
                ends = [c.ends.nodes for c in cands]  # type: ignore[attr-defined]
                owner = np.repeat(np.arange(len(ends)), [len(e) for e in ends])
                self._stack = (np.concatenate(ends), owner)
            stacked, owner = self._stack
            reaching = [cands[i] for i in np.unique(owner[stacked == node]).tolist()]
        else:
            reaching = [c for c in cands if entity in c.ends]
        if not reaching:
            raise KeyError(f"entity {entity!r} is not reached by any candidate path")
        best = min(reaching, key=lambda c: (c.cost, len(c.path), c.path))
        return best.path, self.chain(best, entity, node), best.cost

    def chain(self, candidate: Candidate, entity: str, node: int | None = None) -> list[str]:
        """Entity ids e0..eL of `candidate`'s recorded path to `entity` (one of its ends)."""
        if not self._index:
            self._index.update((c.path, c) for c in self.candidates())
        node = self._node_of.get(entity) if node is None else node
        if node is not None and isinstance(candidate.ends, Ends):
            nodes = [node]
            for t in range(len(candidate.path), 0, -1):
                nodes.append(self._index[candidate.path[:t]].ends.pred_node(nodes[-1]))  # type: ignore[attr-defined]
            return [candidate.ends.names[n] for n in reversed(nodes)]
        chain = [entity]
        for t in range(len(candidate.path), 0, -1):  # walk predecessors back to the topic
            pred = self._index[candidate.path[:t]].ends[chain[-1]]
            assert pred is not None  # only hop-0 entities (topics) lack a predecessor
            chain.append(pred)
        return chain[::-1]


class DeferredNames(Mapping[int, str]):
    """Entity ids of nodes a search fetched without them (its last hop's neighbours, when
    the caller shows only a few answers: `cpr ask` on a graph too big to preload), fetched
    on first read and kept. `load` fetches many in one round trip; a single missing key
    costs one (put this map last in a ChainMap, so that only unnamed nodes reach it)."""

    def __init__(self, fetch: Callable[[list[int]], dict[int, str]]):
        self.fetch = fetch
        self.known: dict[int, str] = {}

    def load(self, nodes: Iterable[int]) -> None:
        missing = list(dict.fromkeys(n for n in nodes if n not in self.known))
        if missing:
            self.known.update(self.fetch(missing))

    def __getitem__(self, node: int) -> str:
        if node not in self.known:
            self.load([node])
        return self.known[node]  # KeyError: no longer an entity of the dataset

    def __iter__(self) -> Iterator[int]:
        return iter(self.known)

    def __len__(self) -> int:
        return len(self.known)


def name_all(names: Mapping[int, str], nodes: list[int]) -> list[str]:
    """names[n] for every node, map by map at C speed (a ChainMap looks up in Python; with
    a shared cache its first map names them all); a DeferredNames map fetches the nodes
    still unnamed when it is reached, in one round trip."""
    maps = names.maps if isinstance(names, ChainMap) else [names]
    out: list[str | None] = [None] * len(nodes)
    if not isinstance(maps[0], DeferredNames):
        out, maps = list(map(maps[0].get, nodes)), maps[1:]
    for m in maps:
        if None not in out:
            break
        if isinstance(m, DeferredNames):
            m.load(n for o, n in zip(out, nodes, strict=True) if o is None)
            m = m.known
        out = [o if o is not None else m.get(n) for o, n in zip(out, nodes, strict=True)]
    if None in out:  # a node vanished between two hops' round trips
        raise RuntimeError(f"the graph changed during retrieval (node {nodes[out.index(None)]})")
    return out  # type: ignore[return-value]


def _best_by_node(cands: list[Candidate]) -> tuple[np.ndarray, np.ndarray]:
    """(end node, min cost over the candidates ending there), by node id."""
    ends = [c.ends for c in cands]
    nodes = np.concatenate([e.nodes for e in ends])  # type: ignore[attr-defined]
    costs = np.repeat([c.cost for c in cands], [len(e) for e in ends])
    order = np.lexsort((costs, nodes))
    nodes, costs = nodes[order], costs[order]
    first = np.ones(len(nodes), dtype=bool)
    first[1:] = nodes[1:] != nodes[:-1]
    return nodes[first], costs[first]
