"""What one `ask` may choose, typed: built by the Python API, `cpr ask` and `cpr serve`
alike, and turned into the ask stage's session arguments in one place (`session_args`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cpr_neo4j.conformal import DEFAULT_DELTA, refuse_fnr_delta
from cpr_neo4j.errors import BadInput

if TYPE_CHECKING:
    from cpr_neo4j.calibration import Calibration
    from cpr_neo4j.graph.store import GraphStore
    from cpr_neo4j.hints.base import HintProvider
    from cpr_neo4j.stages.session import Session

RISKS = ("coverage", "fnr")


@dataclass(frozen=True, kw_only=True)
class AskOptions:
    """How a question is answered. Every field has the default `cpr ask` has.

    alpha: the risk level (a set holds a right answer with probability >= 1 - alpha).
    delta: the PAC level of a coverage guarantee (0: the marginal guarantee; None: the
      default, 0.05 under risk coverage, none under risk fnr, whose guarantee is marginal).
    risk: "coverage" or "fnr" (the share of correct answers the set misses).
    dataset, model, hops: which calibration serves (default: the newest that fits).
    entity: topic entity ids or names, skipping linking from the text.
    beam_width, active: must equal the calibrated ones when given.
    allow_empty: the paper's sets (empty when nothing scores within the threshold).
    grouped: one threshold per group (hop count of the best path) rather than one for all.
    effective_scores: never-empty sets calibrated on effective scores.
    all_candidates: at an unattainable alpha, every candidate without a guarantee.
    allow_stale: answer with a calibration older than the graph (no guarantee)."""

    alpha: float = 0.1
    delta: float | None = None
    risk: str = "coverage"
    dataset: str | None = None
    model: str | None = None
    hops: int | None = None
    entity: str | tuple[str, ...] | None = None
    beam_width: int | None = None
    active: int | None = None
    allow_empty: bool = False
    grouped: bool = True
    effective_scores: bool = False
    all_candidates: bool = False
    allow_stale: bool = False

    def __post_init__(self) -> None:
        if not 0 < self.alpha < 1:
            raise BadInput(f"alpha={self.alpha:g}: it must lie strictly between 0 and 1")
        if self.risk not in RISKS:
            raise BadInput(f"risk {self.risk!r}: it must be one of {', '.join(RISKS)}")
        if self.delta is not None and not 0 <= self.delta < 1:
            raise BadInput(f"delta={self.delta:g}: it must lie in [0, 1) (0: marginal)")
        refuse_fnr_delta(self.risk, self.delta, "delta")
        if isinstance(self.entity, Sequence) and not isinstance(self.entity, str):
            object.__setattr__(self, "entity", tuple(self.entity) or None)  # hashable

    @property
    def pac(self) -> float | None:
        """The delta the guarantee is made at: None for the marginal guarantee (delta 0,
        and always under risk fnr)."""
        if self.risk != "coverage":
            return None
        return (DEFAULT_DELTA if self.delta is None else self.delta) or None

    @property
    def entities(self) -> str | list[str] | None:
        """The entity as the ask stage takes it: one name, a list, or None."""
        return list(self.entity) if isinstance(self.entity, tuple) else self.entity

    def session_args(self) -> dict[str, Any]:
        """The ask stage's `open_session` arguments for these options."""
        return {
            "alpha": self.alpha,
            "dataset": self.dataset,
            "model_id": self.model,
            "beam_width": self.beam_width,
            "active": self.active,
            "hops_filter": self.hops,
            "delta": self.pac,
            "all_candidates": self.all_candidates,
            "allow_stale": self.allow_stale,
            "risk": self.risk,
            "allow_empty": self.allow_empty,
            "grouped": self.grouped,
            "effective": self.effective_scores or None,
        }

    def open(
        self,
        store: GraphStore,
        hints: HintProvider | None = None,
        cal: Calibration | None = None,
        fields: dict | None = None,
    ) -> Session:
        """A session for these options (stages/session.py's checks all run); cal: the
        calibration already read, fields: how messages name options (CLI flags or HTTP)."""
        from cpr_neo4j.stages.session import open_session  # torch, scipy: only when asking

        return open_session(store, hints=hints, cal=cal, fields=fields, **self.session_args())
