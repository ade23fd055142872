"""Entity paths over a NeighbourSource: the path type, shortest (gold) paths by BFS, and a
per-question neighbourhood view that the PUCT collector and its pair builders walk.

Paths are simple (no entity repeats) with one exception, a dataset convention: with topic
answers on ("X's children's mother" is X), a path's LAST step may land on a topic entity,
closing a cycle X -> ... -> X; such an end is never extended (search/frontier.py applies
the same rule to TreeG and open expansion).
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cpr_neo4j.search.base import CachedNeighbours, NeighbourSource, RelPath, Step


@dataclass(frozen=True)
class EntityPath:
    """start -steps[0]-> entities[0] -steps[1]-> entities[1] ... (len(steps) == len(entities))."""

    start: str
    steps: RelPath = ()
    entities: tuple[str, ...] = ()

    @property
    def relpath(self) -> RelPath:
        return self.steps

    @property
    def end(self) -> str:
        return self.entities[-1] if self.entities else self.start

    @property
    def nodes(self) -> tuple[str, ...]:
        return (self.start, *self.entities)

    def extend(self, step: Step, entity: str) -> EntityPath:
        return EntityPath(self.start, (*self.steps, step), (*self.entities, entity))

    def __len__(self) -> int:
        return len(self.steps)


@dataclass(frozen=True)
class PathPair:
    """A training pair from one question: pos should cost less than neg."""

    question_id: str | int
    masked_question: str
    pos: EntityPath
    neg: EntityPath


Preds = Mapping[str, list[tuple[str, Step]]]


def shortest_paths(
    source: NeighbourSource,
    topics: Sequence[str],
    answers: set[str],
    hops: int,
    limit: int,
    rng: random.Random,
    topic_answers: bool = False,
) -> list[EntityPath]:
    """Per reachable answer, shortest paths from the topics (BFS, one round trip per level).

    Shortest paths are simple by construction. At most `limit` in all: answers are taken
    in a seeded random order, each with up to max(1, limit // #answers) paths. A topic
    among `answers` is reached only with topic_answers, by its shortest cycles: the first
    level at which an edge lands back on it (never through another topic).
    """
    topic_set = set(topics)
    cycle_goal = answers & topic_set if topic_answers else set()
    dist = {t: 0 for t in topics}
    preds: dict[str, list[tuple[str, Step]]] = {}
    back: dict[str, tuple[int, list[tuple[str, Step]]]] = {}  # topic -> (level, last edges)
    frontier = sorted(topic_set)
    for d in range(1, hops + 1):
        if not frontier or (all(a in dist for a in answers) and cycle_goal <= back.keys()):
            break
        found = source.neighbours(frontier)
        last = d == hops  # at the last level only answers matter: skip the rest (3-hop
        nxt = []  # neighbourhoods reach ~10^4 entities on MetaQA)
        for entity in frontier:
            for step, nb in found.get(entity, ()):
                if nb in cycle_goal:  # a cycle's end: recorded, never a BFS node
                    level, edges = back.setdefault(nb, (d, []))
                    if level == d:
                        edges.append((entity, step))
                    continue
                if last and nb not in answers:
                    continue
                seen = dist.get(nb)
                if seen is None:
                    dist[nb] = d
                    nxt.append(nb)
                    preds[nb] = [(entity, step)]
                elif seen == d:
                    preds[nb].append((entity, step))
        frontier = sorted(nxt)
    # a topic is its own answer only by a cycle (`back`); its BFS distance 0 never counts
    targets = sorted({a for a in answers if dist.get(a, 0) > 0} | back.keys())
    rng.shuffle(targets)
    per_answer = max(1, limit // max(1, len(targets)))
    out: list[EntityPath] = []
    for answer in targets:
        if answer in back:
            out.extend(_unwind_cycle(answer, back[answer][1], preds, dist, per_answer))
        else:
            out.extend(_unwind(answer, preds, dist, per_answer))
        if len(out) >= limit:
            break
    return out[:limit]


def _unwind(answer: str, preds: Preds, dist: Mapping[str, int], cap: int) -> list[EntityPath]:
    """Up to `cap` shortest paths ending at `answer`, depth-first in sorted order."""
    out: list[EntityPath] = []

    def walk(entity: str, steps: list[Step], entities: list[str]) -> None:
        if len(out) >= cap:
            return
        if dist[entity] == 0:
            out.append(EntityPath(entity, tuple(reversed(steps)), tuple(reversed(entities))))
            return
        for prev, step in sorted(preds[entity]):
            walk(prev, [*steps, step], [*entities, entity])

    walk(answer, [], [])
    return out


def _unwind_cycle(
    topic: str, last: list[tuple[str, Step]], preds: Preds, dist: Mapping[str, int], cap: int
) -> list[EntityPath]:
    """Up to `cap` shortest cycles ending at `topic`: a shortest path to an entity one step
    away from it, then that step (sorted order, like `_unwind`)."""
    out: list[EntityPath] = []
    for prev, step in sorted(last):
        out += [p.extend(step, topic) for p in _unwind(prev, preds, dist, cap - len(out))]
        if len(out) >= cap:
            break
    return out


class Neighbourhood:
    """Per-question view of the graph: neighbours grouped by step, memoised per entity."""

    def __init__(self, source: NeighbourSource, cache: bool = True):
        self.cache = CachedNeighbours(source) if cache else source
        self.memo = cache
        self._groups: dict[str, dict[Step, list[str]]] = {}

    def follow(
        self, starts: set[str], relpath: RelPath, cap: int, cycles: bool = False
    ) -> set[str]:
        """Entities reached from `starts` along `relpath` (frontier capped per hop); with
        `cycles` (topic answers) the last step may land back on a start."""
        frontier = set(starts)
        for t, step in enumerate(relpath):
            ids = sorted(frontier)[:cap]
            found = self.cache.neighbours(ids)
            frontier = {n for i in ids for s, n in found.get(i, []) if s == step}
            if not (cycles and t == len(relpath) - 1):
                frontier -= starts
        return frontier

    def groups(self, path: EntityPath, cycle: bool = False) -> dict[Step, list[str]]:
        """Neighbours of the path's end by step (sorted), minus entities already on the path;
        `cycle`: the path's start stays (a last step that closes a cycle, topic answers)."""
        end = path.end
        grouped = self._groups.get(end) if self.memo else None
        if grouped is None:
            raw: dict[Step, set[str]] = defaultdict(set)
            for step, nb in self.cache.neighbours([end]).get(end, []):
                raw[step].add(nb)
            grouped = self._groups[end] = {s: sorted(raw[s]) for s in sorted(raw)}
        on_path = set(path.nodes)
        if cycle:
            on_path.discard(path.start)
        out = {}
        for step, ends in grouped.items():
            kept = [e for e in ends if e not in on_path]
            if kept:
                out[step] = kept
        return out
