"""The canary: proof that this process scores paths as the calibration did.

A calibration stores, for a few of its questions, the costs its scorer gave their best
candidate paths. A session re-scores exactly those (question, path) pairs before it
answers anything (microseconds: no search, no Neo4j) and refuses when the scores could
have moved by more than the cut's slack: another encoder export, ONNX Runtime build or CPU,
device or scorer backend could otherwise move scores past tau unseen.

The check is in score units (docs/method.md, "The same score in every batch"): a change of
at most d in every candidate's cost moves a surprisal (and an APS / RAPS mass) by at most
2 d / T, a centred cost by (1 + centre) d; the cut's slack TOLERANCE x (1 + |tau|) is at
least TOLERANCE. Without the calibration's score family the smallest T the temperature fit
can return (stages.scoring.TEMPERATURE_GRID) stands in: the strictest check.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from cpr_neo4j.conformal.threshold import TOLERANCE
from cpr_neo4j.errors import Conflict
from cpr_neo4j.model.costs import computed
from cpr_neo4j.search.base import RelPath, Step
from cpr_neo4j.stages.scoring import TEMPERATURE_GRID

QUESTIONS = 5  # calibration questions a canary holds
PATHS = 4  # best candidate paths per question


def entry(scorer: Any, masked: str, retrieval: Any) -> dict:
    """One canary question: its masked text, best candidate paths and their raw costs."""
    best = sorted(retrieval.candidates(), key=lambda c: (c.cost, c.path))[:PATHS]
    paths = [c.path for c in best]
    costs = scorer.score(scorer.question(masked), paths) if paths else np.zeros(0)
    return {
        "q": masked,
        "paths": [[s.key() for s in p] for p in paths],
        "costs": [float(c) for c in costs],
    }


def _path(keys: Sequence[str]) -> RelPath:
    return tuple(map(Step.of_key, keys))


def drift(scorer: Any, canary: Sequence[dict]) -> float:
    """The largest absolute change of a canary cost when computed here, from embeddings
    this machine's encoder computes now (never from kept costs, which may come from the
    calibration's own table, nor from kept embeddings, which texts.npz holds for every
    canary text: model.costs.computed)."""
    worst = 0.0
    with computed(scorer) as fresh:
        if hasattr(fresh, "path_rows"):  # every text embedded in two batches, not one by one
            fresh.questions([item["q"] for item in canary if item["paths"]])
            fresh.path_rows([_path(p) for item in canary for p in item["paths"]])
        for item in canary:
            if not item["paths"]:
                continue
            now = fresh.score(fresh.question(item["q"]), [_path(p) for p in item["paths"]])
            was = np.asarray(item["costs"], dtype=float)
            worst = max(worst, float(np.max(np.abs(now - was))))
    return worst


def score_per_cost(spec: Mapping[str, Any] | None) -> float:
    """The most a score moves per unit of the largest change in its question's costs."""
    if spec is None:
        return 2.0 / min(TEMPERATURE_GRID)
    if "T" in spec:  # surprisal, aps, raps: the softmax at T (raps' rank penalty: see docs)
        return 2.0 / float(spec["T"])
    if spec.get("family") == "centred":
        return 1.0 + abs(float(spec.get("centre", 0.0)))
    return 1.0


def check(
    scorer: Any,
    canary: Sequence[dict],
    calibration: str,
    eps: float = TOLERANCE,
    spec: Mapping[str, Any] | None = None,
) -> float:
    """Refuse (Conflict: `cpr serve` answers 409) when this process's costs differ from the
    calibration's by more than moves a score by the cut's smallest slack `eps`; else the
    largest score move the drift allows (score units)."""
    moved = drift(scorer, canary) * score_per_cost(spec)
    if moved > eps:
        raise Conflict(
            f"this process scores paths differently from calibration {calibration} (scores "
            f"can move by {moved:.2g}, the cut's tolerance is {eps:g}): another encoder, "
            "runtime, CPU, device or scorer backend than the calibration's; run `cpr "
            "calibrate` here"
        )
    return moved
