"""The pooled view: many random calibration/test re-splits of one question pool.

This is the SECOND view of `cpr eval` (the headline is conformal.deployed): re-splitting
calibration + test questions at random makes them exchangeable by construction, so mean
ECR >= 1 - alpha holds for any fixed scorer; the spread over draws (min, 5th percentile)
is what it adds.

Input: one QuestionRecord list per method (CPR, Abl.1, Abl.2 differ only in their costs),
cached once, so each split only re-thresholds arrays. The top-k baseline is derived from
one method's records (default: the first): answers ranked by (cost, entity id);
nonconformity = 1-based rank of the best gold answer (+inf if absent); k = conformal
threshold of those ranks; answers = the top k.

Metrics per (method, alpha), over `repeats` splits: ECR mean/min/5th percentile/std, APSS
(mean set size), CE = mean ECR / APSS, Hits@1 of the top answer, retrieval recall (any
gold among all candidates), the fraction of splits whose threshold was +inf, and "held",
the fraction of splits whose ECR reached 1 - alpha. With delta, a PAC row re-thresholds
the same method's scores with the calibration-conditional order statistic: "held" is then
what it promises (>= 1 - delta) and APSS what it costs.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from cpr_neo4j.conformal.threshold import conformal_rank, rank
from cpr_neo4j.errors import BadInput


@dataclass
class QuestionRecord:
    qid: str
    gold: frozenset[str]
    answer_costs: dict[str, float]  # candidate answer -> min cost over candidate paths
    top: str | None = None  # answer of the best path (Hits@1)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["gold"] = sorted(self.gold)
        return d

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> QuestionRecord:
        return cls(
            qid=str(d["qid"]),
            gold=frozenset(d["gold"]),
            answer_costs={k: float(v) for k, v in d["answer_costs"].items()},
            top=d.get("top"),
        )

    def scored(self) -> ScoredQuestion:
        """The compact form the metrics need (the candidates' ids dropped)."""
        ids = list(self.answer_costs)
        costs = np.fromiter(self.answer_costs.values(), float, len(ids))
        (one,) = scored_columns(self.qid, self.gold, ids, costs)
        return replace(one, hit1=self.top in self.gold)  # the top the record names


@dataclass(frozen=True)
class ScoredQuestion:
    """A QuestionRecord reduced to numbers: every candidate's cost, the nonconformity score,
    the best gold answer's rank under (cost, entity id) and whether the top answer is gold.
    A 3-hop question has thousands of candidates; a full evaluation keeps tens of thousands
    of these per method, so an array instead of a dict of id -> cost (about 10x smaller)."""

    qid: str
    costs: np.ndarray
    score: float
    rank: float
    hit1: bool


Record = QuestionRecord | ScoredQuestion  # what the views accept, one kind per list


def scored_columns(
    qid: str,
    gold: frozenset[str],
    ids: Sequence[str],
    costs: np.ndarray,
    centres: Sequence[float] = (0.0,),
) -> list[ScoredQuestion]:
    """One question's ScoredQuestion per centre, from its answer columns: costs minus
    centre x the best (as threshold.centred), the best gold cost as score (+inf without
    one), the first gold's rank with ties by entity id, and whether the answer first by
    (cost, id) is gold. No dict or sort per candidate: those were a third of a 3-hop
    evaluation."""
    raw = np.asarray(costs, dtype=float)
    is_gold = np.fromiter(map(gold.__contains__, ids), bool, len(ids))
    top = None
    if len(raw):
        top = min(ids[k] for k in np.flatnonzero(raw == raw.min()).tolist())
    out = []
    for centre in centres:
        c = raw - centre * raw.min() if centre and len(raw) else raw
        score, rank = math.inf, math.inf
        if is_gold.any():  # ties at the gold cost go by entity id
            score = float(c[is_gold].min())
            tied = [ids[k] for k in np.flatnonzero(c == score).tolist()]
            first_gold = min(a for a in tied if a in gold)
            rank = float((c < score).sum() + 1 + sum(a < first_gold for a in tied))
        out.append(ScoredQuestion(qid, c, score, rank, top in gold))
    return out


def record_from_retrieval(qid: str, gold: Sequence[str], retrieval: Any) -> QuestionRecord:
    """Numbers the evaluation needs from a treeg.Retrieval (duck-typed: no search import)."""
    ranked = retrieval.ranked_answers()
    return QuestionRecord(qid, frozenset(gold), dict(ranked), ranked[0][0] if ranked else None)


@dataclass
class Row:
    method: str
    alpha: float
    ecr_mean: float
    ecr_min: float
    ecr_p5: float  # 5th percentile over draws
    ecr_std: float
    apss: float
    ce: float
    hits1: float
    recall: float
    inf_tau: float  # fraction of splits with tau = +inf; see notes
    held: float = math.nan  # fraction of splits with ECR >= 1 - alpha


def pac_name(method: str, delta: float) -> str:
    """The row label of a method's calibration-conditional (PAC) variant."""
    return f"{method}, PAC (delta={delta:g})"


class RowTable:
    """Lookup and JSON for a results dataclass holding `rows` with method and alpha."""

    rows: list

    def row(self, method: str, alpha: float):
        for r in self.rows:
            if r.method == method and math.isclose(r.alpha, alpha):
                return r
        raise KeyError((method, alpha))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class EvalResults(RowTable):
    rows: list[Row]
    methods: list[str]
    alphas: list[float]
    repeats: int
    n_questions: int
    n_cal: int
    n_test: int
    seed: int
    notes: list[str] = field(default_factory=list)


class Queries:
    """One method's records as flat arrays (shared with conformal.deployed).

    `upto`: the largest finite tau that `sizes` and `set_size_sum` will be asked about. Only
    candidates up to it are kept and sorted: a whole 3-hop split holds ~80M per method and
    its answer sets a small share (CPR's are ~10 of a question's thousands).
    """

    def __init__(self, records: Sequence[Record], upto: float = math.inf):
        scored = [r if isinstance(r, ScoredQuestion) else r.scored() for r in records]
        self.score = np.array([r.score for r in scored], dtype=float)
        self.hits1 = np.array([r.hit1 for r in scored], dtype=bool)
        self.recall = np.isfinite(self.score)
        self.n_answers = np.array([len(r.costs) for r in scored], dtype=np.int64)
        self.rank = np.array([r.rank for r in scored], dtype=float)
        self.upto = upto
        kept = [r.costs[r.costs <= upto] if upto < math.inf else r.costs for r in scored]
        costs = np.concatenate(kept) if kept else np.zeros(0)
        lengths = [len(k) for k in kept]
        qidx = np.repeat(np.arange(len(scored), dtype=np.int32), lengths)  # 4 B each
        # Ties may come in any order: every reader takes all candidates up to tau at once.
        # (A stable argsort was 2.2x slower.)
        order = np.argsort(costs)
        self.sorted_costs, self.sorted_q = costs[order], qidx[order]

    def _kept(self, tau: float) -> int | None:
        """How many sorted candidates lie at or below tau; None: all of the question's."""
        if tau > self.upto:
            if tau == math.inf:
                return None
            raise ValueError(f"tau {tau} is above the {self.upto} these queries were kept to")
        return int(np.searchsorted(self.sorted_costs, tau, side="right"))

    def set_size_sum(self, tau: float, is_test: np.ndarray) -> int:
        """Total answer-set size over the questions flagged in `is_test`: only candidates up
        to tau are read."""
        upto = self._kept(tau)
        if upto is None:
            return int(self.n_answers[is_test].sum())
        return int(np.count_nonzero(is_test[self.sorted_q[:upto]]))

    def sizes(self, tau: float) -> np.ndarray:
        """Answer-set size per question at threshold tau."""
        upto = self._kept(tau)
        if upto is None:
            return self.n_answers.copy()
        return np.bincount(self.sorted_q[:upto], minlength=len(self.score))


def largest_finite(scores: np.ndarray) -> float:
    """The largest finite score (a tau taken from them is that or +inf); -inf if none."""
    finite = scores[np.isfinite(scores)]
    return float(finite.max()) if len(finite) else -math.inf


def evaluate(
    records_by_method: Mapping[str, Sequence[Record]],
    alphas: Sequence[float],
    repeats: int = 20,
    cal_size: int | None = None,
    cal_fraction: float = 0.5,
    seed: int = 0,
    baselines_from: str | None = "",
    delta: float | None = None,
) -> EvalResults:
    """ECR/APSS/CE table over `repeats` random splits of the question pool.

    All methods must cover the same question ids; every method sees the same splits.
    baselines_from: method whose records feed the top-k baseline
    ("" = the first method, None = no baseline).
    """
    methods = _aligned(records_by_method)
    first = next(iter(methods))
    n = len(methods[first])
    n_cal = cal_size if cal_size is not None else int(round(cal_fraction * n))
    if not 1 <= n_cal < n:
        raise BadInput(f"calibration size {n_cal} must be between 1 and {n - 1} ({n} questions)")
    base = first if baselines_from == "" else baselines_from
    if base is not None and base not in methods:
        raise BadInput(f"baselines_from={base!r} is not one of {list(methods)}")

    names = list(methods) + ([] if base is None else [f"top-k ({base})"])
    variants = [(m, m, None) for m in methods]  # (row name, records, delta)
    if delta and base is not None:
        variants.append((pac_name(base, delta), base, delta))
        names.append(pac_name(base, delta))
    scored = {
        m: [r if isinstance(r, ScoredQuestion) else r.scored() for r in recs]
        for m, recs in methods.items()
    }
    rng = np.random.default_rng(seed)
    splits = [rng.permutation(n) for _ in range(repeats)]
    taus: dict[tuple[str, int, float], float] = {}  # (row name, split, alpha) -> tau
    asked: dict[str, list[float]] = {m: [] for m in methods}  # every tau of a method's rows
    for name, m, d in variants:
        score = np.array([r.score for r in scored[m]], dtype=float)
        for i, perm in enumerate(splits):
            cal_sorted = np.sort(score[perm[:n_cal]])
            for a in alphas:
                k = rank(n_cal, a, d)
                taus[(name, i, a)] = cal_sorted[k - 1] if k <= n_cal else math.inf
                asked[m].append(taus[(name, i, a)])
    # a method's candidates are kept up to the largest finite tau its rows ask about
    queries = {m: Queries(scored[m], largest_finite(np.array(asked[m]))) for m in methods}
    acc: dict[tuple[str, float], list[tuple[float, float, float, float, bool]]] = {
        (m, a): [] for m in names for a in alphas
    }
    for i, perm in enumerate(splits):
        cal, test = perm[:n_cal], perm[n_cal:]
        is_test = np.zeros(n, dtype=bool)
        is_test[test] = True
        n_test = len(test)
        for name, m, _ in variants:
            qs = queries[m]
            h1, rec = qs.hits1[test].mean(), qs.recall[test].mean()
            for a in alphas:
                tau = taus[(name, i, a)]
                ecr = (qs.recall & (qs.score <= tau))[test].mean()
                apss = qs.set_size_sum(tau, is_test) / n_test
                acc[(name, a)].append((ecr, apss, h1, rec, math.isinf(tau)))
        if base is None:
            continue
        qs = queries[base]
        h1, rec = qs.hits1[test].mean(), qs.recall[test].mean()
        rank_sorted = np.sort(qs.rank[cal])
        for a in alphas:
            k = conformal_rank(n_cal, a)
            kk = rank_sorted[k - 1] if k <= n_cal else math.inf
            ecr = (qs.recall & (qs.rank <= kk))[test].mean()
            apss = np.minimum(qs.n_answers[test], kk).mean()
            acc[(f"top-k ({base})", a)].append((ecr, apss, h1, rec, math.isinf(kk)))

    rows = [_row(m, a, acc[(m, a)]) for m in names for a in alphas]
    return EvalResults(
        rows, names, list(alphas), repeats, n, n_cal, n - n_cal, seed, _notes(rows, n_cal)
    )


def _notes(rows: list[Row], n_cal: int) -> list[str]:
    """Why some thresholds were +inf: too few calibration questions, or recall < 1 - alpha."""
    notes = []
    few = sorted({r.alpha for r in rows if conformal_rank(n_cal, r.alpha) > n_cal})
    if few:
        notes.append(
            f"{n_cal} calibration questions are too few for alpha in {few}: "
            "k = ceil((n+1)(1-alpha)) > n, so tau = +inf and every candidate is answered"
        )
        warnings.warn(notes[-1], stacklevel=3)
    low = [f"{r.method} @ {r.alpha:g}" for r in rows if r.inf_tau > 0 and r.alpha not in few]
    if low:
        notes.append(
            "tau = +inf in some splits for " + ", ".join(low) + ": more than alpha of the "
            "calibration questions have no gold answer among the candidates (retrieval recall "
            "< 1 - alpha), so the set is every candidate and ECR is capped by recall"
        )
    return notes


def _aligned(
    records_by_method: Mapping[str, Sequence[Record]],
) -> dict[str, list[Record]]:
    """Every method's records in the first method's question order."""
    if not records_by_method:
        raise BadInput("no methods to evaluate")
    out: dict[str, list[Record]] = {}
    order: list[str] | None = None
    for m, recs in records_by_method.items():
        by_id = {r.qid: r for r in recs}
        if len(by_id) != len(recs):
            raise BadInput(f"method {m!r} has duplicate question ids")
        if order is None:
            order = [r.qid for r in recs]
        elif set(by_id) != set(order):
            raise BadInput(f"method {m!r} covers other questions than {next(iter(out))!r}")
        out[m] = [by_id[q] for q in order]
    return out


def _row(method: str, alpha: float, draws: list[tuple[float, float, float, float, bool]]) -> Row:
    d = np.array(draws, dtype=float)
    ecr, apss = d[:, 0], d[:, 1]
    ce = ecr.mean() / apss.mean() if apss.mean() > 0 else math.nan
    held = float((ecr >= 1 - alpha - 1e-12).mean())
    return Row(
        method,
        float(alpha),
        float(ecr.mean()),
        float(ecr.min()),
        float(np.percentile(ecr, 5)),
        float(ecr.std()),
        float(apss.mean()),
        float(ce),
        float(d[:, 2].mean()),
        float(d[:, 3].mean()),
        float(d[:, 4].mean()),
        held,
    )
