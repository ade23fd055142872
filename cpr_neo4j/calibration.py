"""A calibration as its readers see it: a typed view of a (:Calibration) node's fields that
say what it serves, how it was made and what a request must match. The node's curves (the
sorted scores, groups and recall rows) stay in `node`, read only by
conformal.guarantee.Calibrated, which owns the guarantee's arithmetic."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cpr_neo4j.conformal.threshold import TOLERANCE
from cpr_neo4j.graph.records import ALL_HOPS

NAMED = "named_"  # prefix of a text-linked calibration's curves for named topics
UNCALIBRATED = "none"  # the calibration id of an answer given without one


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
    # Retrieval and hint settings a request must match (None: not recorded, not checked)
    beam_width: int | None
    active: int | None
    fanout_cap: int | None
    hint_mode: str | None = None
    hint_beta: float | None = None
    hint_prompt: str | None = None
    topic_answers: bool = False  # a path may end back on its topic (records.topic_answers)
    score_family: dict = field(default_factory=dict)  # the score family and its parameters
    tolerance: float = TOLERANCE  # the cut's tolerance it was made with
    code: dict | None = None  # the code's pins at calibration (stages/pins.py); None: older
    canary: tuple = ()  # scorer checks: (path text, score) items (stages/canary.py)
    bracketed: float | None = None  # share of its questions that [bracket] their topics
    graph_fingerprint: str | None = None  # the dataset's graph when it was made
    graph_now: str | None = None  # the dataset's graph when it was read
    newest: Any = None  # the newest created time of the dataset's calibrations then
    created: Any = None  # Neo4j's datetime of the node's last write
    named: bool = False  # it stored curves for questions whose topics the user names
    # A dataset without calibration answers without a guarantee (stages/session.uncalibrated)
    uncalibrated: bool = False
    scorer: str = ""  # what ranks the answers then, in words
    next_step: str = ""  # what gives the dataset a guarantee
    node: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def key(self) -> str:
        """Recalibrating rewrites a node under the same id: id@created names one version."""
        return f"{self.id}@{self.created}"

    @classmethod
    def of(cls, node: Mapping[str, Any]) -> Calibration:
        """The view of a calibration node as `graph.records.latest_calibration` reads it."""
        hf = node.get("hops_filter")
        code = node.get("code")
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
            beam_width=node.get("beam_width"),
            active=node.get("active"),
            fanout_cap=node.get("fanout_cap"),
            hint_mode=node.get("hint_mode"),
            hint_beta=node.get("hint_beta"),
            hint_prompt=node.get("hint_prompt"),
            topic_answers=bool(node.get("topic_answers", False)),
            score_family=json.loads(node.get("score_family") or "{}"),
            # older calibrations stored the same 1e-4 this code has, or nothing
            tolerance=float(node["tolerance"]) if node.get("tolerance") is not None else TOLERANCE,
            code=json.loads(code) if code else None,
            canary=tuple(json.loads(node.get("canary") or "[]")),
            bracketed=node.get("bracketed"),
            graph_fingerprint=node.get("graph_fingerprint"),
            graph_now=node.get("graph_now"),
            newest=node.get("newest"),
            created=node.get("created"),
            named=node.get("linking") == "text" and f"{NAMED}q_scores" in node,
            node=node,
        )

    def pinned(self, key: str) -> Any:
        """A recorded setting a request must match (stages/session.check_settings)."""
        return getattr(self, key)
