"""The canary: proof that this process scores paths as the calibration did.

A calibration stores, for a few of its questions, the costs its scorer gave their best
candidate paths. A session re-scores exactly those (question, path) pairs before it
answers anything (microseconds: no search, no Neo4j) and refuses when any cost moved by
more than the cut's tolerance: another encoder export, ONNX Runtime or BLAS build, device
or scorer backend could otherwise move scores past tau unseen.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from cpr_neo4j.conformal.threshold import TOLERANCE
from cpr_neo4j.errors import Conflict
from cpr_neo4j.search.base import RelPath, Step

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
    return tuple(Step(k[1:], False) if k.startswith("~") else Step(k, True) for k in keys)


def drift(scorer: Any, canary: Sequence[dict]) -> float:
    """The largest relative change of a canary cost when re-scored here."""
    worst = 0.0
    for item in canary:
        if not item["paths"]:
            continue
        now = scorer.score(scorer.question(item["q"]), [_path(p) for p in item["paths"]])
        was = np.asarray(item["costs"], dtype=float)
        worst = max(worst, float(np.max(np.abs(now - was) / (1 + np.abs(was)))))
    return worst


def check(scorer: Any, canary: Sequence[dict], calibration: str, eps: float = TOLERANCE) -> float:
    """Refuse (Conflict: `cpr serve` answers 409) when this process's scores differ from
    the calibration's beyond the tolerance; else the drift measured."""
    moved = drift(scorer, canary)
    if moved > eps:
        raise Conflict(
            f"this process scores paths differently from calibration {calibration} (a cost "
            f"moved by {moved:.2g} relative, tolerance {eps:g}): another encoder, runtime, "
            "device or scorer backend than the calibration's; run `cpr calibrate` here"
        )
    return moved
