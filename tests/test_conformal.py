"""Conformal threshold against independent oracles; evaluation on synthetic exchangeable data."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import pytest

from cpr_neo4j.conformal.deployed import deployed
from cpr_neo4j.conformal.evaluate import (
    Queries,
    QuestionRecord,
    evaluate,
    record_from_retrieval,
    scored_columns,
)
from cpr_neo4j.conformal.report import pooled_table, write_report
from cpr_neo4j.conformal.threshold import (
    answer_set,
    centred,
    conformal_rank,
    conformal_threshold,
    nonconformity,
)
from cpr_neo4j.errors import BadInput
from cpr_neo4j.search.base import InMemoryGraph
from cpr_neo4j.search.treeg import retrieve

ALPHAS = ["0.05", "0.1", "0.2", "0.3", "0.4", "0.5", "0.6", "0.7", "0.8", "0.9"]


def _oracle_k(n: int, alpha: str) -> int:
    # exact decimal arithmetic: (n+1)(1-alpha) with alpha parsed from its decimal string
    return math.ceil((n + 1) * (1 - Fraction(alpha)))


def _brute_tau(scores: np.ndarray, alpha: str) -> float:
    """Smallest candidate value v with #{S <= v} >= (1-alpha)(n+1); +inf if none."""
    need = (1 - Fraction(alpha)) * (len(scores) + 1)
    ok = [v for v in sorted(set(scores.tolist())) if (scores <= v).sum() >= need]
    return ok[0] if ok else math.inf


@pytest.mark.parametrize("alpha", ALPHAS)
def test_threshold_matches_oracles(alpha):
    rng = np.random.default_rng(1)
    for n in [1, 2, 3, 4, 9, 10, 19, 20, 99, 100, 257]:
        for ties in (False, True):
            scores = rng.normal(size=n)
            if ties:
                scores = np.round(scores, 0)
            k = _oracle_k(n, alpha)
            assert conformal_rank(n, float(alpha)) == k
            with pytest.warns(UserWarning) if k > n else _no_warning():
                tau = conformal_threshold(scores, float(alpha))
            assert tau == (np.sort(scores)[k - 1] if k <= n else math.inf)
            assert tau == _brute_tau(scores, alpha)


class _no_warning:
    def __enter__(self):
        import warnings

        self._ctx = warnings.catch_warnings()
        self._ctx.__enter__()
        warnings.simplefilter("error")

    def __exit__(self, *exc):
        return self._ctx.__exit__(*exc)


def test_float_alpha_does_not_shift_k():
    # 1 - 0.7 == 0.30000000000000004 in floats: a naive ceil gives 4 here, not 3
    assert math.ceil(10 * (1 - 0.7)) == 4
    assert conformal_rank(9, 0.7) == 3
    assert conformal_rank(99, 0.7) == 30
    assert conformal_rank(9, 0.3) == 7
    assert conformal_rank(19, 0.05) == 19
    assert conformal_rank(99, 0.1) == 90


def test_small_n_and_inf_scores():
    with pytest.warns(UserWarning, match="too few"):
        assert conformal_threshold([0.4], 0.3) == math.inf  # k = ceil(2 * 0.7) = 2 > 1
    assert conformal_threshold([0.4], 0.5) == 0.4  # k = 1
    assert conformal_threshold([0.4, 0.1], 0.4) == 0.4  # k = ceil(1.8) = 2
    with pytest.warns(UserWarning):
        assert conformal_threshold([0.4, 0.1], 0.3) == math.inf  # k = 3 > 2
    with pytest.warns(UserWarning):
        assert conformal_threshold([], 0.5) == math.inf
    # a question without any gold candidate scores +inf and can become tau itself
    assert conformal_threshold([0.1, math.inf, 0.2], 0.4) == math.inf  # k = 3 <= n: no warning
    assert conformal_threshold([0.1, math.inf, 0.2], 0.5) == 0.2
    with pytest.raises(BadInput):
        conformal_threshold([0.1], 1.0)
    with pytest.raises(ValueError):
        conformal_threshold([0.1, float("nan")], 0.5)


def test_answer_set_and_nonconformity():
    costs = {"a": 0.1, "b": 0.5, "c": 0.5, "d": 2.0}
    assert answer_set(costs, 0.5) == {"a", "b", "c"}
    assert answer_set(costs, math.inf) == set(costs)
    assert answer_set(costs, 0.0) == set()
    assert nonconformity(costs, {"c", "d", "zz"}) == 0.5
    assert nonconformity(costs, {"zz"}) == math.inf


def _synthetic(n: int, seed: int, recall: float = 0.97, hops: int = 2) -> list[QuestionRecord]:
    """I.i.d. questions: a few relation sequences per hop with entity ends; one gold answer."""
    rng = np.random.default_rng(seed)
    out = []
    for q in range(n):
        seqs = []
        for j in range(int(rng.integers(2, 6))):
            c1 = float(rng.uniform(0, 1))
            seqs.append(((c1,), tuple(f"q{q}a{j}e{i}" for i in range(int(rng.integers(1, 4))))))
            if hops > 1:
                for m in range(2):
                    c2 = c1 + float(rng.uniform(0, 1))
                    ends = tuple(f"q{q}b{j}{m}e{i}" for i in range(int(rng.integers(1, 4))))
                    seqs.append(((c1, c2), ends))
        costs: dict[str, float] = {}
        for c, ends in seqs:
            for e in ends:
                costs[e] = min(costs.get(e, math.inf), c[-1])
        ents = sorted(costs)
        gold = ents[int(rng.integers(len(ents)))] if rng.random() < recall else f"q{q}missing"
        top = min(ents, key=lambda e: (costs[e], e))
        out.append(QuestionRecord(f"q{q}", frozenset({gold}), costs, top))
    return out


def test_query_level_coverage_holds_on_exchangeable_data():
    alphas = [0.1, 0.2, 0.3, 0.5]
    n, repeats = 1000, 200
    res = evaluate({"cpr": _synthetic(n, seed=0)}, alphas, repeats=repeats, seed=3)
    n_cal, n_test = res.n_cal, res.n_test
    for a in alphas:
        row = res.row("cpr", a)
        # Tolerance. Given the pool, a random split makes calibration and test questions
        # exchangeable, so E[ECR] >= 1 - alpha exactly. One split's ECR varies by
        # (i) the calibration draw: coverage given tau ~ Beta(k, n_cal + 1 - k), variance
        #     <= alpha(1-alpha)/(n_cal + 2), and (ii) the binomial test sample:
        #     alpha(1-alpha)/n_test. The mean over R independent splits has standard error
        #     se = sqrt((i + ii) / R); we allow 4 se (about 0.005 here).
        se = math.sqrt(a * (1 - a) * (1 / (n_cal + 2) + 1 / n_test) / repeats)
        assert row.ecr_mean >= 1 - a - 4 * se, (a, row.ecr_mean, se)
        # and not wastefully above: continuous scores give <= 1 - alpha + 1/(n_cal + 1)
        assert row.ecr_mean <= 1 - a + 1 / (n_cal + 1) + 4 * se
        assert row.recall == pytest.approx(0.97, abs=0.02)
        assert row.ce == pytest.approx(row.ecr_mean / row.apss)
    # smaller alpha -> larger sets
    apss = [res.row("cpr", a).apss for a in alphas]
    assert apss == sorted(apss, reverse=True)


def test_topk_baseline_produces_sets():
    recs = _synthetic(600, seed=1)
    res = evaluate({"cpr": recs, "abl1": _synthetic(600, seed=2)}, [0.1, 0.3], repeats=30)
    assert res.methods == ["cpr", "abl1", "top-k (cpr)"]
    for a in [0.1, 0.3]:
        topk = res.row("top-k (cpr)", a)
        assert topk.apss > 0 and 0 <= topk.ecr_min <= topk.ecr_p5 <= topk.ecr_mean <= 1
        se = math.sqrt(a * (1 - a) * (1 / 302 + 1 / 300) / 30)
        assert topk.ecr_mean >= 1 - a - 4 * se  # ranks are a valid (integer) conformal score
        assert topk.hits1 == res.row("cpr", a).hits1
    assert evaluate({"x": recs}, [0.3], 2, baselines_from=None).methods == ["x"]


def test_ranks_and_set_sizes_match_brute_force():
    rng = np.random.default_rng(8)
    recs = []
    for q in range(200):
        m = int(rng.integers(0, 12))
        costs = {f"e{i:02d}": float(rng.integers(0, 4)) for i in rng.permutation(20)[:m]}  # ties
        recs.append(
            QuestionRecord(str(q), frozenset({f"e{i:02d}" for i in rng.choice(20, 2)}), costs)
        )
    qs = Queries(recs)
    is_test = rng.random(len(recs)) < 0.5
    for r, rank in zip(recs, qs.rank, strict=True):
        ranked = [a for a, _ in sorted(r.answer_costs.items(), key=lambda kv: (kv[1], kv[0]))]
        hits = [i + 1 for i, a in enumerate(ranked) if a in r.gold]
        assert rank == (hits[0] if hits else math.inf)
    for tau in [-1.0, 0.0, 1.5, 3.0, math.inf]:
        want = sum(
            len(answer_set(r.answer_costs, tau)) for r, t in zip(recs, is_test, strict=True) if t
        )
        assert qs.set_size_sum(tau, is_test) == want
        sizes = [len(answer_set(r.answer_costs, tau)) for r in recs]
        assert qs.sizes(tau).tolist() == sizes
    compact = Queries([r.scored() for r in recs])  # what `cpr eval` keeps per question
    for field in ("score", "rank", "hits1", "n_answers", "sorted_costs", "sorted_q"):
        assert np.array_equal(getattr(compact, field), getattr(qs, field)), field
    # kept only up to the largest tau asked about: the same sizes up to it and at +inf
    kept = Queries(recs, upto=1.5)
    assert len(kept.sorted_costs) < len(qs.sorted_costs)
    for tau in [-1.0, 0.0, 1.5, math.inf]:
        assert kept.sizes(tau).tolist() == qs.sizes(tau).tolist()
        assert kept.set_size_sum(tau, is_test) == qs.set_size_sum(tau, is_test)
    with pytest.raises(ValueError, match="above"):
        kept.sizes(3.0)


def test_scored_columns_equal_the_dict_records():
    """`cpr eval` scores columns; the numbers must be the dict records' own, ties included."""
    for r in _synthetic(300, seed=7):
        ids, costs = list(r.answer_costs), np.fromiter(r.answer_costs.values(), float)
        centres = (0.0, 0.97, 1.0)
        for centre, got in zip(
            centres, scored_columns(r.qid, r.gold, ids, costs, centres), strict=True
        ):
            want = QuestionRecord(r.qid, r.gold, centred(r.answer_costs, centre), r.top).scored()
            assert (got.score, got.rank, got.hit1) == (want.score, want.rank, want.hit1)
            assert np.array_equal(got.costs, want.costs)
    (empty,) = scored_columns("q", frozenset({"a"}), [], np.zeros(0))
    assert math.isinf(empty.score) and math.isinf(empty.rank) and not empty.hit1


def test_evaluate_at_scale_gives_every_row():
    recs = _synthetic(4000, seed=5, hops=2)
    res = evaluate({"cpr": recs, "abl": recs}, [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8], repeats=20)
    assert len(res.rows) == 3 * 8  # cpr, abl, top-k (cpr)
    assert res.row("cpr", 0.3) == res.row("abl", 0.3).__class__(
        **{**res.row("abl", 0.3).__dict__, "method": "cpr"}
    )  # same records, same splits: same numbers


def test_records_from_treeg_and_json_roundtrip():
    graph = InMemoryGraph([("m1", "starred_actors", "tom"), ("m1", "directed_by", "d1")])

    class Flat:
        model_id = "flat"

        def score(self, ctx, paths):
            return np.array([float(len(p)) for p in paths])

    r = retrieve(graph, Flat(), None, ["tom"], 2)
    rec = record_from_retrieval("q1", ["d1"], r)
    assert rec.answer_costs == {"m1": 1.0, "d1": 2.0} and rec.top == "m1"
    back = QuestionRecord.from_json(json.loads(json.dumps(rec.to_json())))
    assert back == rec


def test_misaligned_methods_rejected():
    recs = _synthetic(10, seed=0)
    with pytest.raises(BadInput):
        evaluate({"a": recs, "b": recs[:5]}, [0.5])
    with pytest.raises(BadInput):
        evaluate({"a": recs}, [0.5], cal_size=10)


def test_report_writes_files(tmp_path):
    recs = _synthetic(300, seed=4)
    res = evaluate({"cpr": recs}, [0.05, 0.3, 0.6], repeats=5)
    head = deployed({"cpr": recs[:100]}, {"cpr": recs[100:]}, [0.05, 0.3, 0.6], boot=200)
    files = write_report(head, res, tmp_path / "out", title="synthetic")
    for path in files.values():
        assert path.exists() and path.stat().st_size > 0
    data = json.loads(files["json"].read_text())
    assert {r["method"] for r in data["pooled"]["rows"]} == set(res.methods)
    assert {r["method"] for r in data["deployed"]["rows"]} == set(head.methods)
    md = files["markdown"].read_text()
    assert "## Deployed protocol (headline)" in md and "## Pooled view (second view)" in md
    assert md.count("\n| cpr |") == 2 * 3 + 1  # a row per alpha per view, and the KS row
    assert files["ecr_plot"].read_bytes()[:4] == b"\x89PNG"


def test_table_dashes_missed_coverage():
    res = evaluate({"cpr": _synthetic(300, seed=4, recall=0.8)}, [0.05, 0.5], repeats=5)
    lines = pooled_table(res).splitlines()
    low = next(ln for ln in lines if ln.startswith("| cpr") and "| 0.05 |" in ln)
    high = next(ln for ln in lines if ln.startswith("| cpr") and "| 0.5 |" in ln)
    assert low.count("–") == 2 and "–" not in high
    assert any("recall" in note for note in res.notes)  # tau = +inf came from recall 0.8


def test_too_few_calibration_questions_warn_and_note():
    with pytest.warns(UserWarning, match="too few"):
        res = evaluate({"cpr": _synthetic(20, seed=4)}, [0.05, 0.5], repeats=3, cal_size=10)
    assert res.row("cpr", 0.05).inf_tau == 1.0 and res.row("cpr", 0.5).inf_tau == 0.0
    assert res.row("cpr", 0.05).apss > res.row("cpr", 0.5).apss  # every candidate answered
    assert "too few" in res.notes[0]
