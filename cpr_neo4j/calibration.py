"""A calibration as its readers see it: a typed view of a (:Calibration) node's fields that
say what it serves and how it was made (the node itself keeps its scores and curves)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from cpr_neo4j.graph.records import ALL_HOPS


@dataclass(frozen=True, kw_only=True)
class Calibration:
    id: str
    dataset: str
    model: str  # the scoring model's id
    n: int  # calibration questions
    hops: int  # search depth
    question_hops: int | None  # the hop count it serves; None: every hop count
    delta: float | None  # the PAC level it was made for (None: marginal)
    recall: float  # share of calibration questions with a gold answer among the candidates
    linking: str  # "gold" (named topics) or "text" (linked from the question)
    scope: str  # "graph" or "subgraph"
    beam_width: int
    active: int
    fanout_cap: int | None
    created: Any  # Neo4j's datetime of the node's last write

    @classmethod
    def of(cls, node: dict) -> Calibration:
        """The view of a calibration node as `graph.records.latest_calibration` reads it."""
        hf = node.get("hops_filter")
        return cls(
            id=node["id"],
            dataset=node.get("dataset", ""),
            model=node.get("model") or node.get("model_id", ""),
            n=int(node.get("n") or 0),
            hops=int(node.get("hops") or 0),
            question_hops=None if hf in (None, ALL_HOPS) else int(hf),
            delta=node.get("delta"),
            recall=float(node.get("recall", math.nan)),
            linking=node.get("linking") or "gold",
            scope=node.get("scope") or "graph",
            beam_width=int(node.get("beam_width") or 0),
            active=int(node.get("active") or 0),
            fanout_cap=node.get("fanout_cap"),
            created=node.get("created"),
        )
