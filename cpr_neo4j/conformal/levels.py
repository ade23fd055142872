"""The thresholds a calibration gives per alpha and group, as `cpr calibrate` prints them and
`GET /calibrations` returns them (stored on the :Calibration as JSON: a property cannot hold
a list of maps)."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

from cpr_neo4j.conformal.guarantee import COVERAGE, FNR, Calibrated, request
from cpr_neo4j.errors import CprError

DEFAULT_ALPHAS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)  # `cpr calibrate --alphas`


def tau_rows(cal: Calibrated, alphas: Sequence[float], delta: float | None) -> list[dict]:
    """One row per alpha, risk and group: {alpha, risk, group, tau, tau_infinite}; tau is
    null when infinite (JSON has no infinity): tau_infinite true for +inf (unattainable),
    false for -inf. No FNR rows for a calibration made before FNR curves were stored."""
    groups = sorted({int(g) for g in cal.groups.tolist()} - {0})
    rows = []
    for a in alphas:
        for risk, req in ((COVERAGE, request(a, delta)), (FNR, request(a, None, FNR))):
            for g in groups:
                try:
                    t = float(cal.threshold(req, g).value)
                except CprError:  # a calibration made before FNR curves has coverage only
                    break
                rows.append(
                    {
                        "alpha": float(a),
                        "risk": risk,
                        "group": g,
                        "tau": t if math.isfinite(t) else None,
                        "tau_infinite": t == math.inf,
                    }
                )
    return rows


def to_json(rows: list[dict]) -> str:
    return json.dumps(rows, allow_nan=False)
