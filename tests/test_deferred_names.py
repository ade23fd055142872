"""`cpr ask` leaves a big last hop unnamed (treeg.retrieve's defer_names): the search fetches
its neighbours without entity ids, answers tied on cost stay in node order, and only the
answers shown are named afterwards, in one round trip. Everything a user sees must be what
the named search gives: the same answers, scores, group, rank order (ties by entity id),
best paths and top answer outside an empty set."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence

import numpy as np
import pytest

from cpr_neo4j.search import treeg
from cpr_neo4j.search.answers import answer_columns
from cpr_neo4j.search.base import InMemoryGraph, RelPath
from cpr_neo4j.search.frontier import DictAdjacency
from cpr_neo4j.search.treeg import retrieve


class Unnamed:
    """An in-memory source with Neo4jNeighbours' calls: rows (names only when asked for),
    then `name_nodes`. Its node codes follow first sight, not id order, as node ids do."""

    def __init__(self, triples):
        self.rows = DictAdjacency(InMemoryGraph(triples).neighbours)
        self.round_trips = 0
        self.named: list[int] = []  # nodes per naming round trip

    def adjacency(self, ids, nodes, names):
        self.round_trips += 1
        return self.rows.adjacency(ids, nodes, names)

    def name_nodes(self, nodes):
        self.round_trips += 1
        self.named.append(len(nodes))
        return {n: self.rows.name[n] for n in nodes}


class Costs:
    """'hash': a pseudo-random cost per sequence; 'flat': every sequence costs 0, so the
    best answers tie across lengths and ids decide the group and every rank."""

    model_id = "test"

    def __init__(self, kind: str):
        self.kind = kind

    def question(self, masked_text: str) -> str:
        return masked_text

    def score(self, ctx: object, paths: Sequence[RelPath]) -> np.ndarray:
        if self.kind == "flat":
            return np.zeros(len(paths))
        keys = ["|".join(s.key() for s in p) for p in paths]
        return np.array([int(hashlib.md5(k.encode()).hexdigest()[:6], 16) % 7 for k in keys])


def _graph(seed: int) -> list[tuple[str, str, str]]:
    rng = random.Random(seed)
    ents = [f"e{i:02d}" for i in range(30)]
    rng.shuffle(ents)  # first sight is not id order
    return [(rng.choice(ents), rng.choice("abc"), rng.choice(ents)) for _ in range(90)]


def _shown(cols, scores, tau):
    """What `cpr ask` lists: the answers within tau in rank order, as ids."""
    return [cols.id_at(k) for k in cols.ordered(np.flatnonzero(scores <= tau), scores).tolist()]


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("kind", ["hash", "flat"])
@pytest.mark.parametrize("on", [False, True])
def test_deferred_answers_equal_the_named_ones(seed, kind, on, monkeypatch):
    triples = _graph(seed)
    topics = random.Random(seed).sample(sorted({h for h, _, _ in triples}), 2)
    scorer = Costs(kind)
    named = retrieve(Unnamed(triples), scorer, "q", topics, 3, 64, 64, topic_answers=on)
    monkeypatch.setattr(treeg, "DEFER_NAMES_FROM", 0)  # defer even these small frontiers
    source = Unnamed(triples)
    deferred = retrieve(source, scorer, "q", topics, 3, 64, 64, topic_answers=on, defer_names=True)
    assert deferred.names_deferred and not named.names_deferred
    assert source.round_trips == named.round_trips == 3 and source.named == []
    a, b = answer_columns(named, 0.5, on), answer_columns(deferred, 0.5, on)
    assert a.ties_by_id and not b.ties_by_id
    assert a.group == b.group  # flat costs: the best answer by id decides it
    ties = len(set(a.length[a.cost == a.cost[0]].tolist())) > 1 if len(a) else False
    assert len(source.named) <= int(ties)  # at most one trip, for the best answers alone
    assert np.array_equal(a.cost, b.cost)  # cost order; ties in another order
    by_id = dict(zip(a.ids, zip(a.length.tolist(), a.surprisal.tolist(), strict=True), strict=True))
    b_rows = zip(b.length.tolist(), b.surprisal.tolist(), strict=True)
    assert dict(zip(b.ids, b_rows, strict=True)) == by_id  # every answer's columns, by id
    for tau in np.unique(a.surprisal)[:6]:
        assert _shown(a, a.surprisal, tau) == _shown(b, b.surprisal, tau)
        top = a.ordered(np.arange(len(a)), a.surprisal)[:5]
        for k in top.tolist():
            entity = a.id_at(k)
            kb = b.ids.index(entity)
            assert named.witness(entity, int(a.nodes[k])) == deferred.witness(
                entity, int(b.nodes[kb])
            )
    assert named.answer_costs() == deferred.answer_costs()


def test_small_frontiers_stay_named():
    """Below DEFER_NAMES_FROM entities the last hop fetches ids as before: one round trip a
    hop, nothing named afterwards (a 1- or 2-hop question costs no extra round trip)."""
    triples = _graph(0)
    source = Unnamed(triples)
    r = retrieve(source, Costs("hash"), "q", ["e01"], 2, defer_names=True)
    assert not r.names_deferred and source.named == [] and source.round_trips <= 2
    cols = answer_columns(r, 0.5)
    assert cols.ties_by_id and source.named == []


def _seen(result) -> tuple:
    """Everything an ask shows, but its record's id."""
    rows = [(a.id, a.name, a.rank, a.cost, a.entities, a.path) for a in result.answers]
    out = result.best_outside
    top = out and (out.id, out.cost, out.entities, out.path)
    return rows, top, result.tau, result.group, result.n, result.guarantee, result.notes


@pytest.mark.neo4j
def test_asks_show_what_named_searches_show(store, every_hop, monkeypatch):
    """Real MetaQA questions of 2 and 3 hops asked through the ask stage, its last hop
    deferred (a 3-hop frontier holds ~2,000 entities) or named, at two alphas, with and
    without empty sets: the same answers, ranks, scores, paths, groups and top answers."""
    from cpr_neo4j.errors import CprError
    from cpr_neo4j.stages.ask import answer
    from cpr_neo4j.stages.session import open_session
    from cpr_neo4j.training import questions as qsel

    env = every_hop.env()
    try:
        qs = [q for h in (2, 3) for q in qsel.load(store, "metaqa", "test", h)[:12]]
        deferred = 0
        for alpha, empty in ((0.1, False), (0.5, True)):
            session = open_session(store, alpha, "metaqa", every_hop.model_id, allow_empty=empty)
            run = session.retriever.run
            flags: list[bool] = []

            def spy(*args, run=run, flags=flags, **kw):
                r = run(*args, **kw)
                flags.append(r.names_deferred)
                return r

            session.retriever.run = spy
            for q in qs:
                seen = []
                for threshold in (treeg.DEFER_NAMES_FROM, 10**9):
                    monkeypatch.setattr(treeg, "DEFER_NAMES_FROM", threshold)
                    try:
                        seen.append(_seen(answer(session, q.text)))
                    except CprError as exc:
                        seen.append(str(exc))
                monkeypatch.undo()
                assert seen[0] == seen[1], q.text
            deferred += sum(flags[::2])
            assert not any(flags[1::2])
        assert deferred >= 12  # the 3-hop questions' searches were deferred
    finally:
        env.undo()
