"""Per-answer columns of one TreeG retrieval: what every score family reads.

A retrieval holds candidate relation *sequences*, each with the set of entities it
reaches. An answer is one entity; for it we keep
- cost: the min cost over the sequences reaching it (the paper's per-answer cost),
- length: the hop count of that best sequence (ties: the shortest), which gives the
  question's group (the best answer's length) for group-conditional calibration,
- surprisal: -log of the softmax mass, over the question's candidate sequences at
  temperature T, of the sequences that reach it. If exactly one sequence is the right
  relation path, that mass is the model's probability that this entity is an end of it,
  i.e. a correct answer: an entity reached by several good sequences is likelier than one
  reached by one. Kept as -log (log-sum-exp per answer), because far from the best
  sequence the mass underflows and 1 - mass would tie thousands of answers at 1.0.

Every column is a function of the question's own candidates, so scores built from them
keep the conformal guarantee. Topics are dropped unless the retrieval keeps them as
answers (a dataset setting, see search/frontier.py).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from itertools import compress
from typing import Any

import numpy as np

from cpr_neo4j.search.candidates import name_all


@dataclass(frozen=True)
class AnswerColumns:
    # answer entity ids in rank order; None: named from `nodes` through `names` on first use
    # (a 3-hop question has thousands of answers and `cpr ask` shows a few of them)
    named: list[str] | None
    cost: np.ndarray  # float64, ascending; sorted by (cost, id), or see ties_by_id
    length: np.ndarray  # int8, hop count of the best sequence
    surprisal: np.ndarray  # float64 >= 0: -log P(answer); zeros when no temperature given
    nodes: np.ndarray | None = None  # each answer's node id (node columns), for its witness
    names: Mapping[int, str] | None = field(default=None, repr=False, compare=False)
    # False: equal costs are in node-id order, not entity-id order (a search whose answers
    # were left unnamed: `ordered` and `group` name the few answers that need it)
    ties_by_id: bool = True

    def __len__(self) -> int:
        return len(self.cost)

    @cached_property
    def ids(self) -> list[str]:
        """Every answer's entity id, in rank order."""
        if self.named is not None:
            return self.named
        return name_all(self.names, self.nodes.tolist())  # type: ignore[arg-type, union-attr]

    def id_at(self, k: int) -> str:
        """The entity id of the answer at position k, without naming the others."""
        if self.named is not None:
            return self.named[k]
        return name_all(self.names, [int(self.nodes[k])])[0]  # type: ignore[arg-type, index]

    def ordered(self, positions: np.ndarray, scores: np.ndarray) -> np.ndarray:
        """`positions` in rank order: by score, then cost, then entity id (naming only
        these answers when ties are not already in id order)."""
        positions = np.asarray(positions, dtype=np.int64)
        if self.ties_by_id or len(positions) < 2:
            return positions[np.lexsort((positions, scores[positions]))]
        ids = name_all(self.names, self.nodes[positions].tolist())  # type: ignore[arg-type, index]
        by_id = np.empty(len(ids), dtype=np.int64)
        by_id[sorted(range(len(ids)), key=ids.__getitem__)] = np.arange(len(ids))
        return positions[np.lexsort((by_id, self.cost[positions], scores[positions]))]

    @property
    def group(self) -> int:
        """The question's group: the length of its best answer's best sequence (0: none)."""
        if not len(self.length):
            return 0
        top = np.flatnonzero(self.cost == self.cost[0])  # the best answers (cost ascending)
        if self.ties_by_id or (self.length[top] == self.length[0]).all():
            return int(self.length[0])
        return int(self.length[self.ordered(top, self.cost)[0]])  # the best by id


def _softmax(costs: np.ndarray, temperature: float) -> np.ndarray:
    z = -(costs - costs.min()) / temperature
    e = np.exp(z)
    return e / e.sum()


def _log_softmax(costs: np.ndarray, temperature: float) -> np.ndarray:
    z = -(costs - costs.min()) / temperature
    return z - np.log(np.exp(z).sum())


def answer_columns(
    retrieval: Any, temperature: float | None = None, topics_are_answers: bool = False
) -> AnswerColumns:
    """The answers of a treeg.Retrieval (duck-typed) as columns, ranked by (cost, id)."""
    cands = [c for c in retrieval.candidates() if len(c.ends)]
    if not cands:
        empty = np.zeros(0)
        return AnswerColumns(
            named=[], cost=empty, length=np.zeros(0, dtype=np.int8), surprisal=empty
        )
    seq_cost = np.array([c.cost for c in cands], dtype=float)
    sizes = [len(c.ends) for c in cands]
    ends = [_end_keys(c.ends) for c in cands]
    keys = np.concatenate(ends)
    costs = np.repeat(seq_cost, sizes)
    lengths = np.repeat(np.array([len(c.path) for c in cands], dtype=np.int8), sizes)
    finite = np.isfinite(seq_cost)
    logp = np.full(len(cands), -np.inf)
    if temperature and finite.any():
        logp[finite] = _log_softmax(seq_cost[finite], temperature)
    elif not temperature:
        logp[:] = 0.0  # no temperature: surprisal stays 0 (unused)
    logw = np.repeat(logp, sizes)
    # per key: min cost, the length of the min-cost sequence (shortest on ties), and the
    # log of the summed mass (log-sum-exp around the key's largest term)
    order = np.lexsort((lengths, costs, keys))
    keys, costs, lengths, logw = keys[order], costs[order], lengths[order], logw[order]
    first = np.ones(len(keys), dtype=bool)
    first[1:] = keys[1:] != keys[:-1]
    starts = np.flatnonzero(first)
    seg = np.cumsum(first) - 1
    top = np.maximum.reduceat(logw, starts) if len(starts) else np.zeros(0)
    safe = np.where(np.isfinite(top), top, 0.0)
    summed = np.add.reduceat(np.exp(logw - safe[seg]), starts) if len(starts) else top
    with np.errstate(divide="ignore"):
        surprisal = np.where(np.isfinite(top), -(safe + np.log(summed)), np.inf)
    surprisal = np.maximum(surprisal, 0.0) if temperature else np.zeros(len(starts))
    ukeys, ucost, ulen = keys[first], costs[first], lengths[first]
    node_columns = len(ukeys) and ukeys[0] >= 0  # sorted keys: dict ends' codes are < 0
    id_rank = getattr(retrieval, "id_rank", None) if node_columns else None
    topic_nodes = getattr(retrieval, "topic_nodes", None) if node_columns else None
    # the ends were left unnamed (treeg's defer_names): equal costs stay in node order
    deferred = bool(node_columns) and getattr(retrieval, "names_deferred", False)
    # a search's columns (node id order and topic nodes known) are named on first use
    lazy = (id_rank is not None or deferred) and (topics_are_answers or topic_nodes is not None)
    ids = None if lazy else _names(retrieval, cands, ukeys)
    if not topics_are_answers:
        if ids is None:
            topic = np.isin(ukeys, topic_nodes)  # entity ids are unique: node <=> id
        else:
            topics = set(retrieval.topics)
            topic = np.fromiter(map(topics.__contains__, ids), bool, len(ids))
        if topic.any():  # none unless topic ends were kept: a few at most
            keep = ~topic
            ukeys, ucost, ulen, surprisal = (a[keep] for a in (ukeys, ucost, ulen, surprisal))
            ids = None if ids is None else list(compress(ids, keep.tolist()))
    if id_rank is not None:  # every node's id order known: one numeric sort
        rank = np.lexsort((id_rank(ukeys), ucost))
    elif ids is None:  # unnamed: ties by node id (AnswerColumns.ordered names the few shown)
        rank = np.lexsort((ukeys, ucost))
    else:
        rank = rank_by_cost_then_id(ucost, ids)
    nodes = ukeys[rank] if node_columns else None
    if ids is None:
        names = cands[0].ends.names
        by_id = id_rank is not None
        return AnswerColumns(
            named=None,
            cost=ucost[rank],
            length=ulen[rank],
            surprisal=surprisal[rank],
            nodes=nodes,
            names=names,
            ties_by_id=by_id,
        )
    ranked = list(map(ids.__getitem__, rank.tolist()))
    return AnswerColumns(
        named=ranked, cost=ucost[rank], length=ulen[rank], surprisal=surprisal[rank], nodes=nodes
    )


def rank_by_cost_then_id(costs: np.ndarray, ids: list[str]) -> np.ndarray:
    """Indices ordered by (cost, id), ids compared by code point (Python's str order), as
    np.lexsort((ids, costs)) orders them; only runs of equal costs compare ids, so the
    thousands of answers of a question are not turned into a str array and sorted."""
    order = np.argsort(costs, kind="stable")
    c = costs[order]
    same = (c[1:] == c[:-1]) | (np.isnan(c[1:]) & np.isnan(c[:-1]))
    if same.any():
        run = np.flatnonzero(np.diff(np.concatenate(([0], same.astype(np.int8), [0]))))
        for a, b in zip(run[::2].tolist(), run[1::2].tolist(), strict=True):
            part = order[a : b + 1].tolist()
            order[a : b + 1] = sorted(part, key=ids.__getitem__)
    return order


def _end_keys(ends: Any) -> np.ndarray:
    """Node ids for column ends (treeg.Ends); for dict ends, a code per entity id."""
    nodes = getattr(ends, "nodes", None)
    if nodes is not None:
        return np.asarray(nodes, dtype=np.int64)
    return np.array([_code(e) for e in ends], dtype=np.int64)


_CODES: dict[str, int] = {}
_IDS: list[str] = []


def _code(entity: str) -> int:
    """A process-wide code per entity id (dict ends only: in-memory graphs in tests)."""
    if entity not in _CODES:
        _CODES[entity] = len(_IDS)
        _IDS.append(entity)
    return -1 - _CODES[entity]  # negative: never a Neo4j node id


def _names(retrieval: Any, cands: list, keys: np.ndarray) -> list[str]:
    """Entity ids of sorted keys: node ids through the ends' names, codes through _IDS."""
    ks = keys.tolist()
    if not ks or ks[0] < 0:  # dict ends (sorted keys: a node column has none below 0)
        names = getattr(cands[0].ends, "names", None)
        return [_IDS[-1 - k] if k < 0 else names[k] for k in ks]
    return name_all(cands[0].ends.names, ks)


def sequence_hits(retrieval: Any, gold: set[str]) -> tuple[np.ndarray, np.ndarray]:
    """(cost, reaches a gold answer) per finite candidate sequence: what a temperature is
    fitted on (training questions), computed once per question."""
    cands = [c for c in retrieval.candidates() if len(c.ends) and math.isfinite(c.cost)]
    cost = np.array([c.cost for c in cands], dtype=float)
    hit = np.array([not gold.isdisjoint(c.ends) for c in cands], dtype=bool)
    return cost, hit


def sequence_nll(cost: np.ndarray, hit: np.ndarray, temperature: float) -> float:
    """-log of the softmax mass of the sequences that reach a gold answer (inf when none
    does): the loss a temperature is fitted by."""
    if not hit.any():
        return math.inf
    logp = _log_softmax(cost, temperature)
    top = logp[hit].max()
    return float(-(top + math.log(np.exp(logp[hit] - top).sum())))
