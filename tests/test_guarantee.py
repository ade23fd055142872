"""conformal.guarantee: requests, thresholds from stored calibrations, sentences, serving
rules; and the guarantee's validity on synthetic questions over random calibration draws."""

from __future__ import annotations

import itertools
import json
import math
from fractions import Fraction
from functools import cache
from itertools import pairwise

import numpy as np
import pytest
from scipy import stats

from cpr_neo4j.conformal.guarantee import (
    ALL_HOPS,
    COVERAGE,
    DEFAULT_DELTA,
    FNR,
    Calibrated,
    Request,
    Threshold,
    cut_set,
    population_of,
    refuse_fnr_delta,
    request,
    serving,
)
from cpr_neo4j.conformal.mondrian import MIN_GROUP, SMALL
from cpr_neo4j.conformal.scores import from_spec
from cpr_neo4j.conformal.sets import SetCounter
from cpr_neo4j.conformal.threshold import TOLERANCE
from cpr_neo4j.errors import BadInput, CprError
from cpr_neo4j.evaluation.table import CandidateTable, TableBuilder

SPEC = {"family": "centred", "centre": 0.97}

# ---------------------------------------------------------------- synthetic questions

HOPS, HOP_P = (1, 2, 3), (0.45, 0.35, 0.20)
GOLD_MU = {1: 0.0, 2: 0.3, 3: 0.9}  # the correct sequence's cost: 3-hop is the hard group
GOLD_SD = {1: 0.5, 2: 0.6, 3: 0.8}


def synthetic(rng, n, recall=0.97, p_empty=0.005, p_missed=0.2, shift=0.0, prefix="q"):
    """Multi-answer questions shaped like MetaQA's retrieval output. A question of h hops
    has one correct relation sequence (found with probability `recall`) ending at 1-5 gold
    answers, all tied at the sequence's cost (rounded to 0.01, so costs tie across
    sequences too); a gold answer or two may be missing from the candidates altogether
    (they count in |Y|); 2-7 wrong sequences of 1-5 answers each. The group is the hop
    length of the top-ranked candidate's sequence (a function of the candidates only);
    `p_empty` of the questions have no candidates at all (group 0)."""
    b = TableBuilder(0.5)
    for i in range(n):
        h = int(rng.choice(HOPS, p=HOP_P))
        qid, text = f"{prefix}{i}", f"{h}-hop template {int(rng.integers(30))}"
        gold = {f"{qid}g{k}" for k in range(int(rng.integers(1, 6)))}
        missed = {f"{qid}miss{k}" for k in range(int(rng.binomial(2, p_missed)))}
        if rng.random() < p_empty:
            b.add(qid, h, text, gold | missed, [], np.zeros(0), np.zeros(0), 0)
            continue
        seqs = []  # (cost, hop length, answer ids)
        if rng.random() < recall:
            c = GOLD_MU[h] + shift + rng.normal(0, GOLD_SD[h])
            seqs.append((round(c, 2), h, sorted(gold)))
        for j in range(int(rng.integers(2, 8))):
            length = h if rng.random() < 0.7 else int(rng.integers(1, 4))
            ids = [f"{qid}w{j}e{k}" for k in range(int(rng.integers(1, 6)))]
            seqs.append((round(float(rng.normal(1.0, 0.7)), 2), length, ids))
        rows = sorted((c, e, length) for c, length, ids in seqs for e in ids)
        b.add(qid, h, text, gold | missed, [r[1] for r in rows], np.array([r[0] for r in rows]),
              np.array([r[0] for r in rows]), rows[0][2])  # fmt: skip
    return b.build()


def _calibrated(t: CandidateTable, population=None) -> Calibrated:
    score = from_spec(t.qidx, t.cost, SPEC)
    return Calibrated.from_flat(t.qidx, score, t.gold, t.n_gold, t.group, population or {})


# ---------------------------------------------------------------- brute-force oracles


@cache
def _k(n: int, alpha: float, delta: float | None) -> int:
    if delta is None:
        return math.ceil((n + 1) * (1 - Fraction(str(alpha))))
    ok = [k for k in range(1, n + 1) if stats.binom.sf(k - 1, n, 1 - alpha) <= delta]
    return ok[0] if ok else n + 1


def _floor(alpha: float, delta: float | None) -> int:
    """max(MIN_GROUP, the questions a finite threshold needs), spelled out."""
    if delta is None:
        need = math.ceil((1 - Fraction(str(alpha))) / Fraction(str(alpha)))
    else:
        need = next(n for n in range(1, 10**6) if (1 - alpha) ** n <= delta)
    return max(MIN_GROUP, need)


def _pool_members(groups: np.ndarray, g: int, alpha=0.1, delta=None) -> np.ndarray:
    """conformal.mondrian's pools, spelled out, with the test question counted in its
    group: own pool when that count exceeds the floor; else all small groups together when
    their count does; else every question. Group 0 (no candidates) is first counted in the
    largest group (guarantee.Calibrated.label)."""
    floor = _floor(alpha, delta)
    top = int(groups.max())
    groups = np.where(groups == 0, top, groups)
    g = top if g == 0 else g
    counts = {int(k): int((groups == k).sum()) for k in np.unique(groups)}
    counts[g] = counts.get(g, 0) + 1
    if counts[g] > floor:
        return groups == g
    small = [k for k, v in counts.items() if v <= floor]
    if sum(counts[k] for k in small) > floor:
        return np.isin(groups, small)
    return np.ones(groups.size, bool)


def _top_gold(t: CandidateTable, score: np.ndarray) -> np.ndarray:
    """Per gold candidate slot: is it tied (within the tolerance) with its question's best
    score, i.e. in the top level every never-empty set holds?"""
    top = np.zeros(len(score), bool)
    for i in range(t.n):
        lo, hi = t.start[i], t.start[i + 1]
        if hi > lo:
            best = score[lo:hi].min()
            top[lo:hi] = score[lo:hi] <= best + TOLERANCE * (1 + abs(best))
    return top & t.gold


def _brute_tau(t: CandidateTable, alpha, delta, g, grouped=True, eff=False) -> float:
    """eff: effective scores, -inf where the top level holds a gold answer."""
    score = from_spec(t.qidx, t.cost, SPEC)
    top = _top_gold(t, score)
    S = np.array(
        [-np.inf if eff and top[t.start[i] : t.start[i + 1]].any() else
         score[t.start[i] : t.start[i + 1]][t.gold[t.start[i] : t.start[i + 1]]].min(initial=np.inf)
         for i in range(t.n)]
    )  # fmt: skip
    mine = S[_pool_members(t.group, g, alpha, delta)] if grouped else S
    k = _k(mine.size, alpha, delta)
    return float(np.sort(mine)[k - 1]) if k <= mine.size else math.inf


def _brute_lam(t: CandidateTable, alpha, g, grouped=True, eff=False) -> float:
    """lambda-hat: the smallest gold score whose cumulative weight sum 1/|Y_i| over gold
    candidates at or below it reaches (n+1)(1-alpha), in rationals (eff: top-level gold
    candidates score -inf)."""
    score = from_spec(t.qidx, t.cost, SPEC)
    top = _top_gold(t, score)
    score = np.where(top, -np.inf, score) if eff else score
    q = np.flatnonzero(_pool_members(t.group, g, alpha) if grouped else np.ones(t.n, bool))
    q = q[t.n_gold[q] > 0]
    rows = [(score[j], int(t.n_gold[i])) for i in q for j in range(t.start[i], t.start[i + 1])
            if t.gold[j]]  # fmt: skip
    need = (len(q) + 1) * (1 - Fraction(str(alpha)))
    w = Fraction(0)
    for s, ng in sorted(rows):
        w += Fraction(1, ng)
        if w >= need:
            return float(s)
    return math.inf


# ---------------------------------------------------------------- requests


def test_request_validation():
    assert Request(0.1).delta == DEFAULT_DELTA and Request(0.1).risk == COVERAGE
    assert Request(0.1).grouped and not Request(0.1).allow_empty
    for bad in (0.0, 1.0, -0.2, 1.5):
        with pytest.raises(BadInput, match="alpha"):
            Request(bad)
    for bad in (0.0, 1.0, -0.1, 2.0):
        with pytest.raises(BadInput, match="delta"):
            Request(0.1, bad)
    with pytest.raises(BadInput, match="risk"):
        Request(0.1, risk="precision")
    assert Request(0.1, None).pac is None and Request(0.1, 0.05).pac == 0.05
    assert Request(0.1, 0.05, FNR).pac is None  # risk control bounds an expectation only


def test_request_maps_delta_zero_to_the_marginal_guarantee():
    assert request(0.2, 0).delta is None and request(0.2, 0.0).delta is None
    assert request(0.2, None).delta is None
    assert request(0.2).delta == DEFAULT_DELTA and request(0.2, 0.1).delta == 0.1
    r = request(0.3, 0, FNR, allow_empty=True, grouped=False)
    assert (r.alpha, r.risk, r.allow_empty, r.grouped) == (0.3, FNR, True, False)
    with pytest.raises(BadInput):
        request(0.3, 1.0)


# ---------------------------------------------------------------- thresholds


@pytest.fixture(scope="module")
def cal_table() -> CandidateTable:
    # groups 1-3 have their own pools; group 0 (no candidates) joins the largest, group 3
    return synthetic(np.random.default_rng(11), 700, recall=0.95, p_empty=0.02)


def test_coverage_thresholds_equal_brute_force(cal_table):
    t = cal_table
    c = _calibrated(t)
    counts = np.bincount(t.group)
    assert counts[0] < MIN_GROUP <= counts[1:].min()  # own pools 1-3, group 0 inside 3
    for alpha in (0.05, 0.1, 0.3, 0.5):
        for delta in (None, 0.05, 0.2):
            for g in (0, 1, 2, 3, 7):  # 7: a group calibration never saw
                for grouped, eff in itertools.product((True, False), (True, False)):
                    th = c.threshold(Request(alpha, delta, grouped=grouped, effective=eff), g)
                    assert th.value == _brute_tau(t, alpha, delta, g, grouped, eff), (
                        alpha, delta, g, grouped, eff,
                    )  # fmt: skip
                    assert th.attainable == (th.value < math.inf)
    th = c.threshold(Request(0.1), 2)
    assert (th.group, th.pool, th.n) == (2, "g2", int(counts[2]))
    assert c.threshold(Request(0.1), 0).pool == "g3"  # no candidates: the largest group's
    assert c.threshold(Request(0.1), 0).n == int(counts[0] + counts[3])
    assert c.threshold(Request(0.1, grouped=False), 2).group == 0  # ungrouped: group ignored
    # many questions at once: each gets its own group's threshold
    groups = np.array([3, 1, 2, 2, 0, 7])
    req = Request(0.2, None)
    want = [c.threshold(req, int(g)).value for g in groups]
    assert c.thresholds(req, groups).tolist() == want


def test_small_groups_are_pooled_and_said_so():
    rng = np.random.default_rng(12)
    parts = [synthetic(rng, n, prefix=f"p{j}") for j, n in enumerate((300, 300))]
    t = CandidateTable.concat(parts)
    t.group[:] = 1
    t.group[:20], t.group[20:35] = 4, 5  # two small groups, 35 questions together: SMALL
    c = _calibrated(t)
    for g in (4, 5, 9):
        th = c.threshold(Request(0.1, None), g)
        assert th.pool == SMALL and th.n == 35
        assert th.value == _brute_tau(t, 0.1, None, g)
    assert any("[4, 5]" in n and "pooled together" in n for n in c.notes(Request(0.1)))
    assert c.notes(Request(0.1, grouped=False)) == []


def test_fnr_thresholds_equal_brute_force(cal_table):
    t = cal_table
    c = _calibrated(t)
    for alpha in (0.2, 0.3, 0.5, 0.8):
        for g in (0, 1, 2, 3):
            for grouped in (True, False):
                for eff in (True, False):
                    req = Request(alpha, None, FNR, grouped=grouped, effective=eff)
                    th = c.threshold(req, g)
                    assert th.value == _brute_lam(t, alpha, g, grouped, eff), (alpha, g, eff)
    # delta is ignored in FNR mode (an expectation): the same lambda with or without it
    assert c.threshold(Request(0.3, 0.05, FNR), 1) == c.threshold(Request(0.3, None, FNR), 1)


def test_stored_calibration_round_trip_gives_identical_thresholds(cal_table):
    c = _calibrated(cal_table)
    props = c.to_props()
    for key, values in props.items():  # what a Neo4j node property holds: flat lists
        assert isinstance(values, list) and all(isinstance(v, (int, float)) for v in values), key
    node = {**props, "id": "cal-1", "n": cal_table.n, "dataset": "synthetic",
            "hop_counts": [1, 2, 3]}  # fmt: skip
    for stored in (node, json.loads(json.dumps(node))):
        back = Calibrated.from_node(stored)
        assert back.population == {"n": cal_table.n, "dataset": "synthetic",
                                   "hops_label": "1-3 hops"}  # fmt: skip
        for risk in (COVERAGE, FNR):
            for grouped in (True, False):
                for alpha in (0.1, 0.3, 0.6):
                    req = Request(alpha, 0.05 if risk == COVERAGE else None, risk, False, grouped)
                    for g in (0, 1, 2, 3):
                        assert back.threshold(req, g) == c.threshold(req, g), (risk, grouped, g)
        assert back.to_props() == props


def test_grouped_thresholds_differ_when_groups_differ(cal_table):
    c = _calibrated(cal_table)
    for req in (Request(0.1, None), Request(0.2), Request(0.3, None, FNR)):
        taus = [c.threshold(req, g).value for g in (1, 2, 3)]
        assert taus[0] < taus[1] < taus[2], (req, taus)  # harder groups, higher thresholds
        one = c.threshold(Request(req.alpha, req.delta, req.risk, grouped=False), 3).value
        assert taus[0] < one < taus[2]  # one threshold for all sits between the groups'


def test_a_node_without_per_question_scores_must_be_recalibrated():
    old = {"id": "cal-0", "dataset": "webqsp", "scores": [0.1, 0.2], "n": 2}
    with pytest.raises(CprError, match="cpr calibrate webqsp"):
        Calibrated.from_node(old)
    # per-question scores but no answer-recall curve: coverage works, FNR says recalibrate
    c = Calibrated.from_node({"q_scores": [0.1, 0.5, math.inf], "q_groups": [1, 1, 1], "n": 3})
    assert c.threshold(Request(0.5, None), 1).value == 0.5
    with pytest.raises(CprError, match="recalibrate"):
        c.threshold(Request(0.5, None, FNR), 1)


def test_sentence_names_the_population_and_the_guarantee(cal_table):
    pop = population_of({"n": 1234, "dataset": "metaqa", "hop_counts": [3, 1, 2]})
    assert pop == {"n": 1234, "dataset": "metaqa", "hops_label": "1-3 hops"}
    assert population_of({"n": 5, "dataset": "x", "hop_counts": [2]})["hops_label"] == "2-hop"
    assert population_of({"n": 5, "dataset": "x"})["hops_label"] is None
    c = _calibrated(cal_table, pop)
    who = "the 1,234 calibration questions of metaqa (1-3 hops)"
    pac = c.sentence(Request(0.1, 0.05), c.threshold(Request(0.1, 0.05), 2))
    n2 = int((cal_table.group == 2).sum())
    assert who in pac and "over the calibration draw" in pac and "95%" in pac and "90%" in pac
    assert f"whose best candidate path has 2 hop(s), as this one's does ({n2:,} of them)" in pac
    marginal = c.sentence(Request(0.3, None), c.threshold(Request(0.3, None), 1))
    assert who in marginal and "on average over calibration draws" in marginal
    assert "70%" in marginal and "over the calibration draw," not in marginal
    fnr = c.sentence(Request(0.2, None, FNR), c.threshold(Request(0.2, None, FNR), 3))
    assert who in fnr and "of the correct answers" in fnr and "80%" in fnr
    t = cal_table.subset(range(cal_table.n))
    t.group[:20], t.group[20:35] = 4, 5  # two small groups, 35 questions together: SMALL
    c_small = _calibrated(t, pop)
    pooled = Request(0.1, 0.05)
    assert c_small.threshold(pooled, 4).pool == "small"
    small = c_small.sentence(pooled, c_small.threshold(pooled, 4))
    assert "in the small groups pooled with this one's" in small
    # PAC over a pool of several groups is approximate (conformal/mondrian.py), and says so
    assert "with probability of about 95%" in small and "(approximate:" in small
    assert "at least 95%" not in small and "at least 90%" in small
    nothing = c.sentence(Request(0.1), c.threshold(Request(0.1), 0))  # no candidates: group 3
    assert "has 3 hop(s)" in nothing
    flat = Request(0.1, 0.05, grouped=False)
    one = c.sentence(flat, c.threshold(flat, 2))
    assert who in one and "hop(s), as this one's" not in one


def test_fallback_to_every_question_says_it_is_marginal(cal_table):
    """Small groups with too few questions together get the threshold of every calibration
    question: the sentence says it is marginal over all of them and promises nothing for
    this kind of question; a caveat says so for `cpr ask`'s notes."""
    pop = {"n": cal_table.n, "dataset": "toy", "hops_label": None}
    t = cal_table.subset(range(cal_table.n))
    t.group[:12] = 4  # one small group: below 30 even with group 0 (no candidates) in it
    mine = int(np.isin(t.group, (0, 4)).sum())
    assert mine < MIN_GROUP
    c = _calibrated(t, pop)
    for req in (Request(0.1), Request(0.1, None), Request(0.2, None, FNR)):
        th = c.threshold(req, 4)
        assert th.pool == "all"
        s = c.sentence(req, th)
        assert f"marginal over all {th.n:,} calibration questions" in s, s
        assert "no promise for questions like this one in particular" in s
        if req.risk == COVERAGE:
            assert f"has 4 hop(s) have {mine} calibration question(s)" in s
        assert "pooled with this one's" not in s and c.caveat(req, th) in s
        assert "this group" not in s
    own = Request(0.1)
    assert c.caveat(own, c.threshold(own, 2)) is None
    assert (
        c.caveat(Request(0.1, grouped=False), c.threshold(Request(0.1, grouped=False), 4)) is None
    )


def test_sentences_say_marginal_per_group_and_per_alpha(cal_table):
    c = _calibrated(cal_table, {"n": cal_table.n, "dataset": "toy"})
    pac = c.sentence(Request(0.1, 0.05), c.threshold(Request(0.1, 0.05), 2))
    assert "holds for this group and this alpha on its own, not for every group" in pac
    flat = Request(0.1, 0.05, grouped=False)
    one = c.sentence(flat, c.threshold(flat, 2))
    assert "holds for this alpha on its own, not for every alpha at once" in one
    fnr = c.sentence(Request(0.2, None, FNR), c.threshold(Request(0.2, None, FNR), 2))
    assert "that have at least one correct answer, and over calibration draws" in fnr
    assert "not one for this calibration" in fnr


def test_an_explicit_delta_with_fnr_is_refused_with_the_reason():
    refuse_fnr_delta(COVERAGE, 0.05, "--delta")
    refuse_fnr_delta(FNR, None, "--delta")
    refuse_fnr_delta(FNR, 0, "delta")  # 0: the marginal guarantee, which fnr is
    with pytest.raises(BadInput, match=r"--delta=0.05 asks for .*leave --delta out"):
        refuse_fnr_delta(FNR, 0.05, "--delta")
    with pytest.raises(BadInput, match=r"^delta=0.1 .*only risk coverage gives"):
        refuse_fnr_delta(FNR, 0.1, "delta")


def test_cut_set_respects_allow_empty():
    s = np.array([0.9, 0.4, 0.4 + 1e-8, 2.0])
    th = Threshold(0.1, None, 1, "g1", 50)
    assert cut_set(s, th, Request(0.1, allow_empty=True)).tolist() == [False] * 4
    assert cut_set(s, th, Request(0.1)).tolist() == [False, True, True, False]  # top level
    wide = Threshold(1.0, None, 1, "g1", 50)
    assert cut_set(s, wide, Request(0.1, allow_empty=True)).tolist() == [True, True, True, False]
    assert cut_set(s, wide, Request(0.1)).tolist() == [True, True, True, False]
    edge = Threshold(0.9 - TOLERANCE, None, 1, "g1", 50)  # recomputation noise below 0.9
    assert cut_set(s, edge, Request(0.1, allow_empty=True))[0]
    everything = Threshold(math.inf, "recall", 1, "g1", 50)  # --all-candidates
    assert cut_set(s, everything, Request(0.1, allow_empty=True)).all()


class _Store:
    """Stored calibrations by hops_filter; read(None) = the newest of any."""

    def __init__(self, *cals):
        self.cals, self.asked = list(cals), []

    def read(self, hf):
        self.asked.append(hf)
        mine = [c for c in self.cals if hf is None or c["hops_filter"] == hf]
        return mine[-1] if mine else None


def test_serving_rules():
    every = {"id": "all", "hops_filter": ALL_HOPS}
    two = {"id": "two", "hops_filter": 2}
    st = _Store(two, every)
    assert serving(st.read, "ds", None)["id"] == "all" and st.asked == [ALL_HOPS]
    st = _Store(every, two)  # a newer fixed-hop calibration does not displace it
    assert serving(st.read, "ds", None)["id"] == "all"
    st = _Store(two)
    with pytest.raises(CprError, match="--hops 2") as err:
        serving(st.read, "ds", None)
    assert "calibrated only for 2-hop" in str(err.value)
    # over HTTP the request's field is named, not the CLI flag (the commands stay commands)
    http = {"entity": "the `entity` field", "alpha": "the `alpha` field"}
    with pytest.raises(CprError, match="set the `hops` field to 2") as err:
        serving(st.read, "ds", None, fields=http)
    assert "--hops" not in str(err.value) and "cpr calibrate ds" in str(err.value)
    with pytest.raises(CprError, match="set the `hops` field to 2"):
        serving(st.read, "ds", None, fields={"hops": "the `hops` field"})
    with pytest.raises(CprError, match="cpr train ds"):
        serving(_Store().read, "ds", None)
    # --hops H: that calibration or a refusal saying how to make it
    st = _Store(every, two)
    assert serving(st.read, "ds", 2)["id"] == "two" and st.asked == [2]
    with pytest.raises(CprError, match="cpr train ds --hops 3"):
        serving(st.read, "ds", 3)
    # a pinned model: whatever that model's newest calibration is
    st = _Store(two)
    assert serving(st.read, "ds", None, model_id="m1")["id"] == "two" and st.asked == [None]
    with pytest.raises(CprError, match="cpr calibrate ds --model m1"):
        serving(_Store().read, "ds", None, model_id="m1")


# ---------------------------------------------------------------- validity over draws


@pytest.fixture(scope="module")
def pool():
    """6000 questions; SetCounter over them once, scores as a calibration computes them."""
    t = synthetic(np.random.default_rng(0), 6000, recall=0.97, p_missed=0.05)
    score = from_spec(t.qidx, t.cost, SPEC)
    return t, score, SetCounter(t.qidx, score, t.gold, t.n)


def _split(rng, t, score, n_cal):
    is_cal = np.zeros(t.n, bool)
    is_cal[rng.choice(t.n, n_cal, replace=False)] = True
    rows = is_cal[t.qidx]
    remap = np.cumsum(is_cal) - 1
    cal = Calibrated.from_flat(
        remap[t.qidx[rows]], score[rows], t.gold[rows], t.n_gold[is_cal], t.group[is_cal], {}
    )
    return cal, ~is_cal


DRAWS, N_CAL = 300, 2000


def test_group_coverage_holds_in_every_group_where_one_threshold_misses_the_hard_one(pool):
    """Plain (delta None) group-conditional tau: E[coverage] >= 1 - alpha within each
    group with its own pool; the mean over R draws may fall short only by sampling error,
    3 standard errors of that mean (std over draws / sqrt(R)). One marginal tau for all
    must miss the hard group (3-hop) by more than 3 standard errors. Questions without
    candidates (group 0) are never covered; they count in the largest group's threshold,
    so coverage holds overall too."""
    t, score, counter = pool
    rng = np.random.default_rng(1)
    alpha = 0.1
    cov = {g: [] for g in (1, 2, 3)}
    overall, marginal_hard, empty_group = [], [], []
    for _ in range(DRAWS):
        cal, test = _split(rng, t, score, N_CAL)
        _, hit = counter.counts(cal.thresholds(Request(alpha, None), t.group), nonempty=False)
        for g in cov:
            cov[g].append((hit > 0)[test & (t.group == g)].mean())
        overall.append((hit > 0)[test].mean() - (1 - alpha))
        empty_group.append((hit > 0)[test & (t.group == 0)].mean())
        flat = cal.thresholds(Request(alpha, None, grouped=False), t.group)
        _, hit = counter.counts(flat, nonempty=False)
        marginal_hard.append((hit > 0)[test & (t.group == 3)].mean())
    for g, c in cov.items():
        c = np.array(c)
        assert c.mean() >= 1 - alpha - 3 * c.std() / math.sqrt(DRAWS), (g, c.mean())
    overall = np.array(overall)
    assert overall.mean() >= -3 * overall.std() / math.sqrt(DRAWS)
    m = np.array(marginal_hard)
    assert m.mean() + 3 * m.std() / math.sqrt(DRAWS) < 1 - alpha, m.mean()
    assert max(empty_group) == 0  # no candidates: never covered, whatever the threshold


def test_nonempty_sets_never_lower_coverage(pool):
    t, score, counter = pool
    rng = np.random.default_rng(2)
    gained = 0
    for _ in range(40):
        cal, test = _split(rng, t, score, N_CAL)
        for alpha in (0.1, 0.3, 0.6):
            taus = cal.thresholds(Request(alpha), t.group)
            size_e, hit_e = counter.counts(taus, nonempty=False)
            size_n, hit_n = counter.counts(taus, nonempty=True)
            assert (size_n >= size_e).all() and (hit_n >= hit_e).all()  # supersets
            assert ((hit_n > 0) >= (hit_e > 0)).all()  # every covered question stays covered
            assert (size_n[t.sizes > 0] > 0).all()  # and no set with candidates is empty
            gained += int(((hit_n > 0) & ~(hit_e > 0))[test].sum())
    assert gained > 0  # the top level does cover questions the threshold alone misses


def test_fnr_control_holds_on_average_overall_and_per_group(pool):
    """Conformal risk control: E[FNR_test] <= alpha over calibration draws; the mean over
    R draws may exceed alpha by 3 standard errors of that mean (std / sqrt(R)), overall
    with one lambda and within each group with its own."""
    t, score, counter = pool
    rng = np.random.default_rng(3)
    n_gold = np.maximum(t.n_gold, 1)
    for alpha in (0.2, 0.35):
        flat, per_group = [], {g: [] for g in (1, 2, 3)}
        for _ in range(DRAWS // 2):
            cal, test = _split(rng, t, score, N_CAL)
            lam = cal.thresholds(Request(alpha, None, FNR, allow_empty=True), t.group)
            _, hit = counter.counts(lam, nonempty=False)
            fnr = 1 - hit / n_gold
            for g in per_group:
                per_group[g].append(fnr[test & (t.group == g)].mean())
            one = cal.thresholds(Request(alpha, None, FNR, grouped=False), t.group)
            _, hit = counter.counts(one, nonempty=False)
            flat.append((1 - hit / n_gold)[test].mean())
        for name, f in [("one lambda", flat), *per_group.items()]:
            f = np.array(f)
            assert f.mean() <= alpha + 3 * f.std() / math.sqrt(len(f)), (alpha, name, f.mean())


def test_lambda_is_monotone_in_alpha_and_unattainable_alphas_say_why(pool):
    t, score, _ = pool
    cal, _ = _split(np.random.default_rng(4), t, score, N_CAL)
    alphas = np.round(np.arange(0.08, 0.95, 0.02), 2)
    for grouped in (True, False):
        for g in (1, 2, 3):
            lams = [cal.threshold(Request(a, None, FNR, grouped=grouped), g).value for a in alphas]
            assert all(x >= y for x, y in pairwise(lams)), (grouped, g)  # non-increasing
            taus = [cal.threshold(Request(a, None, grouped=grouped), g).value for a in alphas]
            assert all(x >= y for x, y in pairwise(taus))
    # answer recall of about 0.95 caps the FNR; the threshold is +inf with the reason
    th = cal.threshold(Request(0.01, None, FNR), 1)
    assert math.isinf(th.value) and not th.attainable and "recall" in th.why
    assert "group 1" in th.why
    # coverage: recall 0.97 caps it at alpha 0.01; 20 questions are too few at alpha 0.01
    th = cal.threshold(Request(0.01, None), 2)
    assert math.isinf(th.value) and "retrieval recall" in th.why
    tiny = Calibrated(np.linspace(0, 1, 20), np.ones(20, int), {"qidx": [], "score": [],
                      "n_gold": []}, {})  # fmt: skip
    th = tiny.threshold(Request(0.01, None), 1)
    assert math.isinf(th.value) and "too few" in th.why
