"""Neighbour rows kept across questions, in TreeG's columnar form.

Evaluation and calibration run thousands of questions (and several methods) over the same
hubs. `CachedNeighbours` keeps dict rows, which TreeG then recodes edge by edge in Python
on every call (most of a 3-hop evaluation's time); this cache keeps each entity's edges as
integer arrays by node id, so a cached hop is a few numpy concatenations and no round trip.
It answers both APIs: `adjacency` (TreeG) and `neighbours` (PUCT, open expansion).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from cpr_neo4j.search.base import Edge, Step
from cpr_neo4j.search.frontier import Adjacency
from cpr_neo4j.search.treeg import AdjacencySource

_EMPTY = np.zeros(0, dtype=np.int64)

# Entities `cpr ask --file` and `cpr serve` keep across questions (evaluation keeps 2M): a
# few hundred bytes each, plus a hub's edges; MetaQA has 43k entities in all.
ANSWER_CACHE_ENTITIES = 200_000
# Entities per query when a whole graph is read at once (`preload`)
PRELOAD_CHUNK = 4000
# `id_rank` keeps a table by node id up to this many node ids (8 MB), or this many per
# entity of the graph (other datasets' nodes in between); beyond, it searches sorted ids
DENSE_RANKS = 1 << 20
DENSE_PER_ENTITY = 8


class CachedAdjacency:
    """Same answers as `source` (ids missing from the graph stay missing), fewer round trips.

    Rows are fetched with neighbour ids (names=True) once, so any later hop can name them.
    Memory grows with the entities seen (a few hundred bytes each); `max_entities` bounds it.
    """

    def __init__(self, source: AdjacencySource, max_entities: int = 2_000_000):
        self.source = source
        self.max_entities = max_entities
        self._steps: list[Step] = []
        self._code: dict[Step, int] = {}
        self._node: dict[str, int] = {}  # entity id -> node id
        self._id: dict[int, str] = {}  # node id -> entity id
        self._rows: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # node -> (steps, dst)
        self._absent: set[str] = set()  # ids the graph does not have
        self._edges: dict[int, list[Edge]] = {}  # node -> its rows in the dict form
        # True once every entity of the graph is cached (`preload`): an id not known then
        # is not in the graph, with no query to learn so
        self.complete = False
        # (node ids sorted, the entity-id rank of each), built on first use once complete
        self._ranks: tuple[np.ndarray | None, np.ndarray] | None = None
        self._csr: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None
        self._sorted: tuple[list[Step], np.ndarray] = ([], _EMPTY)  # _sorted_steps()

    @property
    def round_trips(self) -> int:
        return self.source.round_trips

    @property
    def entities(self) -> int:
        """Entities whose rows are cached."""
        return len(self._rows)

    def preload(self, nodes: Sequence[int], chunk: int = PRELOAD_CHUNK) -> None:
        """Read the rows of `nodes`, every entity of the graph, now: the same query as on
        demand, a chunk of node ids at a time, so the same rows (the fan-out cap is per
        entity). `cpr serve` then answers from memory, with no neighbour query."""
        if len(nodes) > self.max_entities:
            raise ValueError(f"{len(nodes)} entities: more than this cache keeps")
        for start in range(0, len(nodes), chunk):
            self._store(self.source.adjacency([], list(nodes[start : start + chunk]), True))
        self.complete = True
        self.id_rank(_EMPTY)  # now, so that every copy shares them
        self._columns()

    def copy(self) -> CachedAdjacency:
        """A cache of its own over the same source, holding these rows (arrays shared: they
        are never written in place), for a caller that must not share one across threads."""
        new = CachedAdjacency(self.source, self.max_entities)
        new._steps, new._code = list(self._steps), dict(self._code)
        new._node, new._id, new._rows = dict(self._node), dict(self._id), dict(self._rows)
        new._absent, new.complete = set(self._absent), self.complete
        new._ranks, new._csr, new._sorted = self._ranks, self._csr, self._sorted
        return new

    def id_rank(self, nodes: np.ndarray) -> np.ndarray:
        """Numbers that order `nodes` as their entity ids order (Python's str order): one
        sort of every id per graph instead of one per hop and per answer list. A table
        indexed by node id (-1: no id known), or sorted node ids to search when the ids
        are too sparse for one."""
        if self._ranks is None:
            by_id = np.array(sorted(self._id, key=self._id.__getitem__), dtype=np.int64)
            top = int(by_id.max()) + 1 if len(by_id) else 0
            if top <= max(DENSE_RANKS, DENSE_PER_ENTITY * len(by_id)):
                table = np.full(top, -1, dtype=np.int64)
                table[by_id] = np.arange(len(by_id))
                self._ranks = (None, table)
            else:
                ranks = np.argsort(by_id)  # the rank of each node, in node order
                self._ranks = (by_id[ranks], ranks)
        known, ranks = self._ranks
        if known is None:
            out = ranks[np.minimum(nodes, len(ranks) - 1)] if len(ranks) else nodes
            if len(nodes) and (out.min() < 0 or nodes.max() >= len(ranks)):
                raise RuntimeError("a node without an entity id was ranked")  # not complete
            return out
        at = np.searchsorted(known, nodes)
        if len(nodes) and not np.array_equal(known[np.minimum(at, len(known) - 1)], nodes):
            raise RuntimeError("a node without an entity id was ranked")  # not complete
        return ranks[at]

    def _columns(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Every cached row in one CSR layout: (nodes sorted, offsets, step codes, dst)."""
        if self._csr is None:
            keys = sorted(self._rows)
            rows = [self._rows[n] for n in keys]
            offsets = np.zeros(len(rows) + 1, dtype=np.int64)
            np.cumsum([len(d) for _, d in rows], out=offsets[1:])
            code = np.concatenate([c for c, _ in rows]) if rows else _EMPTY
            dst = np.concatenate([d for _, d in rows]) if rows else _EMPTY
            self._csr = (np.array(keys, dtype=np.int64), offsets, code, dst)
        return self._csr

    def _gather(self, found: list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(src, step code, dst) of the rows of `found`, in that order: gathered from the
        CSR columns in numpy once every entity is cached, else row by row."""
        if self.complete:
            keys, offsets, all_code, all_dst = self._columns()
            nodes = np.asarray(found, dtype=np.int64)
            at = np.searchsorted(keys, nodes)
            first = offsets[at]
            counts = offsets[at + 1] - first
            rows = np.repeat(first - np.cumsum(counts) + counts, counts)
            rows += np.arange(len(rows))
            return np.repeat(nodes, counts), all_code[rows], all_dst[rows]
        steps = [self._rows[n][0] for n in found]
        dsts = [self._rows[n][1] for n in found]
        counts = [len(d) for d in dsts]
        code = np.concatenate(steps) if steps else _EMPTY
        dst = np.concatenate(dsts) if dsts else _EMPTY
        return np.repeat(np.asarray(found, dtype=np.int64), counts), code, dst

    def adjacency(self, ids: Sequence[str], nodes: Sequence[int], names: bool) -> Adjacency:
        found = self._resolve(ids, nodes)
        src, code, dst = self._gather(found)
        steps, local = self._sorted_steps()
        # asked by node (TreeG's later hops), a complete cache hands over every id it holds:
        # a superset naming the same nodes, not a dict of thousands built per hop
        complete = self.complete and not ids
        return Adjacency(
            frontier=self._id if complete else {n: self._id[n] for n in found},
            steps=steps,
            src=src,
            step=local[code] if len(code) else _EMPTY,
            dst=dst,
            names=self._id if names else {},
            rank=self.id_rank if self.complete else None,
        )

    def _sorted_steps(self) -> tuple[list[Step], np.ndarray]:
        """Every step held, sorted, and each code's place among them: a request's steps as
        a superset of those its rows use, in the same order (no sort of its rows' codes)."""
        steps, local = self._sorted
        if len(steps) != len(self._steps):
            order = sorted(range(len(self._steps)), key=self._steps.__getitem__)
            local = np.empty(len(order), dtype=np.int64)
            local[order] = np.arange(len(order))
            self._sorted = steps, local = [self._steps[i] for i in order], local
        return steps, local

    def neighbours(self, ids: Sequence[str]) -> dict[str, list[Edge]]:
        """The dict form, memoised per entity (PUCT and open expansion ask for hubs again)."""
        out = {}
        for n in self._resolve(ids, []):
            edges = self._edges.get(n)
            if edges is None:
                code, dst = self._rows[n]
                pairs = zip(code.tolist(), dst.tolist(), strict=True)
                edges = self._edges[n] = sorted((self._steps[k], self._id[v]) for k, v in pairs)
            if edges:
                out[self._id[n]] = edges
        return out

    def _resolve(self, ids: Sequence[str], nodes: Sequence[int]) -> list[int]:
        """Node ids of the entities asked for that the graph has (in order, once each; a
        complete cache asked by node: sorted), fetching the rows not cached yet: by node id
        when known, else by entity id."""
        if not nodes:  # fast path (PUCT asks for one or two cached entities at a time)
            known = [self._node.get(i) for i in ids]
            if all(n is not None and n in self._rows for n in known):
                return list(dict.fromkeys(known))  # type: ignore[arg-type]
        elif not ids and self.complete:  # TreeG's later hops: thousands of node ids at once
            asked = np.unique(np.asarray(nodes, dtype=np.int64))  # checked in numpy
            keys = self._columns()[0]
            at = np.minimum(np.searchsorted(keys, asked), max(len(keys) - 1, 0))
            if len(keys) and (keys[at] == asked).all():
                return asked  # type: ignore[return-value]  # sorted node ids, once each
        elif not ids:  # fast path (later hops, mostly cached)
            asked = list(dict.fromkeys(nodes))
            if all(map(self._rows.__contains__, asked)):
                return asked
        wanted = [self._node.get(i, i) for i in dict.fromkeys(ids) if i not in self._absent]
        if self.complete:  # an id not cached is not in the graph
            wanted = [w for w in wanted if not isinstance(w, str)]
        wanted += list(nodes)
        by_id = [i for i in wanted if isinstance(i, str)]
        by_node = [n for n in dict.fromkeys(wanted) if isinstance(n, int) and n not in self._rows]
        if len(self._rows) + len(by_id) + len(by_node) > self.max_entities:
            self._rows.clear()  # rare: drop everything rather than track recency
            self._edges.clear()
            self.complete = False
            by_node = [n for n in dict.fromkeys(wanted) if isinstance(n, int)]
        if by_id:
            self._store(self.source.adjacency(by_id, [], True))
            self._absent.update(i for i in by_id if i not in self._node)
        if by_node:
            self._store(self.source.adjacency([], by_node, True))
        out = (self._node.get(w) if isinstance(w, str) else w for w in wanted)
        return [n for n in dict.fromkeys(out) if n is not None and n in self._rows]

    def _store(self, adj: Adjacency) -> None:
        self._ranks = self._csr = None  # new entities may come
        for n, i in adj.frontier.items():
            self._node[i], self._id[n] = n, i
        for v, i in adj.names.items():
            self._node.setdefault(i, v)
            self._id.setdefault(v, i)
        codes = np.array([self._code_of(s) for s in adj.steps], dtype=np.int64)
        order = np.argsort(adj.src, kind="stable")
        src, dst = adj.src[order], adj.dst[order]
        code = codes[adj.step[order]] if len(codes) else _EMPTY
        keys, first = np.unique(src, return_index=True)
        bounds = np.append(first, len(src))
        for k, n in enumerate(keys.tolist()):
            rows = slice(bounds[k], bounds[k + 1])
            self._rows[n] = (code[rows], dst[rows])
        for n in adj.frontier:  # entities without edges: cached as such
            self._rows.setdefault(n, (_EMPTY, _EMPTY))

    def _code_of(self, step: Step) -> int:
        code = self._code.get(step)
        if code is None:
            code = self._code[step] = len(self._steps)
            self._steps.append(step)
        return code
