"""Conformal risk control of the false-negative rate (`--risk fnr`) on real MetaQA scores.

The candidate table is the session's small 2-hop model's (evaluation/eval_tables.py, as `cpr
eval` builds it) over that model's calibration share, linked and scored as `cpr calibrate`
did. Pooled and re-split at random, calibration and test questions are exchangeable given
the pool, so conformal risk control gives E[FNR_test(lambda-hat)] <= alpha exactly; over R
independent draws the mean FNR may exceed alpha only by Monte-Carlo noise: we allow 3
standard errors of the mean over the draws. Also: lambda-hat is monotone in alpha, an alpha
below what retrieval's answer recall allows is refused, and the curve stored on the real
(:Calibration) node gives the lambda-hat a recomputation from the flat table gives.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from cpr_neo4j.conformal.guarantee import Calibrated, request
from cpr_neo4j.conformal.risk import FnrCurve
from cpr_neo4j.errors import Unattainable
from cpr_neo4j.evaluation import eval_tables as et
from cpr_neo4j.evaluation.deployed import table_scores
from cpr_neo4j.graph import fingerprint, records
from cpr_neo4j.model.store import load_scorer, read_config
from cpr_neo4j.stages.retrieval import RetrievalSettings
from cpr_neo4j.training import questions as qsel

pytestmark = pytest.mark.neo4j
ALPHAS = (0.1, 0.2, 0.3, 0.5)
DRAWS, N_CAL = 200, 700
FLOAT32 = 2.0**-23  # twice float32's relative rounding: a score stored as float32


@pytest.fixture(scope="module")
def flat(store, two_hop):
    """(calibration node, the flat candidate table of its questions, their scores)."""
    node = records.latest_calibration(store, "metaqa", two_hop.model_id)
    env = two_hop.env()
    try:
        meta = read_config(two_hop.model_id)["meta"]
        scorer = load_scorer(two_hop.model_id)
    finally:
        env.undo()
    ids = set(meta["calibration_ids"])
    qs = qsel.load(store, "metaqa", meta["split"], meta["hops_filter"], ids)
    settings = RetrievalSettings(
        hops=node["hops"],
        beam_width=node["beam_width"],
        active=node["active"],
        fanout_cap=node["fanout_cap"],
        scope=node["scope"],
        topic_answers=bool(node["topic_answers"]),
    )
    graph = fingerprint.current(store, "metaqa")
    inputs = et.search_inputs(store, "metaqa", qs, [], node["linking"], graph)
    spec = json.loads(node["score_family"])
    scorer.questions([m for q in qs for _, m in inputs.choices[q.id]])
    t = et.tables(store, "metaqa", scorer, settings, spec, qs, inputs, None, 1, lambda: None)
    assert t.qids == [q.id for q in qs] and t.n == node["n"]
    return node, t, table_scores(t, spec)


def test_the_stored_curve_gives_the_recomputed_lambda(flat):
    node, t, score = flat
    stored = Calibrated.from_node(node)
    again = Calibrated.from_flat(t.qidx, score, t.gold, t.n_gold, t.group, {"n": t.n})
    # stored labels: a question with no candidate (group 0) counts in the largest group
    assert stored.label(t.group).tolist() == node["q_groups"]
    assert t.n_gold.tolist() == node["q_n_gold"]
    # Costs are the same bits in every batch (model.exact), so the scores differ only by the
    # table's float32 surprisal column: half an ulp, 2**-24 relative, near 0 as elsewhere.
    np.testing.assert_allclose(again.scores, node["q_scores"], rtol=FLOAT32, atol=0)
    compared = 0
    for a in np.round(np.arange(0.05, 0.96, 0.05), 2):
        for grouped in (True, False):
            req = request(float(a), 0, "fnr", grouped=grouped)
            for g in sorted(set(node["q_groups"])):
                want, got = stored.threshold(req, g), again.threshold(req, g)
                assert (want.why is None) == (got.why is None), (a, g)
                assert got.value == pytest.approx(want.value, rel=FLOAT32), (a, grouped, g)
                compared += 1
    print(f"\n{compared} lambda-hats (alpha x grouping x group) equal: stored node vs table")


def test_mean_fnr_over_random_draws_stays_at_or_below_alpha(flat):
    """One lambda for all: mean FNR <= alpha over all questions. One per group (the
    default): within every group with its own lambda (a group too small is pooled) and over
    all questions (a question with no candidate at all counts in the largest group)."""
    node, t, score = flat
    n = t.n
    labels = Calibrated.from_node(node).label(t.group)
    counts = {int(g): int(c) for g, c in zip(*np.unique(labels, return_counts=True), strict=True)}
    rng = np.random.default_rng(3)
    fnr = {(a, grouped): [] for a in ALPHAS for grouped in (True, False)}
    own = {(a, g): [] for a in ALPHAS for g in counts}
    refused = 0
    for _ in range(DRAWS):
        perm = rng.permutation(n)
        cal, test = t.subset(perm[:N_CAL]), t.subset(perm[N_CAL:])
        sc_c, sc_t = score[_rows(t, perm[:N_CAL])], score[_rows(t, perm[N_CAL:])]
        c = Calibrated.from_flat(cal.qidx, sc_c, cal.gold, cal.n_gold, cal.group, {"n": N_CAL})
        qidx = test.qidx
        for a in ALPHAS:
            for grouped in (True, False):
                req = request(a, 0, "fnr", grouped=grouped)
                lam = c.thresholds(req, test.group)
                inside = sc_t <= lam[qidx]  # C_lambda exactly: the tolerance only adds
                hits = np.bincount(qidx[test.gold & inside], minlength=test.n)
                loss = 1 - hits / test.n_gold
                fnr[a, grouped].append(float(loss.mean()))
                mine = c.label(test.group)
                for g in np.unique(mine).tolist() if grouped else ():
                    th = c.threshold(req, g)
                    refused += not th.attainable
                    if th.pool == f"g{g}":
                        own[a, g].append(float(loss[mine == g].mean()))
                refused += 0 if grouped else int(np.isinf(lam).any())
    recall = FnrCurve.from_flat(t.qidx, score, t.gold, t.n_gold).recall
    print(
        f"\n{DRAWS} draws of {N_CAL} calibration / {n - N_CAL} test questions from {n} "
        f"(groups {counts}; answer recall of retrieval {recall:.3f}); unattainable {refused}"
    )
    assert refused == 0
    failed = []
    for (a, grouped), values in fnr.items():
        mean, se = _mean_se(values)
        print(
            f"  alpha {a}, {'one lambda per group' if grouped else 'one lambda'}: mean "
            f"FNR {mean:.4f}, tolerance 3 s.e. = {3 * se:.4f} (bound {a + 3 * se:.4f})"
        )
        if mean > a + 3 * se:
            failed.append((a, "all, grouped" if grouped else "all", mean, se))
    for (a, g), values in own.items():
        if len(values) < DRAWS / 2:
            continue  # pooled in most draws: no group-conditional claim
        mean, se = _mean_se(values)
        print(f"  alpha {a}, group {g} ({counts[g]} questions, {len(values)} draws with "
              f"its own lambda): mean FNR {mean:.4f}, bound {a + 3 * se:.4f}")  # fmt: skip
        if mean > a + 3 * se:
            failed.append((a, g, mean, se))
    assert not failed


def _mean_se(values) -> tuple[float, float]:
    return float(np.mean(values)), float(np.std(values, ddof=1) / math.sqrt(len(values)))


def _rows(t, questions) -> np.ndarray:
    """Candidate rows of `questions` (in that order), as CandidateTable.subset takes them."""
    lo, hi = t.start[questions], t.start[np.asarray(questions) + 1]
    return np.concatenate([np.arange(a, b) for a, b in zip(lo, hi, strict=True)])


def test_lambda_is_monotone_in_alpha(flat):
    node, _, _ = flat
    cal = Calibrated.from_node(node)
    grid = np.linspace(0.02, 0.98, 49)
    for grouped in (True, False):
        for g in sorted(set(node["q_groups"])):
            lams = [cal.threshold(request(float(a), 0, "fnr", grouped=grouped), g).value
                    for a in grid]  # fmt: skip
            assert all(x >= y for x, y in zip(lams[:-1], lams[1:], strict=True)), (grouped, g)
            finite = [x for x in lams if math.isfinite(x)]
            assert finite and finite[0] > finite[-1]  # it does move with alpha


def test_an_alpha_below_answer_recall_is_refused(store, flat, two_hop):
    from cpr_neo4j.stages.ask import ask

    node, _, _ = flat
    cal = Calibrated.from_node(node)
    tiny = []
    for grouped in (True, False):
        fnr = cal._fnr(grouped)
        for g in sorted(set(node["q_groups"])):
            # the pool follows alpha (mondrian.group_floor): read the curve at each alpha
            a = fnr.curve(g, 0.5).smallest_alpha() / 2
            curve = fnr.curve(g, a)
            a = min(a, curve.smallest_alpha() / 2)
            curve = fnr.curve(g, a)
            tiny.append(a)
            assert curve.unattainable(a) and math.isinf(curve.lam(a)), (g, a)
            th = cal.threshold(request(a, 0, "fnr", grouped=grouped), g)
            assert not th.attainable and math.isinf(th.value) and th.why
            ok = fnr.curve(g, 0.5).smallest_alpha() + 0.01
            curve = fnr.curve(g, ok)
            assert curve.unattainable(ok) is None and math.isfinite(curve.lam(ok))
    alpha = min(tiny)
    print(f"\nsmallest attainable FNR alphas halved: {[round(x, 4) for x in tiny]}")
    env = two_hop.env()
    try:
        with pytest.raises(Unattainable, match="cannot be honoured") as info:
            ask(
                store, "which person directed the movies starred by [John Krasinski]", alpha,
                dataset="metaqa", model_id=two_hop.model_id, risk="fnr",
            )  # fmt: skip
    finally:
        env.undo()
    print(f"cpr ask --risk fnr --alpha {alpha:.4f}: {info.value}")
    assert "of 'metaqa'" in str(info.value)  # which dataset answered: --dataset may be left out
