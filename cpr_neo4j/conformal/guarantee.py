"""The guarantee's rules, in one place: calibrate, ask, serve and eval all come here.

A `Calibrated` holds what one calibration measured (per question: its score S, its group,
its gold answers' scores and |Y|) and decides, for a `Request`:
- the threshold: coverage mode takes the k-th smallest S (plain, or the PAC rank with
  delta); FNR mode takes conformal risk control's lambda-hat (conformal/risk.py);
  group-conditional (the default) reads both from the calibration questions of the test
  question's own group, with small groups pooled (conformal/mondrian.py: a floor that
  follows alpha and delta); the group is the hop count of the best candidate's path, and
  questions with no candidate join the largest; on raw S, or on effective scores for
  never-empty sets when asked (conformal/effective.py);
- whether alpha is attainable at all (tau = +inf: recall or n too small), and why not;
- the cut: scores within the tolerance of the threshold (an enlargement only, for scores
  recomputed in another process), plus the top-ranked level unless empty sets are allowed;
- the sentence printed with the set (conformal/wording.py), naming the population it holds
  for, marginal or PAC (per group and alpha), and what a fallback threshold does not promise.
Which calibration serves a question (every hop count unless hops are named) is
conformal/serving.py's `serving`, re-exported here.

Every score is a fixed function of the question and its candidates (conformal/scores.py),
and a group is a function of the candidates only (the length of the best answer's path),
so exchangeable questions are all the guarantee needs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from cpr_neo4j.conformal import DEFAULT_DELTA, effective, wording
from cpr_neo4j.conformal import refuse_fnr_delta as refuse_fnr_delta  # no numpy there
from cpr_neo4j.conformal.mondrian import MIN_GROUP, Mondrian
from cpr_neo4j.conformal.risk import GroupedFnr
from cpr_neo4j.conformal.serving import ALL_HOPS as ALL_HOPS  # re-exported
from cpr_neo4j.conformal.serving import serving as serving
from cpr_neo4j.conformal.threshold import TOLERANCE, cut
from cpr_neo4j.errors import BadInput, CprError

COVERAGE, FNR = "coverage", "fnr"
EFFECTIVE_DEFAULT = False  # raw S unless asked (--effective-scores; docs/method.md)


@dataclass(frozen=True)
class Request:
    alpha: float
    delta: float | None = DEFAULT_DELTA  # None: the marginal guarantee
    risk: str = COVERAGE
    allow_empty: bool = False
    grouped: bool = True
    effective: bool = EFFECTIVE_DEFAULT  # calibrate never-empty sets on conformal/effective.py

    def __post_init__(self) -> None:
        if not 0 < self.alpha < 1:
            raise BadInput(f"alpha must lie strictly between 0 and 1, got {self.alpha}")
        if self.delta is not None and not 0 < self.delta < 1:
            raise BadInput(f"delta must lie strictly between 0 and 1, got {self.delta}")
        if self.risk not in (COVERAGE, FNR):
            raise BadInput(f"risk must be {COVERAGE} or {FNR}, got {self.risk!r}")

    @property
    def eff(self) -> bool:
        """Effective scores apply to never-empty sets only (for the others: invalid)."""
        return self.effective and not self.allow_empty

    @property
    def pac(self) -> float | None:
        """The delta the threshold uses: risk control bounds an expectation, never PAC."""
        return self.delta if self.risk == COVERAGE else None


def request(
    alpha: float,
    delta: float | None = DEFAULT_DELTA,
    risk: str = COVERAGE,
    allow_empty: bool = False,
    grouped: bool = True,
    effective: bool | None = None,
) -> Request:
    """A Request from CLI/HTTP values: delta 0 means the marginal guarantee."""
    eff = EFFECTIVE_DEFAULT if effective is None else effective
    return Request(
        alpha,
        delta=delta or None,
        risk=risk,
        allow_empty=allow_empty,
        grouped=grouped,
        effective=eff,
    )


@dataclass(frozen=True)
class Threshold:
    value: float  # tau (coverage) or lambda-hat (FNR); +inf when unattainable
    why: str | None  # why alpha cannot be honoured, None when it can
    group: int  # the test question's group (0 when not group-conditional)
    pool: str  # which calibration questions the threshold came from
    n: int  # how many

    @property
    def attainable(self) -> bool:
        return self.why is None


class Calibrated:
    """Thresholds and sentences from one calibration's per-question measurements."""

    def __init__(
        self,
        scores: Sequence[float],
        groups: Sequence[int],
        fnr: Mapping[str, Sequence],
        population: Mapping[str, Any],
        min_group: int = MIN_GROUP,
    ):
        self.scores = np.asarray(scores, dtype=float)
        # A question with no candidate at all (group 0: nothing to rank, never covered) joins
        # the largest group, the hardest kind of question: every question is then in a group
        # whose guarantee counts its misses, so coverage holds overall as well as per group.
        raw = np.asarray(groups, dtype=np.int64)
        self.top = int(raw.max()) if raw.size and raw.max() > 0 else 0
        self.groups = self.label(raw)
        self.n = len(self.scores)
        if len(self.groups) != self.n:
            raise BadInput("one group per calibration question")
        self.population = dict(population)
        self.min_group = min_group
        self._fnr_in = {k: np.asarray(v) for k, v in fnr.items()}
        # which gold candidates lie in their question's top level (absent: raw scores only)
        top = self._fnr_in.setdefault("top", np.zeros(0, bool)).astype(bool)
        self.knows_top = len(top) == len(self._fnr_in.get("score", ()))
        self._fnr_in["top"] = top if self.knows_top else np.zeros(len(top), bool)
        self.top_hit = np.zeros(self.n, bool)
        if self.knows_top and len(top):
            self.top_hit = effective.question_top_hit(self._fnr_in["qidx"], top, self.n)
        self._cache: dict[tuple, Any] = {}

    # ---- construction --------------------------------------------------------------

    @classmethod
    def from_flat(
        cls,
        qidx: np.ndarray,
        score: np.ndarray,
        gold: np.ndarray,
        n_gold: np.ndarray,
        groups: np.ndarray,
        population: Mapping[str, Any],
    ) -> Calibrated:
        """From calibration questions' flat candidate table (evaluation/table.py layout)."""
        n = len(n_gold)
        best = np.full(n, np.inf)
        g = np.asarray(gold, dtype=bool)
        np.minimum.at(best, np.asarray(qidx)[g], np.asarray(score)[g])
        top = effective.top_level(qidx, score, n)[g]
        fnr = {"qidx": np.asarray(qidx)[g], "score": np.asarray(score)[g], "n_gold": n_gold}
        return cls(best, groups, fnr | {"top": top}, population)

    def to_props(self) -> dict[str, Any]:
        """What a (:Calibration) node stores to rebuild this (lists of numbers only)."""
        return {
            "q_scores": self.scores.tolist(),
            "q_groups": self.groups.tolist(),
            "fnr_qidx": self._fnr_in["qidx"].astype(int).tolist(),
            "fnr_scores": self._fnr_in["score"].astype(float).tolist(),
            "q_n_gold": self._fnr_in["n_gold"].astype(int).tolist(),
            "fnr_top": self._fnr_in["top"].astype(bool).tolist(),
        }

    @classmethod
    def from_node(cls, node: Mapping[str, Any]) -> Calibrated:
        """From a stored calibration. One made before groups existed serves ungrouped."""
        if "q_scores" not in node:
            raise CprError(
                f"calibration {node.get('id')} predates group-conditional and answer-recall "
                f"calibration: run `cpr calibrate {node.get('dataset', 'DATASET')}` again"
            )
        fnr = {
            "qidx": node.get("fnr_qidx") or [],
            "score": node.get("fnr_scores") or [],
            "n_gold": node.get("q_n_gold") or [],
            "top": node.get("fnr_top") or [],  # absent before effective scores: raw only
        }
        return cls(node["q_scores"], node["q_groups"], fnr, population_of(node))

    # ---- thresholds ------------------------------------------------------------------

    def label(self, groups) -> np.ndarray:
        """Group labels as thresholds read them: 0 (no candidates) is the largest group."""
        g = np.asarray(groups, dtype=np.int64)
        return np.where(g == 0, self.top, g) if self.top else g

    def _labels(self, grouped: bool) -> np.ndarray:
        return self.groups if grouped else np.zeros(self.n, dtype=np.int64)

    def _mondrian(self, grouped: bool, eff: bool = False) -> Mondrian:
        key = ("m", grouped, eff)
        if key not in self._cache:
            s = effective.scores(self.scores, self.top_hit) if eff else self.scores
            self._cache[key] = Mondrian.from_scores(s, self._labels(grouped), self.min_group)
        return self._cache[key]

    def _fnr(self, grouped: bool, eff: bool = False) -> GroupedFnr:
        key = ("f", grouped, eff)
        if key not in self._cache:
            f = self._fnr_in
            if not len(f["n_gold"]):
                raise CprError("this calibration stored no answer-recall curve: recalibrate")
            score = f["score"].astype(float)
            self._cache[key] = GroupedFnr.from_flat(
                f["qidx"].astype(np.int64),
                np.where(f["top"], -np.inf, score) if eff else score,
                np.ones(len(f["score"]), dtype=bool),
                f["n_gold"].astype(np.int64),
                self._labels(grouped),
                self.min_group,
            )
        return self._cache[key]

    def threshold(self, req: Request, group: int = 0) -> Threshold:
        """The threshold for a question of `group` (ignored unless req.grouped)."""
        g = int(self.label(group)) if req.grouped else 0
        if req.risk == FNR:
            f = self._fnr(req.grouped, req.eff)
            pool = f.pool_of(g, req.alpha)
            return Threshold(
                value=f.lam(req.alpha, g),
                why=f.unattainable(req.alpha, g),
                group=g,
                pool=pool,
                n=f.curve(g, req.alpha).n,
            )
        m = self._mondrian(req.grouped, req.eff)
        return Threshold(
            value=m.tau(req.alpha, req.pac, g),
            why=m.unattainable(req.alpha, req.pac, g),
            group=g,
            pool=m.pool_of(g, req.alpha, req.pac),
            n=m.pool(req.alpha, req.pac, g)[1],
        )

    def thresholds(self, req: Request, groups: np.ndarray) -> np.ndarray:
        """One threshold per question from its group (evaluation: many questions)."""
        g = self.label(groups) if req.grouped else np.zeros(len(groups), int)
        uniq, inv = np.unique(g, return_inverse=True)
        return np.array([self.threshold(req, int(u)).value for u in uniq])[inv]

    def notes(self, req: Request) -> list[str]:
        """Fallbacks in use (small groups pooled), for reports."""
        return self._mondrian(req.grouped).notes(req.alpha, req.pac) if req.grouped else []

    # ---- sentences (conformal/wording.py) -------------------------------------------

    def sentence(self, req: Request, th: Threshold) -> str:
        """What the set made with `th` promises, and for whom (and for whom not)."""
        return wording.sentence(self, req, th)

    def caveat(self, req: Request, th: Threshold) -> str | None:
        """What the sentence does not promise when its threshold is a fallback."""
        return wording.caveat(self, req, th)

    def group_n(self, req: Request, group: int) -> int:
        """Calibration questions of `group` (FNR: those with a correct answer)."""
        if req.risk == FNR:
            curve = self._fnr(True).curves.get(int(group))
            return curve.n if curve is not None else 0
        return self._mondrian(True).n.get(int(group), 0)


def population_of(node: Mapping[str, Any]) -> dict[str, Any]:
    hops = sorted(int(h) for h in node.get("hop_counts") or [])
    label = None
    if hops:
        label = f"{hops[0]}-hop" if len(hops) == 1 else f"{hops[0]}-{hops[-1]} hops"
    return {"n": int(node.get("n", 0)), "dataset": node.get("dataset"), "hops_label": label}


def cut_set(score: np.ndarray, th: Threshold, req: Request, eps: float = TOLERANCE) -> np.ndarray:
    """The answer mask of one question: within the threshold (tolerance included), plus its
    top level unless empty sets were asked for. +inf (an unattainable alpha answered with
    --all-candidates) keeps every candidate."""
    return cut(score, th.value, eps, nonempty=not req.allow_empty)


def with_delta(req: Request, delta: float | None) -> Request:
    return replace(req, delta=delta or None)


def finite_or_none(x: float) -> float | None:
    return x if math.isfinite(x) else None
