"""Coverage validity on real MetaQA data: mean ECR over repeated random calibration/test
splits stays at or above 1 - alpha, within a tolerance derived from the split noise.

Derivation. All questions of the pool are scored once with a fixed scorer (V_sem: no
training data is involved, so every question is exchangeable with every other). For a
uniformly random split of a fixed pool, split conformal gives E[ECR] >= 1 - alpha exactly,
conditional on the pool (the permutation makes calibration and test scores exchangeable).
So the only error in the mean over R draws is Monte-Carlo noise. One draw's ECR has
variance at most alpha(1-alpha)/(n_cal+2) (the Beta law of the calibration-conditional
coverage) + alpha(1-alpha)/n_test (binomial noise of the test questions); the mean of R
draws has that variance divided by R (draws are independent given the pool). We allow
4 standard errors: a valid method fails this test with probability below 1e-4 per alpha.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from cpr_neo4j.conformal.evaluate import QuestionRecord, evaluate, record_from_retrieval
from cpr_neo4j.conformal.threshold import centred, nonconformity, pac_rank
from cpr_neo4j.graph import records
from cpr_neo4j.graph.neighbours import Neo4jNeighbours
from cpr_neo4j.model.encoder import shared_encoder
from cpr_neo4j.model.scorer import PathScorer
from cpr_neo4j.search.base import CachedNeighbours
from cpr_neo4j.search.treeg import retrieve
from cpr_neo4j.stages import questions as qsel

pytestmark = pytest.mark.neo4j
ALPHAS = (0.1, 0.2, 0.3, 0.5)
N_CAL, REPEATS = 300, 200


def tolerance(alpha: float, n_cal: int, n_test: int, repeats: int) -> float:
    var = alpha * (1 - alpha) * (1 / (n_cal + 2) + 1 / n_test)
    return 4 * math.sqrt(var / repeats)


@pytest.mark.parametrize("hops, n_questions", [(1, 700), (2, 700)])
def test_mean_ecr_holds_over_random_splits(store, metaqa, hops, n_questions):
    qs = qsel.load(store, "metaqa", "test", hops)[:n_questions]
    scorer = PathScorer(shared_encoder(), records.relation_text(store, "metaqa"))
    scorer.questions([q.masked for q in qs])
    source = CachedNeighbours(Neo4jNeighbours(store, "metaqa"))
    recs = [
        record_from_retrieval(
            q.id, q.answers, retrieve(source, scorer, scorer.question(q.masked), q.topics, hops)
        )
        for q in qs
    ]
    # centring costs by the question's best one is a fixed function of the question: valid too
    centred_recs = [
        QuestionRecord(r.qid, r.gold, centred(r.answer_costs, 0.5), r.top) for r in recs
    ]
    results = evaluate(
        {"V_sem": recs, "V_sem centred": centred_recs},
        ALPHAS,
        repeats=REPEATS,
        cal_size=N_CAL,
        seed=7,
        baselines_from=None,
    )
    for alpha, method in ((a, m) for a in ALPHAS for m in ("V_sem", "V_sem centred")):
        row = results.row(method, alpha)
        tol = tolerance(alpha, N_CAL, len(qs) - N_CAL, REPEATS)
        assert row.recall > 1 - alpha, "retrieval must find a gold answer often enough"
        assert row.ecr_mean >= 1 - alpha - tol, (alpha, row.ecr_mean, tol)
        assert row.apss < 1000
    _pac_holds_for_iid_draws(recs)


def _pac_holds_for_iid_draws(recs, n_cal: int = 300, draws: int = 400, delta: float = 0.1):
    """Calibration-conditional (PAC) taus on the same real scores. Drawing calibration
    questions i.i.d. from the pool makes the pool their exact distribution, so each
    draw's coverage is known exactly (the share of pool scores <= tau): it must reach
    1 - alpha in at least 1 - delta of the draws, up to 4 binomial standard errors."""
    scores = np.array([nonconformity(r.answer_costs, r.gold) for r in recs])
    rng = np.random.default_rng(11)
    for alpha in ALPHAS:
        k = pac_rank(n_cal, alpha, delta)
        held = 0
        for _ in range(draws):
            tau = np.sort(rng.choice(scores, size=n_cal))[k - 1]
            held += (np.isfinite(scores) & (scores <= tau)).mean() >= 1 - alpha
        assert held / draws >= 1 - delta - 4 * math.sqrt(delta * (1 - delta) / draws), alpha
