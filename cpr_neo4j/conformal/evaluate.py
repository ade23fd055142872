"""Coverage evaluation over many random calibration/test splits (pure numbers).

Input: one QuestionRecord list per method (CPR, Abl.1, Abl.2 differ only in their costs),
cached once, so each split only re-thresholds arrays. Two baselines are derived from one
method's records (default: the first method):

- hop-level (UaG style): per hop t a threshold tau_t at level alpha from pooled
  gold-prefix scores. A gold sequence is a retained sequence reaching a gold answer at
  its last hop; per calibration question and hop t the score is the min cost of the
  hop-t prefixes of its gold sequences. A question with no gold sequence adds +inf to
  the hop-1 pool (retrieval missed it; CPR pays for that too) and nothing deeper. At
  test a sequence survives if every prefix cost <= tau_t; answers = ends of survivors.
  Each hop is calibrated at alpha separately, so joint coverage can fall below 1-alpha.
- top-k: answers ranked by (cost, entity id); nonconformity = 1-based rank of the best
  gold answer (+inf if absent); k = conformal threshold of those ranks, i.e. the
  smallest k with #{cal: rank <= k} >= (1-alpha)(n+1); answers = top k.

Metrics per (method, alpha), over `repeats` splits: ECR mean/min/std, APSS (mean set
size), CE = mean ECR / APSS, Hits@1 of the top answer, retrieval recall (any gold among
all candidates), and the fraction of splits whose threshold was +inf.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from cpr_neo4j.conformal.threshold import conformal_rank, nonconformity
from cpr_neo4j.errors import BadInput

SeqData = tuple[tuple[float, ...], tuple[str, ...]]  # (prefix costs hop 1..L, end entities)


@dataclass
class QuestionRecord:
    qid: str
    gold: frozenset[str]
    answer_costs: dict[str, float]  # candidate answer -> min cost over candidate paths
    top: str | None = None  # answer of the best path (Hits@1)
    sequences: list[SeqData] | None = None  # per retained sequence; for hop-level only

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["gold"] = sorted(self.gold)
        return d

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> QuestionRecord:
        seqs = d.get("sequences")
        return cls(
            qid=str(d["qid"]),
            gold=frozenset(d["gold"]),
            answer_costs={k: float(v) for k, v in d["answer_costs"].items()},
            top=d.get("top"),
            sequences=None if seqs is None else [(tuple(c), tuple(e)) for c, e in seqs],
        )


def record_from_retrieval(qid: str, gold: Sequence[str], retrieval: Any) -> QuestionRecord:
    """Numbers the evaluation needs from a treeg.Retrieval (duck-typed: no search import)."""
    ranked = retrieval.ranked_answers()
    prefix = retrieval.prefix_costs()
    topics = set(retrieval.topics)
    seqs: list[SeqData] = [
        (
            tuple(prefix[t - 1][c.path[:t]] for t in range(1, len(c.path) + 1)),
            tuple(e for e in c.ends if e not in topics),
        )
        for c in retrieval.candidates()
    ]
    return QuestionRecord(
        qid, frozenset(gold), dict(ranked), ranked[0][0] if ranked else None, seqs
    )


@dataclass
class Row:
    method: str
    alpha: float
    ecr_mean: float
    ecr_min: float
    ecr_std: float
    apss: float
    ce: float
    hits1: float
    recall: float
    inf_tau: float  # fraction of splits with tau = +inf (hop-level: at hop 1); see notes


@dataclass
class EvalResults:
    rows: list[Row]
    methods: list[str]
    alphas: list[float]
    repeats: int
    n_questions: int
    n_cal: int
    n_test: int
    seed: int
    notes: list[str] = field(default_factory=list)

    def row(self, method: str, alpha: float) -> Row:
        for r in self.rows:
            if r.method == method and math.isclose(r.alpha, alpha):
                return r
        raise KeyError((method, alpha))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class _Queries:
    """One method's records as flat arrays."""

    def __init__(self, records: Sequence[QuestionRecord]):
        n = len(records)
        self.score = np.array([nonconformity(r.answer_costs, r.gold) for r in records])
        self.hits1 = np.array([r.top is not None and r.top in r.gold for r in records])
        self.recall = np.isfinite(self.score)
        self.n_answers = np.array([len(r.answer_costs) for r in records])
        costs = np.fromiter((c for r in records for c in r.answer_costs.values()), float)
        qidx = np.repeat(np.arange(n), self.n_answers)
        order = np.argsort(costs, kind="stable")
        self.sorted_costs, self.sorted_q = costs[order], qidx[order]
        self.rank = self._gold_ranks(records, costs, qidx)

    def _gold_ranks(
        self, records: Sequence[QuestionRecord], costs: np.ndarray, qidx: np.ndarray
    ) -> np.ndarray:
        """1-based rank of the best gold answer under the order (cost, entity id); inf if none."""
        n = len(records)
        below = np.bincount(qidx, weights=costs < self.score[qidx], minlength=n)
        rank = np.where(self.recall, below + 1.0, np.inf)
        # ties at the gold cost (common: all ends of a sequence share its cost) go by entity id
        tie_q = np.unique(qidx[costs == self.score[qidx]])
        for q in tie_q.tolist():
            r, s = records[q], self.score[q]
            tied = [a for a, c in r.answer_costs.items() if c == s]
            first_gold = min(a for a in tied if a in r.gold)
            rank[q] += sum(a < first_gold for a in tied)
        return rank

    def set_size_sum(self, tau: float, cum_test: np.ndarray) -> int:
        """Total answer-set size over test questions; cum_test = cumsum of test flags."""
        return int(cum_test[np.searchsorted(self.sorted_costs, tau, side="right")])


class _HopLevel:
    """All questions' sequences: a padded prefix-cost matrix plus (sequence, entity) pairs."""

    def __init__(self, records: Sequence[QuestionRecord]):
        n = self.n = len(records)
        seq_q: list[int] = []
        seq_costs: list[tuple[float, ...]] = []
        seq_gold: list[bool] = []
        pair_local: list[int] = []
        pair_len: list[int] = []
        ent_count = np.zeros(n, dtype=np.int64)
        gold_local: list[tuple[int, int]] = []
        for q, r in enumerate(records):
            local = dict(zip(r.answer_costs, range(len(r.answer_costs)), strict=True))
            for costs, ends in r.sequences or ():
                try:
                    idx = [local[e] for e in ends]
                except KeyError:  # an end missing from answer_costs: index it anyway
                    idx = [local.setdefault(e, len(local)) for e in ends]
                seq_q.append(q)
                seq_costs.append(costs)
                seq_gold.append(not r.gold.isdisjoint(ends))
                pair_local.extend(idx)
                pair_len.append(len(idx))
            ent_count[q] = len(local)
            gold_local.extend((q, local[g]) for g in r.gold if g in local)
        lens = np.array([len(c) for c in seq_costs], dtype=np.int64)
        self.hops = int(lens.max()) if len(lens) else 1
        n_seq = len(seq_costs)
        rows = np.repeat(np.arange(n_seq), lens)
        cols = np.arange(int(lens.sum())) - np.repeat(np.cumsum(lens) - lens, lens)
        flat = np.fromiter((c for cs in seq_costs for c in cs), float, count=int(lens.sum()))
        self.prefix = np.full((n_seq, self.hops), -np.inf)  # -inf: no constraint past its end
        self.prefix[rows, cols] = flat
        # per question and hop: min prefix cost over gold sequences long enough (nan: none)
        sq = np.array(seq_q, dtype=np.int64)
        g = np.array(seq_gold, dtype=bool)[rows]
        best = np.full((n, self.hops), np.inf)
        np.minimum.at(best, (sq[rows][g], cols[g]), flat[g])
        present = np.zeros((n, self.hops), dtype=bool)
        present[sq[rows][g], cols[g]] = True
        self.gold_prefix = np.where(present, best, np.nan)
        self.gold_prefix[~present[:, 0], 0] = np.inf  # retrieval missed gold: +inf at hop 1
        ent_off = np.cumsum(ent_count) - ent_count
        pair_seq = np.repeat(np.arange(n_seq), np.array(pair_len, dtype=np.int64))
        pair_ent = ent_off[sq[pair_seq]] + np.array(pair_local, dtype=np.int64)
        gold_ent = [int(ent_off[q]) + i for q, i in gold_local]
        self._index_pairs(sq, pair_seq, pair_ent, int(ent_count.sum()), gold_ent)

    def _index_pairs(
        self,
        seq_q: np.ndarray,
        pair_seq: np.ndarray,
        pair_ent: np.ndarray,
        n_ent: int,
        gold_ent: list[int],
    ) -> None:
        """Compress (sequence, entity) pairs so each threshold costs O(#sequences).

        Most entities are reached by one sequence: they become a count per sequence. The
        rest are grouped by the exact set of sequences reaching them (few distinct sets:
        on MetaQA 3-hop, 0.7M such pairs collapse to 44k).
        """
        order = np.lexsort((pair_seq, pair_ent))
        ps, pe = pair_seq[order], pair_ent[order]
        deg = np.bincount(pe, minlength=n_ent)
        first = np.cumsum(deg) - deg
        self.seq_q = seq_q
        self.excl = np.bincount(ps[first[deg == 1]], minlength=len(seq_q))
        seqs = ps.tolist()
        groups: dict[tuple[int, ...], int] = {}
        multi = np.nonzero(deg > 1)[0]
        sig = [
            groups.setdefault(tuple(seqs[s : s + d]), len(groups))
            for s, d in zip(first[multi].tolist(), deg[multi].tolist(), strict=True)
        ]
        self.sig_weight = np.bincount(np.array(sig, dtype=np.int64), minlength=len(groups))
        self.sig_pair_sig = np.repeat(np.arange(len(groups)), [len(g) for g in groups])
        self.sig_pair_seq = np.fromiter((j for g in groups for j in g), np.int64)
        self.sig_q = seq_q[[g[0] for g in groups]] if groups else np.zeros(0, np.int64)
        gold = [(int(seq_q[j]), j) for g in gold_ent for j in seqs[first[g] : first[g] + deg[g]]]
        self.gold_q = np.array([q for q, _ in gold], dtype=np.int64)
        self.gold_seq = np.array([j for _, j in gold], dtype=np.int64)

    def thresholds(self, cal: np.ndarray, alpha: float) -> np.ndarray:
        taus = np.full(self.hops, np.inf)
        for t in range(self.hops):
            pool = self.gold_prefix[cal, t]
            pool = np.sort(pool[~np.isnan(pool)])
            k = conformal_rank(len(pool), alpha)
            if k <= len(pool):
                taus[t] = pool[k - 1]
        return taus

    def apply(self, taus: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(covered per question, set size per question) under per-hop thresholds."""
        survive = (self.prefix <= taus).all(axis=1)
        size = np.bincount(self.seq_q, weights=survive * self.excl, minlength=self.n)
        alive = (
            np.bincount(
                self.sig_pair_sig,
                weights=survive[self.sig_pair_seq],
                minlength=len(self.sig_weight),
            )
            > 0
        )
        size += np.bincount(self.sig_q, weights=self.sig_weight * alive, minlength=self.n)
        covered = np.bincount(self.gold_q, weights=survive[self.gold_seq], minlength=self.n) > 0
        return covered, size.astype(np.int64)


def evaluate(
    records_by_method: Mapping[str, Sequence[QuestionRecord]],
    alphas: Sequence[float],
    repeats: int = 20,
    cal_size: int | None = None,
    cal_fraction: float = 0.5,
    seed: int = 0,
    baselines_from: str | None = "",
) -> EvalResults:
    """ECR/APSS/CE table over `repeats` random splits of the question pool.

    All methods must cover the same question ids; every method sees the same splits.
    baselines_from: method whose records feed the hop-level and top-k baselines
    ("" = the first method, None = no baselines).
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

    queries = {m: _Queries(recs) for m, recs in methods.items()}
    hop = None
    if base is not None and all(r.sequences is not None for r in methods[base]):
        hop = _HopLevel(methods[base])
    names = list(methods) + (
        [] if base is None else ([f"hop-level ({base})"] if hop else []) + [f"top-k ({base})"]
    )
    acc: dict[tuple[str, float], list[tuple[float, float, float, float, bool]]] = {
        (m, a): [] for m in names for a in alphas
    }
    rng = np.random.default_rng(seed)
    for _ in range(repeats):
        perm = rng.permutation(n)
        cal, test = perm[:n_cal], perm[n_cal:]
        is_test = np.zeros(n, dtype=bool)
        is_test[test] = True
        n_test = len(test)
        for m, qs in queries.items():
            cal_sorted = np.sort(qs.score[cal])
            cum_test = np.concatenate([[0], np.cumsum(is_test[qs.sorted_q])])
            h1, rec = qs.hits1[test].mean(), qs.recall[test].mean()
            for a in alphas:
                k = conformal_rank(n_cal, a)
                tau = cal_sorted[k - 1] if k <= n_cal else math.inf
                ecr = (qs.recall & (qs.score <= tau))[test].mean()
                apss = qs.set_size_sum(tau, cum_test) / n_test
                acc[(m, a)].append((ecr, apss, h1, rec, math.isinf(tau)))
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
            if hop is not None:
                taus = hop.thresholds(cal, a)
                covered, size = hop.apply(taus)
                acc[(f"hop-level ({base})", a)].append(
                    (covered[test].mean(), size[test].mean(), h1, rec, bool(np.isinf(taus[0])))
                )

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
    records_by_method: Mapping[str, Sequence[QuestionRecord]],
) -> dict[str, list[QuestionRecord]]:
    """Every method's records in the first method's question order."""
    if not records_by_method:
        raise BadInput("no methods to evaluate")
    out: dict[str, list[QuestionRecord]] = {}
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
    return Row(
        method,
        float(alpha),
        float(ecr.mean()),
        float(ecr.min()),
        float(ecr.std()),
        float(apss.mean()),
        float(ce),
        float(d[:, 2].mean()),
        float(d[:, 3].mean()),
        float(d[:, 4].mean()),
    )
