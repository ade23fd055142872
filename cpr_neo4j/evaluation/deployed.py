"""The deployed protocol: exactly what a user gets from `cpr calibrate` then `cpr ask`.

Thresholds come from the calibration questions alone (conformal/guarantee.py, as `cpr
calibrate` stores them), then every evaluation question is answered with its group's
threshold. Nothing makes calibration and evaluation questions exchangeable by
construction, so this is where a shift between them shows; the diagnostics look for one.

Per (variant, alpha): ECR with a 95% interval resampling question TEMPLATES (outcomes
cluster by template), a second one redrawing calibration templates too (tau recomputed),
and the KGQA answer metrics (evaluation/diagnostics.answer_metrics), per-hop ECR and FNR,
and single-answer questions apart. FNR rows control the false-negative rate instead.
An alpha whose threshold is +inf for some group is marked unattainable (those questions
get every candidate). The pooled view (evaluation/resample.resplits) and the diagnostics
(KS, the template-permutation test of the test split's misses that flags, and the exact
question-level one shown beside it, each with Holm across alphas, evaluation/shift.py,
recall on each side, interval widths) come with it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np
from scipy import stats

from cpr_neo4j.conformal.guarantee import COVERAGE, EFFECTIVE_DEFAULT, FNR, Calibrated, Request
from cpr_neo4j.conformal.scores import from_spec
from cpr_neo4j.conformal.sets import SetCounter, slack
from cpr_neo4j.evaluation.diagnostics import answer_metrics, cluster_bootstrap
from cpr_neo4j.evaluation.resample import cal_test_interval, effective, resplits
from cpr_neo4j.evaluation.shift import holm, miss_test, permutation_tests, template_codes
from cpr_neo4j.evaluation.table import CandidateTable


@dataclass(frozen=True)
class Variant:
    name: str  # the row label
    method: str  # whose candidate tables it reads (CPR, Abl.1, ...)
    spec: Mapping  # score family (conformal/scores.py; "surprisal" reads the table's column)
    delta: float | None = 0.05
    risk: str = COVERAGE
    allow_empty: bool = False
    grouped: bool = True
    diagnose: bool = False  # KS, miscoverage test and interval widths for this variant
    effective: bool = EFFECTIVE_DEFAULT  # calibrate on conformal/effective.py's scores

    def request(self, alpha: float) -> Request:
        return Request(
            alpha,
            delta=self.delta,
            risk=self.risk,
            allow_empty=self.allow_empty,
            grouped=self.grouped,
            effective=self.effective,
        )


def table_scores(t: CandidateTable, spec: Mapping) -> np.ndarray:
    """Every candidate's score under `spec` (the same numbers `cpr ask` computes)."""
    family = spec["family"]
    if family == "surprisal":
        if not math.isclose(float(spec["T"]), t.temperature, rel_tol=1e-9):
            raise ValueError(f"table surprisal is at T={t.temperature}, spec asks {spec['T']}")
        return t.surprisal.astype(float)
    if family == "id_rank":  # candidates are stored in (cost, id) order
        return (np.arange(len(t.cost)) - t.start[:-1][t.qidx] + 1).astype(float)
    return from_spec(t.qidx, t.cost, spec)


@dataclass(kw_only=True)  # built by keyword: many fields
class Row:
    method: str
    alpha: float
    risk: str
    tau: dict  # group -> threshold ("+inf" as inf)
    attainable: bool
    ecr: float
    ecr_lo: float  # 95%, test templates resampled, threshold fixed
    ecr_hi: float
    ecr_lo_cal: float  # 95%, calibration and test templates resampled (coverage rows)
    ecr_hi_cal: float
    fnr: float
    fnr_lo: float
    fnr_hi: float
    apss: float
    metrics: dict  # evaluation.diagnostics.AnswerMetrics
    by_hops: dict  # hop count -> {"ecr", "fnr", "n"}
    single: dict  # single-answer questions: ecr, apss, n
    n_test: int
    hints: str = "none"
    recall_cal: float = math.nan
    recall: float = math.nan
    pooled: dict = field(default_factory=dict)  # mean ECR, p5, held over re-splits

    @property
    def below_target(self) -> bool:
        """The whole test interval lies on the wrong side of the target."""
        if self.risk == FNR:
            return self.fnr_lo > self.alpha + 1e-12
        return self.ecr_hi < 1 - self.alpha - 1e-12


@dataclass(kw_only=True)  # built by keyword: many fields
class Diagnosis:
    method: str
    ks_statistic: float
    ks_p: float
    recall_cal: float
    recall_test: float
    miscoverage: list[dict]  # per alpha: shift.MissTest.to_dict() (Holm across alphas)
    widths: dict  # alpha -> {"question": width, "template": width} of the test interval


@dataclass(kw_only=True)  # built by keyword: many fields
class DeployedResults:
    rows: list[Row]
    diagnoses: list[Diagnosis]
    methods: list[str]
    alphas: list[float]
    n_cal: int
    n_test: int
    boot: int
    seed: int
    draws: int
    notes: list[str] = field(default_factory=list)
    hop_level: dict = field(default_factory=dict)  # the hop-level run's diagnostics

    def row(self, method: str, alpha: float) -> Row:
        for r in self.rows:
            if r.method == method and math.isclose(r.alpha, alpha):
                return r
        raise KeyError((method, alpha))

    def to_dict(self) -> dict:
        return asdict(self)


def deployed(
    cal: Mapping[str, CandidateTable],
    test: Mapping[str, CandidateTable],
    variants: Sequence[Variant],
    alphas: Sequence[float],
    population: Mapping,
    boot: int = 1000,
    seed: int = 0,
    draws: int = 500,
    hints: Mapping[str, str] | None = None,
) -> DeployedResults:
    rows, diagnoses = [], []
    for v in variants:
        c, t = cal[v.method], test[v.method]
        sc_c, sc_t = table_scores(c, v.spec), table_scores(t, v.spec)
        calibrated = Calibrated.from_flat(c.qidx, sc_c, c.gold, c.n_gold, c.group, population)
        counter = SetCounter(t.qidx, sc_t, t.gold, t.n)
        top = np.zeros(t.n, dtype=bool)
        has = t.sizes > 0
        top[has] = t.gold[t.start[:-1][has]]  # the first by (cost, id) is the Hits@1 answer
        cal_top = _top_hit(c, sc_c, calibrated)
        for a in alphas:
            rows.append(
                _row(v, a, c, t, calibrated, counter, top, cal_top, boot, seed, draws, hints)
            )
        if v.diagnose:
            diagnoses.append(_diagnose(v, alphas, c, t, calibrated, counter, boot, seed))
    n_cal = next(iter(cal.values())).n if cal else 0
    n_test = next(iter(test.values())).n if test else 0
    names = list(dict.fromkeys(v.name for v in variants))
    return DeployedResults(
        rows=rows,
        diagnoses=diagnoses,
        methods=names,
        alphas=list(alphas),
        n_cal=n_cal,
        n_test=n_test,
        boot=boot,
        seed=seed,
        draws=draws,
    )


def _row(v, alpha, c, t, calibrated, counter, top, cal_top, boot, seed, draws, hints) -> Row:
    req = v.request(alpha)
    t_groups = calibrated.label(t.group)  # 0 (no candidates) reads the largest group's
    groups = sorted(set(np.unique(t_groups).tolist()) | set(np.unique(calibrated.groups).tolist()))
    taus = {int(g): calibrated.threshold(req, g).value for g in groups}
    tau_q = calibrated.thresholds(req, t.group)
    size, hit = counter.counts(tau_q, nonempty=not req.allow_empty)
    covered = hit > 0
    m = answer_metrics(size, hit, t.n_gold, covered, top)
    fnr_q = 1 - hit / np.maximum(t.n_gold, 1)
    rng = np.random.default_rng(seed)
    lo, hi = cluster_bootstrap(covered, t.template, boot, rng)
    flo, fhi = cluster_bootstrap(fnr_q, t.template, boot, rng)
    lo_c = hi_c = math.nan
    pooled: dict = {}
    # an FNR lambda of +inf (every candidate) may still attain alpha: ask the threshold
    attainable = all(calibrated.threshold(req, int(g)).attainable for g in np.unique(t.group))
    if req.risk == COVERAGE and attainable and all(x < math.inf for x in tau_q):
        s_c = calibrated.scores
        s_t = effective(counter.score, counter.top_gold > 0, not req.allow_empty)
        pools = _pools(calibrated, req, t_groups)
        s_c_eff = effective(s_c, cal_top, not req.allow_empty)
        s_th = s_c_eff if req.eff else s_c  # the scores the thresholds are read from
        lo_c, hi_c = cal_test_interval(  # pools re-planned in every replicate
            s_th, s_t, alpha, req.pac, calibrated.groups, t_groups, c.template, t.template,
            boot, seed, req.grouped, calibrated.min_group,
        )  # fmt: skip
        mean, p5, held = resplits(
            np.concatenate([s_c_eff, s_t]),
            np.concatenate([calibrated.groups, t_groups]),
            c.n,
            alpha,
            req.pac,
            draws,
            seed,
            pools if req.grouped else None,
            None if req.eff else np.concatenate([s_c, counter.score]),
            replan=req.grouped,
        )
        pooled = {"ecr_mean": mean, "ecr_p5": p5, "held": held}
    by_hops = {
        int(h): {
            "ecr": float(covered[t.hops == h].mean()),
            "fnr": float(fnr_q[t.hops == h].mean()),
            "n": int((t.hops == h).sum()),
        }
        for h in np.unique(t.hops)
        if h >= 0
    }
    single = t.n_gold == 1
    one = {
        "ecr": float(covered[single].mean()) if single.any() else math.nan,
        "apss": float(size[single].mean()) if single.any() else math.nan,
        "n": int(single.sum()),
    }
    return Row(
        method=v.name,
        alpha=float(alpha),
        risk=req.risk,
        tau=taus,
        attainable=attainable,
        ecr=m.ecr,
        ecr_lo=lo,
        ecr_hi=hi,
        ecr_lo_cal=lo_c,
        ecr_hi_cal=hi_c,
        fnr=float(fnr_q.mean()),
        fnr_lo=flo,
        fnr_hi=fhi,
        apss=m.apss,
        metrics=m.to_dict(),
        by_hops=by_hops,
        single=one,
        n_test=t.n,
        hints=(hints or {}).get(v.method, "none"),
        recall_cal=float(np.isfinite(calibrated.scores).mean()),
        recall=float(np.isfinite(counter.score).mean()),
        pooled=pooled,
    )


def _pools(calibrated: Calibrated, req: Request, test_groups: np.ndarray) -> dict[int, str]:
    seen = set(np.unique(calibrated.groups).tolist()) | set(np.unique(test_groups).tolist()) | {0}
    if not req.grouped:
        return {int(g): "all" for g in seen}
    m = calibrated._mondrian(True)
    return {int(g): m.pool_of(int(g), req.alpha, req.pac) for g in seen}


def _top_hit(c: CandidateTable, score: np.ndarray, calibrated: Calibrated) -> np.ndarray:
    """Calibration questions whose top level (under the variant's scores) holds a gold
    answer: their best gold score is within the tolerance of their best score."""
    best = np.full(c.n, np.inf)
    np.minimum.at(best, c.qidx, score)
    return np.isfinite(calibrated.scores) & (calibrated.scores <= slack(best))


def _diagnose(v, alphas, c, t, calibrated, counter, boot, seed) -> Diagnosis:
    s_c, s_t = calibrated.scores, counter.score
    big = np.nanmax(np.where(np.isfinite(np.r_[s_c, s_t]), np.r_[s_c, s_t], np.nan)) + 1
    ks = stats.ks_2samp(np.where(np.isfinite(s_c), s_c, big), np.where(np.isfinite(s_t), s_t, big))
    tests, widths = [], {}
    rng = np.random.default_rng(seed + 7)
    reqs = [v.request(a) for a in alphas]
    tc, tt = template_codes(c.templates, c.template, t.templates, t.template)
    eff = reqs[0].eff  # one variant: one kind of scores for all its alphas
    cal_x = effective(s_c, _top_hit(c, table_scores(c, v.spec), calibrated), True) if eff else s_c
    test_x = effective(s_t, counter.top_gold > 0, True) if eff else s_t
    p_perm = permutation_tests(
        cal_x, calibrated.groups, tc, test_x, calibrated.label(t.group), tt, reqs,
        seed=seed + 11, min_group=calibrated.min_group,
    )  # fmt: skip
    for a, req, pp in zip(alphas, reqs, p_perm, strict=True):
        # the event whose law shift.miss_test knows: the calibrated score within tau (with
        # effective scores, exactly the never-empty set's coverage)
        s_used = effective(s_t, counter.top_gold > 0, True) if req.eff else s_t
        miss_t = ~(s_used <= slack(calibrated.thresholds(req, t.group)))
        tests.append(miss_test(calibrated, req, t.group, miss_t))
        tests[-1].p_perm = pp
        qlo, qhi = cluster_bootstrap(~miss_t, None, boot, rng)
        tlo, thi = cluster_bootstrap(~miss_t, t.template, boot, rng)
        widths[float(a)] = {"question": qhi - qlo, "template": thi - tlo}
    tests = [x.to_dict() for x in holm(tests)]
    return Diagnosis(
        method=v.name,
        ks_statistic=float(ks.statistic),
        ks_p=float(ks.pvalue),
        recall_cal=float(np.isfinite(s_c).mean()),
        recall_test=float(np.isfinite(s_t).mean()),
        miscoverage=tests,
        widths=widths,
    )
