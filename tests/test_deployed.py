"""The deployed protocol (evaluation.deployed): one calibration's thresholds, every test
question answered with its group's; pure numbers on synthetic candidate tables."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cpr_neo4j.conformal.guarantee import Calibrated, Request
from cpr_neo4j.conformal.scores import from_spec, id_rank, level_rank
from cpr_neo4j.conformal.sets import SetCounter
from cpr_neo4j.conformal.threshold import cut, rank
from cpr_neo4j.evaluation.deployed import Variant, deployed, table_scores
from cpr_neo4j.evaluation.report import ecr_cell
from cpr_neo4j.evaluation.table import CandidateTable, TableBuilder
from tests.binomial import pac_allowance

T = 0.5  # the temperature of the tables' surprisal column
CENTRED = {"family": "centred", "centre": 0.97}
RAW = {"family": "centred", "centre": 0.0}
SURPRISAL = {"family": "surprisal", "T": T}
HOPS, HOP_P = (1, 2, 3), (0.45, 0.35, 0.20)
GOLD_MU = {1: 0.0, 2: 0.3, 3: 0.9}  # the correct sequence's cost: 3-hop is the hard group
GOLD_SD = {1: 0.5, 2: 0.6, 3: 0.8}
POP = {"n": 0, "dataset": "synthetic"}


class World:
    """Question templates with fixed effects (shared by every split drawn from it)."""

    def __init__(self, templates: int = 30, template_sd: float = 0.0, seed: int = 0):
        r = np.random.default_rng(seed)
        self.templates = templates
        self.effect = {h: r.normal(0, template_sd, templates) for h in HOPS}

    def draw(self, rng, n, shift=0.0, recall=0.97, p_empty=0.005, p_missed=0.2, prefix="q"):
        """Multi-answer questions shaped like retrieval output: a question of h hops has one
        correct relation sequence (found with probability `recall`) ending at 1-5 gold
        answers tied at its cost (rounded to 0.01: ties across sequences too), plus its
        template's effect and `shift` (a harder split); a gold answer or two may be
        missing from the candidates (counted in |Y|); 2-7 wrong sequences of 1-5 answers.
        Group: the hop length of the top candidate's sequence; `p_empty` of the questions
        have no candidates (group 0). Surprisal: -log of the sequence's softmax mass at T."""
        b = TableBuilder(T)
        for i in range(n):
            h = int(rng.choice(HOPS, p=HOP_P))
            tpl = int(rng.integers(self.templates))
            qid, text = f"{prefix}{i}", f"{h}-hop template {tpl}"
            gold = {f"{qid}g{k}" for k in range(int(rng.integers(1, 6)))}
            missed = {f"{qid}miss{k}" for k in range(int(rng.binomial(2, p_missed)))}
            if rng.random() < p_empty:
                b.add(qid, h, text, gold | missed, [], np.zeros(0), np.zeros(0), 0)
                continue
            seqs = []  # (cost, hop length, answer ids)
            if rng.random() < recall:
                c = GOLD_MU[h] + self.effect[h][tpl] + shift + rng.normal(0, GOLD_SD[h])
                seqs.append((round(c, 2), h, sorted(gold)))
            for j in range(int(rng.integers(2, 8))):
                length = h if rng.random() < 0.7 else int(rng.integers(1, 4))
                ids = [f"{qid}w{j}e{k}" for k in range(int(rng.integers(1, 6)))]
                seqs.append((round(float(rng.normal(1.0, 0.7)), 2), length, ids))
            cs = np.array([s[0] for s in seqs])
            mass = np.exp(-(cs - cs.min()) / T)
            mass /= mass.sum()
            rows = sorted(
                (c, e, length, -math.log(m))
                for (c, length, ids), m in zip(seqs, mass, strict=True)
                for e in ids
            )
            b.add(qid, h, text, gold | missed, [r[1] for r in rows], np.array([r[0] for r in rows]),
                  np.array([r[3] for r in rows]), rows[0][2])  # fmt: skip
        return b.build()


def _variants():
    return [
        Variant("CPR", "CPR", CENTRED, diagnose=True),
        Variant("CPR, marginal (delta 0)", "CPR", CENTRED, None),
        Variant("CPR, answer recall (FNR)", "CPR", CENTRED, None, risk="fnr"),
        Variant("top-k (CPR)", "CPR", {"family": "id_rank"}, None, grouped=False),
        Variant("top-k levels (CPR)", "CPR", {"family": "level"}, None, grouped=False),
        Variant("CPR, surprisal", "CPR", SURPRISAL),
    ]


# ---------------------------------------------------------------- scores and rows


def test_table_scores_for_each_family():
    t = World().draw(np.random.default_rng(0), 200)
    assert np.array_equal(table_scores(t, CENTRED), from_spec(t.qidx, t.cost, CENTRED))
    assert np.array_equal(table_scores(t, SURPRISAL), t.surprisal.astype(float))
    with pytest.raises(ValueError, match="T="):
        table_scores(t, {"family": "surprisal", "T": 2 * T})
    ids = np.array([f"{i:04d}" for i in range(len(t.cost))])  # rows are in (cost, id) order
    got_id, got_level = table_scores(t, {"family": "id_rank"}), table_scores(t, {"family": "level"})
    for i in range(t.n):
        lo, hi = t.start[i], t.start[i + 1]
        c = t.cost[lo:hi]
        assert np.array_equal(got_id[lo:hi], id_rank(c, ids[lo:hi]))
        assert np.array_equal(got_level[lo:hi], level_rank(c))
        mine = table_scores(t, CENTRED)[lo:hi]
        if c.size:
            assert np.allclose(mine, c - 0.97 * c.min())


def test_rows_for_every_variant_and_alpha_and_their_numbers_by_brute_force():
    w, rng = World(), np.random.default_rng(1)
    cal = {"CPR": w.draw(rng, 600, prefix="c"), "Abl.1": w.draw(rng, 600, prefix="c")}
    test = {"CPR": w.draw(rng, 900, prefix="t"), "Abl.1": w.draw(rng, 900, prefix="t")}
    variants = [*_variants(), Variant("Abl.1", "Abl.1", CENTRED)]
    alphas = [0.1, 0.3, 0.5]
    res = deployed(cal, test, variants, alphas, POP, boot=100, draws=30, hints={"CPR": "llm:x"})
    assert len(res.rows) == len(variants) * len(alphas)
    want = {(v.name, a) for v in variants for a in alphas}
    assert {(r.method, r.alpha) for r in res.rows} == want
    assert res.methods == [v.name for v in variants] and res.alphas == alphas
    assert (res.n_cal, res.n_test, res.boot, res.draws) == (600, 900, 100, 30)
    assert [d.method for d in res.diagnoses] == ["CPR"]  # diagnose=True only
    assert res.row("CPR", 0.3).hints == "llm:x" and res.row("Abl.1", 0.3).hints == "none"
    with pytest.raises(KeyError):
        res.row("CPR", 0.2)
    # every number of the CPR rows from the definitions, question by question
    c, t = cal["CPR"], test["CPR"]
    sc, st = table_scores(c, CENTRED), table_scores(t, CENTRED)
    S_cal = np.array([sc[c.start[i] : c.start[i + 1]][c.gold[c.start[i] : c.start[i + 1]]]
                      .min(initial=np.inf) for i in range(c.n)])  # fmt: skip
    labels = np.where(c.group == 0, c.group.max(), c.group)  # no candidates: largest group
    counts = np.bincount(labels, minlength=4)
    assert counts[counts < 30].sum() < 30  # small groups fall back to the marginal (ALL)
    for a in alphas:
        row = res.row("CPR", a)
        for g, tau in row.tau.items():
            mine = S_cal[labels == g] if (labels == g).sum() >= 30 else S_cal
            k = rank(mine.size, a, 0.05)
            assert tau == (np.sort(mine)[k - 1] if k <= mine.size else math.inf), (a, g)
        covered, size, fnr = [], [], []
        for i in range(t.n):
            lo, hi = t.start[i], t.start[i + 1]
            g = int(t.group[i]) or int(c.group.max())  # no candidates: the largest group
            keep = cut(st[lo:hi], row.tau[g])  # what `cpr ask` serves
            found = int((keep & t.gold[lo:hi]).sum())
            covered.append(found > 0)
            size.append(int(keep.sum()))
            fnr.append(1 - found / t.n_gold[i])
        covered, size, fnr = np.array(covered), np.array(size), np.array(fnr)
        assert row.ecr == pytest.approx(covered.mean()) and row.apss == pytest.approx(size.mean())
        assert row.fnr == pytest.approx(fnr.mean()) and row.n_test == t.n
        assert row.ecr_lo <= row.ecr <= row.ecr_hi and row.fnr_lo <= row.fnr <= row.fnr_hi
        for h, x in row.by_hops.items():
            mine = t.hops == h
            assert x["n"] == mine.sum() and x["ecr"] == pytest.approx(covered[mine].mean())
            assert x["fnr"] == pytest.approx(fnr[mine].mean())
        one = t.n_gold == 1
        assert row.single["n"] == one.sum()
        assert row.single["ecr"] == pytest.approx(covered[one].mean())
        assert row.single["apss"] == pytest.approx(size[one].mean())
        top = np.array([t.sizes[i] > 0 and t.gold[t.start[i]] for i in range(t.n)])
        assert row.metrics["hits1"] == pytest.approx(top.mean())
        assert row.recall_cal == pytest.approx(np.isfinite(S_cal).mean())
    # a smaller alpha never gives smaller sets
    for v in variants:
        apss = [res.row(v.name, a).apss for a in alphas]
        assert apss == sorted(apss, reverse=True), v.name


# ---------------------------------------------------------------- validity


@pytest.mark.slow  # ~50 s: `make test-slow`
def test_exchangeable_splits_reach_the_target():
    """R independent (calibration, test) draws from one world. Marginal rows: mean ECR >=
    1 - alpha, and FNR rows: mean FNR <= alpha, each up to 3 standard errors of the mean
    over R draws (std / sqrt(R)); PAC rows cover at least as much as marginal ones on
    average (a larger tau). PAC's own promise: test_pac_rows_hold_for_this_calibration."""
    w, rng = World(templates=60, template_sd=0.2), np.random.default_rng(2)
    R, alphas = 20, (0.2, 0.4)
    variants = [v for v in _variants() if v.name != "top-k levels (CPR)"]
    ecr, fnr = {}, {}
    for _ in range(R):
        c, t = w.draw(rng, 400, p_missed=0.05, prefix="c"), w.draw(rng, 800, p_missed=0.05)
        res = deployed({"CPR": c}, {"CPR": t}, variants, alphas, POP, boot=100, draws=10,
                       seed=int(rng.integers(1 << 30)))  # fmt: skip
        for r in res.rows:
            key = (r.method, r.alpha)
            ecr.setdefault(key, []).append(r.ecr)
            fnr.setdefault(key, []).append(r.fnr)
            assert r.ecr_lo <= r.ecr <= r.ecr_hi and r.attainable
            if r.risk == "coverage":
                assert r.ecr_lo_cal <= r.ecr_hi_cal
    for a in alphas:
        for name in ("CPR, marginal (delta 0)", "top-k (CPR)"):
            e = np.array(ecr[(name, a)])
            assert e.mean() >= 1 - a - 3 * e.std() / math.sqrt(R), (name, a, e.mean())
        f = np.array(fnr[("CPR, answer recall (FNR)", a)])
        assert f.mean() <= a + 3 * f.std() / math.sqrt(R), (a, f.mean())
        for name in ("CPR", "CPR, surprisal"):
            e = np.array(ecr[(name, a)])
            assert e.mean() >= np.mean(ecr[("CPR, marginal (delta 0)", a)])  # PAC: larger tau


PAC_DRAWS = 40  # calibration draws


@pytest.mark.slow  # ~60 s on a loaded machine: `make test-slow`
def test_pac_rows_hold_for_this_calibration():
    """PAC (delta 0.05): this calibration's threshold covers >= 1 - alpha with probability
    >= 1 - delta over calibration draws. PAC_DRAWS independent calibration draws of 400;
    each draw's coverage is measured on one fixed 20,000-question test draw from the same
    world (standing in for the population: standard error <= 0.0035 at these alphas). The
    count of draws below 1 - alpha must stay within pac_allowance (7 of 40 at delta 0.05).
    The check must be able to fail: the marginal threshold, below target in about half
    the draws (coverage averages 1 - alpha), fails it; if it did not, this test could not
    tell PAC from marginal."""
    w, rng = World(templates=60, template_sd=0.2), np.random.default_rng(2)
    delta, alphas = 0.05, (0.2, 0.4)
    allowed = pac_allowance(PAC_DRAWS, delta)
    assert allowed == 7  # P(Binomial(40, 0.05) > 7) = 7.1e-4 <= 1e-3; P(> 6) = 3.2e-3
    population = w.draw(np.random.default_rng(99), 20_000, p_missed=0.05)
    variants = [
        Variant("CPR", "CPR", CENTRED),  # delta 0.05, the default
        Variant("CPR, surprisal", "CPR", SURPRISAL),
        Variant("CPR, marginal (delta 0)", "CPR", CENTRED, None),
    ]
    below: dict[tuple[str, float], int] = {}
    for _ in range(PAC_DRAWS):
        c = w.draw(rng, 400, p_missed=0.05, prefix="c")
        res = deployed({"CPR": c}, {"CPR": population}, variants, alphas, POP, boot=1, draws=1,
                       seed=int(rng.integers(1 << 30)))  # fmt: skip
        for r in res.rows:
            key = (r.method, r.alpha)
            below[key] = below.get(key, 0) + int(r.ecr < 1 - r.alpha)
    print("\ndraws below 1 - alpha of", PAC_DRAWS, "(allowed", allowed, "):", below)
    for a in alphas:
        for name in ("CPR", "CPR, surprisal"):
            assert below[(name, a)] <= allowed, (name, a, below[(name, a)])
        assert below[("CPR, marginal (delta 0)", a)] > allowed, (a, below)


def test_a_shifted_test_split_is_below_target_and_the_diagnostics_say_so():
    w, rng = World(), np.random.default_rng(3)
    cal, same, harder = (
        w.draw(rng, 1500, prefix="c"),
        w.draw(rng, 1500, prefix="s"),
        w.draw(rng, 1500, shift=0.6, prefix="h"),
    )
    v = [Variant("CPR", "CPR", CENTRED, diagnose=True)]
    alphas = [0.1, 0.2]
    ok = deployed({"CPR": cal}, {"CPR": same}, v, alphas, POP, boot=300, draws=20)
    bad = deployed({"CPR": cal}, {"CPR": harder}, v, alphas, POP, boot=300, draws=20)
    assert bad.diagnoses[0].ks_p < 1e-6 and ok.diagnoses[0].ks_p > 1e-3
    for a, m in zip(alphas, bad.diagnoses[0].miscoverage, strict=True):
        row = bad.row("CPR", a)
        assert row.below_target and row.ecr_hi < 1 - a  # the interval shows the miss
        assert m["alpha"] == a and m["flag"] and m["p_holm"] < 1e-3
        assert m["miss_test"] > m["expected"]
        assert " !" in ecr_cell(row)
        good = ok.row("CPR", a)
        assert not good.below_target and good.ecr_hi >= 1 - a
    d = ok.diagnoses[0]
    assert 0 < d.recall_cal <= 1 and 0 < d.recall_test <= 1
    assert not any(m["flag"] for m in d.miscoverage)


def test_topk_with_k_one_gives_one_answer_per_question():
    """top-k by (cost, id): when the calibration's k-th smallest gold rank is 1, tau = 1 and
    every set is the top answer alone: APSS 1 and ECR = Hits@1. top-k levels at tau 1: the
    top level, whatever its size."""
    w, rng = World(), np.random.default_rng(4)
    c, t = w.draw(rng, 800, p_empty=0.0, prefix="c"), w.draw(rng, 800, p_empty=0.0, prefix="t")
    first_gold = np.array([c.gold[c.start[i] : c.start[i + 1]].argmax() + 1
                           if c.gold[c.start[i] : c.start[i + 1]].any() else np.inf
                           for i in range(c.n)])  # fmt: skip
    a = 0.7
    assert np.sort(first_gold)[rank(c.n, a) - 1] == 1  # so the top-k threshold is k = 1
    v = [
        Variant("top-k (CPR)", "CPR", {"family": "id_rank"}, None, grouped=False),
        Variant("top-k levels (CPR)", "CPR", {"family": "level"}, None, grouped=False),
    ]
    res = deployed({"CPR": c}, {"CPR": t}, v, [a], POP, boot=50, draws=10)
    top = res.row("top-k (CPR)", a)
    assert set(top.tau.values()) == {1.0}
    assert top.apss == 1.0 and top.metrics["size_p90"] == 1
    assert top.ecr == pytest.approx(top.metrics["hits1"])
    levels = res.row("top-k levels (CPR)", a)
    counter = SetCounter(t.qidx, table_scores(t, {"family": "level"}), t.gold, t.n)
    assert set(levels.tau.values()) == {1.0}
    assert levels.apss == pytest.approx(counter.top_size.mean()) and levels.apss > 1
    assert levels.ecr == pytest.approx((counter.top_gold > 0).mean())
    assert levels.ecr >= top.ecr  # a superset of the top answer


def test_template_clustered_interval_is_wider_when_outcomes_cluster_by_template():
    """Strong template effects in 15 templates: resampling templates must widen the
    interval well beyond question resampling (design effect); with no template effect and
    each question its own template, the two widths agree (bootstrap noise: +-25%)."""
    rng = np.random.default_rng(5)
    v = [Variant("CPR", "CPR", CENTRED, diagnose=True)]
    w = World(templates=15, template_sd=1.0, seed=1)
    res = deployed({"CPR": w.draw(rng, 1000, prefix="c")}, {"CPR": w.draw(rng, 1500, prefix="t")},
                   v, [0.1, 0.3], POP, boot=400, draws=10)  # fmt: skip
    for a, wd in res.diagnoses[0].widths.items():
        assert wd["template"] > 1.5 * wd["question"], (a, wd)
    flat = World(templates=100_000, template_sd=0.0)
    res = deployed({"CPR": flat.draw(rng, 1000, prefix="c")},
                   {"CPR": flat.draw(rng, 1500, prefix="t")}, v, [0.1, 0.3], POP, boot=400,
                   draws=10)  # fmt: skip
    for a, wd in res.diagnoses[0].widths.items():
        assert 0.75 < wd["template"] / wd["question"] < 1.33, (a, wd)


def test_pooled_view_for_coverage_rows_only():
    w, rng = World(), np.random.default_rng(6)
    res = deployed({"CPR": w.draw(rng, 500, prefix="c")}, {"CPR": w.draw(rng, 700, prefix="t")},
                   _variants(), [0.2, 0.5], POP, boot=100, draws=50)  # fmt: skip
    for r in res.rows:
        if r.risk == "coverage":
            p = r.pooled
            assert set(p) == {"ecr_mean", "ecr_p5", "held"}
            assert p["held"] * 50 == round(p["held"] * 50)  # a share of the 50 draws
            assert p["ecr_p5"] <= p["ecr_mean"]
            # the pool is exchangeable by construction: its mean ECR is near the target
            assert p["ecr_mean"] >= 1 - r.alpha - 0.03, (r.method, r.alpha, p)
            assert not math.isnan(r.ecr_lo_cal)
        else:
            assert r.pooled == {} and math.isnan(r.ecr_lo_cal) and math.isnan(r.ecr_hi_cal)


def test_unattainable_alpha_is_marked_and_answers_every_candidate():
    """Retrieval recall 0.8: no threshold reaches 95% coverage, every group's is +inf."""
    w, rng = World(), np.random.default_rng(7)
    c, t = w.draw(rng, 600, recall=0.8, prefix="c"), w.draw(rng, 600, recall=0.8, prefix="t")
    v = [Variant("CPR", "CPR", CENTRED), Variant("FNR", "CPR", CENTRED, None, risk="fnr")]
    res = deployed({"CPR": c}, {"CPR": t}, v, [0.05, 0.5], POP, boot=50, draws=10)
    low = res.row("CPR", 0.05)
    assert not low.attainable and all(math.isinf(x) for x in low.tau.values())
    assert low.apss == pytest.approx(t.sizes.mean())  # every candidate
    assert "unattainable" in ecr_cell(low) and low.pooled == {}
    assert res.row("CPR", 0.5).attainable and "unattainable" not in ecr_cell(res.row("CPR", 0.5))
    assert not res.row("FNR", 0.05).attainable and res.row("FNR", 0.5).attainable
    why = Calibrated.from_flat(c.qidx, table_scores(c, CENTRED), c.gold, c.n_gold, c.group, POP)
    assert "recall" in why.threshold(Request(0.05), 1).why


# ---------------------------------------------------------------- the second views


def _brute_pooled(c, t, spec, alpha, draws, seed):
    """The deployed protocol on each re-split of the pooled questions, with resplits' own
    permutations (one rng.permutation per draw): tau from the calibration share's raw S
    (what `cpr calibrate` computes), the rest answered with the top level added."""
    both = CandidateTable.concat([c, t])
    counter = SetCounter(both.qidx, table_scores(both, spec), both.gold, both.n)
    r, ecr = np.random.default_rng(seed), []
    for _ in range(draws):
        perm = r.permutation(both.n)
        cal, rest = perm[: c.n], perm[c.n :]
        tau = np.sort(counter.score[cal])[rank(c.n, alpha) - 1]
        _, hit = counter.counts(tau, nonempty=True)
        ecr.append((hit[rest] > 0).mean())
    ecr = np.array(ecr)
    return ecr.mean(), (ecr >= 1 - alpha - 1e-12).mean()


def test_pooled_view_never_covers_a_question_without_candidates():
    """A fifth of the questions have no candidates: no set can cover them, wherever a
    re-split puts them. Scores id_rank (a top-level hit has the lowest possible S, so the
    pooled view's shortcut for top-level hits changes no threshold here)."""
    w, rng = World(), np.random.default_rng(10)
    c, t = w.draw(rng, 400, p_empty=0.2, prefix="c"), w.draw(rng, 600, p_empty=0.2, prefix="t")
    spec, alpha, draws, seed = {"family": "id_rank"}, 0.5, 100, 4
    v = [Variant("top-k", "m", spec, None, grouped=False)]
    got = deployed({"m": c}, {"m": t}, v, [alpha], POP, boot=50, draws=draws, seed=seed)
    mean, held = _brute_pooled(c, t, spec, alpha, draws, seed)
    pooled = got.row("top-k", alpha).pooled
    assert pooled["ecr_mean"] == pytest.approx(mean, abs=1e-12)
    assert pooled["held"] == pytest.approx(held, abs=1e-12)


def test_pooled_view_re_splits_the_deployed_rule():
    """Each re-split of the pooled view must be the deployed protocol itself (see
    _brute_pooled). Raw costs (centre 0), where a top-level hit's S is often not among the
    lowest, so taking thresholds from scores with top-level hits moved to COVERED (rather
    than from the raw S a calibration stores) changes them. No empty questions here."""
    w, rng = World(), np.random.default_rng(8)
    c, t = w.draw(rng, 400, p_empty=0.0, prefix="c"), w.draw(rng, 600, p_empty=0.0, prefix="t")
    alpha, draws, seed = 0.3, 200, 3
    v = [Variant("raw", "m", RAW, None, grouped=False)]
    res = deployed({"m": c}, {"m": t}, v, [alpha], POP, boot=50, draws=draws, seed=seed)
    mean, held = _brute_pooled(c, t, RAW, alpha, draws, seed)
    got = res.row("raw", alpha).pooled
    assert got["ecr_mean"] == pytest.approx(mean, abs=1e-12)
    assert got["held"] == pytest.approx(held, abs=1e-12)


def test_a_test_group_unseen_at_calibration_is_counted_with_its_fallback_threshold():
    """Calibration without 3-hop-group questions: a test question of group 3 is served the
    fallback threshold (conformal.mondrian: an unseen group is a small group), and is
    covered or not by it. The cal+test interval must count those questions the same way,
    not as misses, so it brackets the point ECR."""
    w, rng = World(), np.random.default_rng(9)
    c, t = w.draw(rng, 1000, prefix="c", p_empty=0.0), w.draw(rng, 1500, prefix="t", p_empty=0.0)
    c = c.subset(np.flatnonzero(c.group != 3))
    v = [Variant("CPR", "CPR", CENTRED, None)]
    res = deployed({"CPR": c}, {"CPR": t}, v, [0.1, 0.3], POP, boot=300, draws=20)
    for a in (0.1, 0.3):
        row = res.row("CPR", a)
        assert math.isfinite(row.tau[3]) and row.attainable
        assert row.ecr_lo_cal <= row.ecr <= row.ecr_hi_cal, (a, row.ecr_lo_cal, row.ecr)


def test_an_fnr_lambda_of_inf_that_attains_alpha_is_not_marked_unattainable():
    """Gold answers scored +inf are found only by lambda = +inf (every candidate), which
    still attains alpha when they are most of the gold answers: the row is attainable."""
    b = TableBuilder(T)
    for i in range(100):
        costs = np.array([0.0, 1.0])
        b.add(f"q{i}", 1, "t", {f"q{i}g"}, [f"q{i}w", f"q{i}g"], costs,
              np.array([0.0, np.inf]), 1)  # fmt: skip
    c, t = b.build(), b.build()
    v = [Variant("FNR", "CPR", SURPRISAL, None, risk="fnr")]
    res = deployed({"CPR": c}, {"CPR": t}, v, [0.5], POP, boot=20, draws=5)
    row = res.row("FNR", 0.5)
    assert all(math.isinf(x) for x in row.tau.values())
    assert row.attainable and row.fnr == 0.0
