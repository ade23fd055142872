"""From a question's retrieval to its answers' scores: one function for every stage.

Calibration, `cpr ask`, `cpr serve` and `cpr eval` score answers here, so a calibration's
scores and an ask's are the same numbers (up to recomputation noise, which the cut's
tolerance absorbs and the canary checks).

The default family, chosen on the inner dev split (README, "Method"; experiments/select_defaults):
the surprisal -log P(answer), where P(answer) is the softmax mass, at a temperature fitted
on training questions, of the candidate relation sequences that reach the answer. An
answer several good sequences agree on is likelier than one only the best reaches, and a
confident question's best answers score ~0 while an uncertain one's do not, so one
threshold takes one answer level where that is enough and more where it is not.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from cpr_neo4j.conformal.scores import from_spec
from cpr_neo4j.errors import CprError
from cpr_neo4j.search.answers import AnswerColumns, answer_columns, sequence_hits, sequence_nll

SURPRISAL = "surprisal"
# A model trained before temperatures were fitted: the grid is searched at calibration.
TEMPERATURE_GRID = tuple(float(t) for t in np.exp(np.linspace(math.log(0.02), math.log(3), 25)))


def default_spec(temperature: float) -> dict[str, Any]:
    return {"family": SURPRISAL, "T": float(temperature)}


def columns(retrieval: Any, spec: Mapping[str, Any], topic_answers: bool) -> AnswerColumns:
    """The retrieval's answers as columns, with the surprisal at the spec's temperature."""
    t = float(spec["T"]) if spec.get("family") == SURPRISAL else None
    return answer_columns(retrieval, t, topics_are_answers=topic_answers)


def answer_scores(cols: AnswerColumns, spec: Mapping[str, Any]) -> np.ndarray:
    """Each answer's score under the calibration's family (lower = more plausible)."""
    family = spec.get("family")
    if family == SURPRISAL:
        return np.asarray(cols.surprisal, dtype=float)
    if not len(cols):
        return np.zeros(0)
    zeros = np.zeros(len(cols), dtype=np.int64)  # one question: the flat path, bit-identical
    inputs = {"ids": np.asarray(cols.ids)} if family == "id_rank" else {}
    return from_spec(zeros, cols.cost, spec, **inputs)


def fit_temperature(retrievals: Sequence[Any], golds: Sequence[set[str]]) -> float:
    """The T minimising the mean -log mass of the sequences reaching a gold answer, over
    training questions (a log grid, then its best neighbourhood refined)."""
    if not retrievals:
        raise CprError("no training questions to fit the score temperature on")
    hits = [sequence_hits(r, g) for r, g in zip(retrievals, golds, strict=True)]

    def loss(t: float) -> float:
        nll = [sequence_nll(c, h, t) for c, h in hits]
        finite = [x for x in nll if math.isfinite(x)]
        return float(np.mean(finite)) if finite else math.inf

    grid = list(TEMPERATURE_GRID)
    losses = [loss(t) for t in grid]
    i = int(np.argmin(losses))
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)]
    fine = list(np.exp(np.linspace(math.log(lo), math.log(hi), 9)))
    best = min(fine, key=loss)
    return float(best)
