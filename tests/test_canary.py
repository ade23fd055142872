"""The scorer canary decides in score units: a cost change d moves a surprisal by at most
2 d / T, so the tolerance it allows on costs follows from the calibration's temperature."""

from __future__ import annotations

import numpy as np
import pytest

from cpr_neo4j.conformal.threshold import TOLERANCE
from cpr_neo4j.errors import Conflict
from cpr_neo4j.search.answers import _log_softmax
from cpr_neo4j.stages import canary
from cpr_neo4j.stages.scoring import TEMPERATURE_GRID


class Shifted:
    """Scores every path at its stored cost plus `shift`."""

    def __init__(self, costs, shift):
        # `costs` on a scorer is its store of kept costs (the canary computes without it)
        self.stored, self.shift = costs, shift

    def question(self, text):
        return text

    def score(self, ctx, paths):
        return np.asarray(self.stored[: len(paths)], dtype=np.float32) + np.float32(self.shift)


ITEM = {"q": "who directed ENT", "paths": [["directed_by"], ["~starred_actors"]]}


def test_the_surprisal_moves_by_at_most_two_cost_changes_over_t():
    rng = np.random.default_rng(0)
    for t in (0.02, 0.3, 3.0):
        c = rng.normal(size=50)
        d = rng.uniform(-1e-6, 1e-6, size=50)
        moved = np.abs(_log_softmax(c + d, t) - _log_softmax(c, t)).max()
        assert moved <= 2 * np.abs(d).max() / t * (1 + 1e-6)


@pytest.mark.parametrize("t", [0.02, 0.3, 3.0])
def test_the_canary_allows_a_cost_change_by_the_calibrations_temperature(t):
    costs = [0.5, 1.25]
    spec = {"family": "surprisal", "T": t}
    allowed = TOLERANCE * t / 2  # the largest cost change the cut's slack absorbs
    item = {**ITEM, "costs": costs}
    assert canary.check(Shifted(costs, 0.0), [item], "c1", spec=spec) == 0.0
    assert canary.check(Shifted(costs, allowed / 2), [item], "c1", spec=spec) <= TOLERANCE
    with pytest.raises(Conflict, match="scores paths differently from calibration c1"):
        canary.check(Shifted(costs, allowed * 2), [item], "c1", spec=spec)


def test_without_the_score_family_the_smallest_fitted_temperature_decides():
    assert canary.score_per_cost(None) == 2 / min(TEMPERATURE_GRID)
    assert canary.score_per_cost({"family": "centred", "centre": 0.97}) == pytest.approx(1.97)
    item = {**ITEM, "costs": [0.5, 1.25]}
    with pytest.raises(Conflict):
        canary.check(Shifted([0.5, 1.25], 4e-6), [item], "c1")  # 4e-4 at T = 0.02
