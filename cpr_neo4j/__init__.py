"""cpr-neo4j: Conformal Path Reasoning over a Neo4j knowledge graph.

The Python API (cpr_neo4j/api.py): `from cpr_neo4j import CPR, AskOptions`. Names load on
first use, so `import cpr_neo4j` (and `cpr --help`) stays light."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_WHERE = {
    "CPR": "cpr_neo4j.api",
    "AskOptions": "cpr_neo4j.options",
    "Calibration": "cpr_neo4j.calibration",
    "AskResult": "cpr_neo4j.stages.ask",
    "Answer": "cpr_neo4j.stages.ask",
    "CalibrationResult": "cpr_neo4j.stages.calibrate",
    "TrainResult": "cpr_neo4j.stages.train",
    "IngestReport": "cpr_neo4j.graph.ingest",
    "CprError": "cpr_neo4j.errors",
    "Unattainable": "cpr_neo4j.errors",
    "Conflict": "cpr_neo4j.errors",
    "StaleCalibration": "cpr_neo4j.errors",
}
__all__ = [
    "CPR",
    "Answer",
    "AskOptions",
    "AskResult",
    "Calibration",
    "CalibrationResult",
    "Conflict",
    "CprError",
    "IngestReport",
    "StaleCalibration",
    "TrainResult",
    "Unattainable",
    "__version__",
]

if TYPE_CHECKING:
    from cpr_neo4j.api import CPR
    from cpr_neo4j.calibration import Calibration
    from cpr_neo4j.errors import Conflict, CprError, StaleCalibration, Unattainable
    from cpr_neo4j.graph.ingest import IngestReport
    from cpr_neo4j.options import AskOptions
    from cpr_neo4j.stages.ask import Answer, AskResult
    from cpr_neo4j.stages.calibrate import CalibrationResult
    from cpr_neo4j.stages.train import TrainResult


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'cpr_neo4j' has no attribute {name!r}")
    value = getattr(importlib.import_module(_WHERE[name]), name)
    globals()[name] = value
    return value
