"""The hop-level baseline on a generic-loader graph of MetaQA's shape with 3x bigger hubs
(tests/data/make_hub_graph.py): finite thresholds, its diagnostics, and Bonferroni coverage
over repeated random calibration/test splits of one question pool."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from cpr_neo4j.conformal.threshold import within
from cpr_neo4j.evaluation.hoplevel import (
    FRONTIER_BUDGET,
    VARIANTS,
    calibration_scores,
    graph_caps,
    run_hop_level,
)
from cpr_neo4j.evaluation.hoplevel_thresholds import hop_thresholds, widen
from cpr_neo4j.graph import records
from cpr_neo4j.graph.ingest import ingest
from cpr_neo4j.graph.neighbours import Neo4jNeighbours
from cpr_neo4j.loaders.triples import load_triples
from cpr_neo4j.model.encoder import shared_encoder
from cpr_neo4j.model.scorer import PathScorer
from cpr_neo4j.search.adjacency_cache import CachedAdjacency
from cpr_neo4j.search.open_expansion import Caps, expand_open
from cpr_neo4j.training import questions as qsel
from tests.conftest import drop_dataset
from tests.data.make_hub_graph import NAME, build, write

pytestmark = [pytest.mark.neo4j, pytest.mark.slow]  # `make test-slow`
H = 3  # the model's hop count: every question of the pool (2- and 3-hop) is answered in <= 3
ALPHAS = (0.1, 0.2, 0.3, 0.4, 0.5)


@pytest.fixture(scope="module")
def hubs(store, tmp_path_factory):
    """The graph ingested once (kept, like the metaqa fixture's); re-made when its questions
    or counts differ from what the generator makes now."""
    frames = build()
    info = store.read("dataset_info", dataset=NAME)
    d = info[0]["d"] if info else {}
    have = {r.id for r in records.questions(store, NAME)} if d.get("complete") else set()
    fresh = (
        d.get("triples_source") == frames["triples"].height
        and d.get("entities_source") == frames["entities"].height
        and have == set(frames["questions"].get_column("id").to_list())
    )
    if not fresh:
        if info:
            drop_dataset(store, NAME)
        paths = write(tmp_path_factory.mktemp("hubs"), frames)
        ingest(store, load_triples(NAME, paths["triples"], paths["entities"], paths["questions"]))
    return frames


@pytest.fixture(scope="module")
def parts(store, hubs):
    scorer = PathScorer(shared_encoder(), records.relation_text(store, NAME))
    source = CachedAdjacency(Neo4jNeighbours(store, NAME))
    pool = sorted(qsel.load(store, NAME, "dev", None), key=lambda q: q.id)
    return scorer, source, pool


def test_the_graph_has_metaqas_shape_with_bigger_hubs(store, hubs, parts):
    _, source, pool = parts
    full = Neo4jNeighbours(store, NAME, fanout_cap=10**6).neighbours(["Drama"])["Drama"]
    assert len(full) == 3 * 4016  # ~has_genre edges of every copy's dramas
    assert len(source.neighbours(["Drama"])["Drama"]) == 2000  # TreeG's fan-out cap
    frontier = min(hubs["entities"].height, FRONTIER_BUDGET)  # 118,271 entities: the budget
    assert graph_caps(store, NAME, H) == Caps(sequences=18**3, frontier=frontier)
    assert len(pool) == 800 and {q.hops for q in pool} == {2, 3}


@pytest.mark.parametrize("hops", [3, None])  # 3-hop questions; the 2- and 3-hop mix
def test_finite_thresholds_and_the_reasons_on_the_hub_graph(store, parts, hops):
    scorer, source, pool = parts
    qs = [q for q in pool if hops is None or q.hops == hops]
    random.Random(1).shuffle(qs)
    cal, test = qs[:300], qs[300:400]
    out = run_hop_level(store, NAME, scorer, cal, test, H, ALPHAS, source)
    d = out["diagnostics"]
    for v in VARIANTS:
        for a in ALPHAS:
            row = out["results"][v][a]
            # attainable: no +inf; a tau may be -inf where most gold branches ended earlier
            assert row["attainable"] and not np.isposinf(row["taus"]).any(), (v, a)
            assert row["inexact"] == 0
    assert d["calibration"]["with_gold"] >= 0.97 * len(cal)
    if hops is None:  # the nearer answers are calibrated, not +inf as before
        assert d["calibration"]["gold_length"][2] >= 0.3 * len(cal)
    assert (
        d["calibration"]["cap_bound"]["sequences"] == d["calibration"]["cap_bound"]["frontier"] == 0
    )
    assert d["test"]["capped"] == 0
    # 8 hubs pass the fan-out cap here (2 in MetaQA): searches meet their cut lists
    assert d["calibration"]["cap_bound"]["fanout"] > 0 and d["test"]["fanout_cut"] > 0
    assert d["test"]["reached_gold"] >= 0.9 * len(test)
    assert d["test"]["gold_reachable"] >= d["test"]["reached_gold"]


def test_a_cap_that_binds_is_counted_and_only_loses(store, parts):
    scorer, source, pool = parts
    qs = [q for q in pool if q.hops == 3]
    cal, test = qs[:80], qs[80:120]
    full = run_hop_level(store, NAME, scorer, cal, test, H, (0.2,), source)
    tight = Caps(sequences=40, frontier=3000)
    capped = run_hop_level(store, NAME, scorer, cal, test, H, (0.2,), source, caps=tight)
    d = capped["diagnostics"]
    assert d["caps"] == {
        "sequences": 40,
        "frontier": 3000,
        "sized_to_graph": False,
        "fanout": 2000,
    }
    assert d["test"]["capped"] > 0 and sum(map(sum, d["test"]["cap_bound"].values())) > 0
    assert capped["notes"][2].count(" for ") >= 1  # the note names the cap and how often
    for v in VARIANTS:
        a, b = capped["results"][v][0.2], full["results"][v][0.2]
        assert b["inexact"] == 0 and a["inexact"] <= d["test"]["capped"]
        # the loosest row (Bonferroni) runs at the thresholds the cut lies under
        assert a["inexact"] > 0 or v != "UaG hop-level, Bonferroni (V_sem)"
        if a["taus"] == b["taus"]:  # (a gold-search bind could have moved them)
            # a cap drops sequences, never adds: sets and coverage only shrink
            assert (a["size"] <= b["size"]).all() and (a["covered"] <= b["covered"]).all()


def test_bonferroni_covers_over_repeated_random_splits(store, parts):
    """R random splits of the 800-question pool into n = 400 calibration and m = 400 test.

    Under a uniformly random split the pool's questions are exchangeable, so each hop's
    P(S_t(test) > tau_t) <= alpha/H and, by the union bound, a split's expected coverage
    is >= 1 - alpha. The mean over R independent splits estimates that expectation; a
    split's coverage has variance at most 1/(4m) (its m test questions) plus the wobble of
    its H thresholds, each a conditional miss rate with variance <= alpha_t/n, summed as
    standard deviations: (H sqrt(alpha_t/n))^2 = H alpha/n. So the mean's standard error is
    at most sqrt((1/(4m) + H alpha/n) / R) (<= 0.0047 at alpha = 0.5, R = 200), and the
    test asks mean >= 1 - alpha - 3 SE. Costs are computed once per question: the score
    S(q) by the gold search, and ONE open expansion at the loosest thresholds any split
    and alpha uses, which every split filters (exact: no cap binds, asserted).
    """
    scorer, source, pool = parts
    n, m, repeats = 400, 400, 200
    scores = calibration_scores(source, scorer, pool, H).scores
    rng = np.random.default_rng(0)
    splits = [rng.permutation(len(pool)) for _ in range(repeats)]
    taus = {
        (r, v, a): hop_thresholds(scores[order[:n]], a, corr)
        for r, order in enumerate(splits)
        for v, corr in VARIANTS.items()
        for a in ALPHAS
    }
    assert not any(np.isposinf(t).any() for t in taus.values())
    loosest = widen(np.max(np.stack(list(taus.values())), axis=0))
    ctxs = scorer.questions([q.masked for q in pool])
    hits = []  # per question: prefix costs (-inf padded) of the survivors that reach gold
    for q, ctx in zip(pool, ctxs, strict=True):
        cost = lambda paths, ctx=ctx: scorer.v_sem(ctx, paths)  # noqa: E731
        run = expand_open(source, cost, q.topics, loosest)
        assert not run.capped
        gold = set(q.answers)
        hit = [s.costs + (-math.inf,) * (H - len(s.costs)) for s in run.every if s.ends & gold]
        hits.append(np.array(hit, dtype=float).reshape(-1, H))
    cover = {(v, a): [] for v in VARIANTS for a in ALPHAS}
    for r, order in enumerate(splits):
        test = order[n : n + m]
        for v in VARIANTS:
            for a in ALPHAS:
                t = taus[r, v, a]
                got = np.array([within(hits[i], t).all(axis=1).any() for i in test])
                assert got[within(scores[test], t).all(axis=1)].all()  # the union bound's step
                cover[v, a].append(got.mean())
    for a in ALPHAS:
        se = math.sqrt((0.25 / m + H * a / n) / repeats)
        bonf = float(np.mean(cover["UaG hop-level, Bonferroni (V_sem)", a]))
        assert bonf >= 1 - a - 3 * se, (a, bonf, se)
    # uncorrected, the per-hop quantiles compound: below target here, the failure UaG shows
    se = math.sqrt((0.25 / m + H * 0.3 / n) / repeats)
    assert np.mean(cover["UaG hop-level, uncorrected (V_sem)", 0.3]) < 0.7 - 3 * se
