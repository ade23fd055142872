"""Request and response bodies of `cpr serve` (they make the OpenAPI schema at /docs), and
the one schema of an answer: `cpr ask --json` and `--file` print the same AskResponse."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from cpr_neo4j.conformal import DEFAULT_DELTA, refuse_fnr_delta
from cpr_neo4j.errors import BadInput

MAX_QUESTION_CHARS = 1000
MAX_BATCH = 100
# Request bodies past this are refused unread (413): a full batch of the longest questions
# with every option is ~0.15 MB, so 1 MiB refuses only what no valid request needs.
MAX_BODY_BYTES = 1 << 20

if TYPE_CHECKING:
    from cpr_neo4j.stages.ask import Answer, AskResult


class AskRequest(BaseModel):
    # a misspelt field ("alpah") is refused (422 naming it), never answered at the default
    model_config = ConfigDict(extra="forbid")

    question: str = Field(
        min_length=1,
        max_length=MAX_QUESTION_CHARS,
        examples=["which person directed the movies starred by [John Krasinski]"],
    )
    alpha: float = Field(0.1, gt=0, lt=1, description="Risk level: coverage >= 1 - alpha.")
    entity: str | list[str] | None = Field(
        None, description="Topic entity id or name (skips linking); a list for several topics."
    )
    dataset: str | None = Field(None, description="Default: the most recently calibrated.")
    model: str | None = Field(None, description="Scoring model id (default: newest CPR).")
    hops: int | None = Field(
        None,
        ge=1,
        le=10,
        description="Answer as an N-hop question (a calibration for N-hop questions); default: "
        "the calibration for every hop count.",
    )
    beam_width: int | None = Field(None, ge=1, description="Must equal the calibrated B.")
    active: int | None = Field(None, ge=1, description="Must equal the calibrated A.")
    delta: float = Field(
        DEFAULT_DELTA,
        ge=0,
        lt=1,
        description="Guarantee for this calibration: with probability >= 1 - delta over the "
        "calibration draw (PAC), for the question's group and this alpha; 0: the marginal "
        "guarantee. Risk coverage only: a delta above 0 sent with risk fnr is refused.",
    )
    risk: Literal["coverage", "fnr"] = Field(
        "coverage",
        description="coverage: a correct answer with prob. >= 1 - alpha; fnr: averaged over "
        "questions with a correct answer and over calibration draws, at least 1 - alpha of "
        "the correct answers (send no delta).",
    )
    allow_empty: bool = Field(False, description="The paper's sets, which may be empty.")
    ungrouped: bool = Field(False, description="One threshold for every kind of question.")
    effective_scores: bool = Field(
        False,
        description="Calibrate never-empty sets on effective scores: the same guarantee with "
        "smaller sets (fewer of a question's correct answers).",
    )
    all_candidates: bool = Field(False, description="At an alpha the calibration cannot honour.")
    allow_stale: bool = Field(
        False, description="Answer with a calibration older than the graph (no guarantee)."
    )

    @field_validator("question")
    @classmethod
    def not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the question is blank")
        return value

    @model_validator(mode="after")
    def no_delta_with_fnr(self) -> AskRequest:
        """A delta sent with risk fnr is refused, not dropped (the default one is unused)."""
        if "delta" in self.model_fields_set:
            try:
                refuse_fnr_delta(self.risk, self.delta, "delta")
            except BadInput as exc:
                raise ValueError(str(exc)) from None
        return self


class BatchRequest(BaseModel):
    """Items are checked one by one when answered (an item that is not a valid AskRequest
    gets its own 422 in `results`); the list itself must hold 1 to MAX_BATCH of them."""

    model_config = ConfigDict(extra="forbid")
    requests: list[dict[str, Any]] = Field(
        min_length=1,
        max_length=MAX_BATCH,
        description=f"1 to {MAX_BATCH} AskRequest bodies, answered in order; one that is not "
        "valid gets its own error (status 422) and the others are answered.",
        json_schema_extra={"items": {"$ref": "#/components/schemas/AskRequest"}},
    )


class PathEntity(BaseModel):
    id: str
    name: str


class AnswerOut(BaseModel):
    rank: int
    id: str
    name: str
    score: float = Field(
        description="The answer's score (lower is more plausible): in the set when within tau, "
        "or when it is among the top-ranked answers."
    )
    path: str = Field(description="The best path, entity names and relation arrows.")
    path_entities: list[PathEntity]


class AskResponse(BaseModel):
    """One answer, as `cpr serve` returns it and `cpr ask --json` prints it."""

    question: str
    dataset: str
    topics: list[PathEntity]
    alpha: float
    delta: float | None
    risk: str
    tau: float | None = Field(
        description="This question's threshold (its group's; lambda-hat with risk fnr); null "
        "when +inf (every candidate is in the set, tau_infinite true) or -inf (effective "
        "scores: only the top-ranked answers, tau_infinite false)."
    )
    tau_infinite: bool
    group: int = Field(description="The question's group: the hop count of its best path.")
    allow_empty: bool = Field(False, description="The paper's sets, which may be empty.")
    n: int = Field(description="Calibration questions behind tau.")
    model_id: str
    calibration_id: str
    answers: list[AnswerOut]
    best_outside: AnswerOut | None = Field(
        description="Top candidate when the set is empty (only with allow_empty)."
    )
    guarantee: str | None = Field(description="What the set promises; null: no guarantee.")
    notes: list[str]
    linking: dict = Field(
        default_factory=dict,
        description="How the topics were found: rule, candidates searched, the one taken.",
    )
    ask_id: str = Field(description="Id of the (:Ask) node recorded in Neo4j.")
    browser_url: str | None
    cypher: str


def answer_out(a: Answer) -> AnswerOut:
    steps = [PathEntity(id=e, name=n) for e, n in zip(a.entities, a.entity_names, strict=True)]
    return AnswerOut(
        rank=a.rank, id=a.id, name=a.name, score=a.cost, path=a.path, path_entities=steps
    )


def response(r: AskResult) -> AskResponse:
    """The schema of one answer: JSON has no infinity, so tau is null with tau_infinite."""
    finite = not math.isinf(r.tau)
    return AskResponse(
        question=r.question,
        dataset=r.dataset,
        topics=[PathEntity(id=t["id"], name=t["name"]) for t in r.topics],
        alpha=r.alpha,
        delta=r.delta,
        risk=r.risk,
        tau=r.tau if finite else None,
        tau_infinite=r.tau == math.inf,  # -inf (effective scores): the top level only
        group=r.group,
        allow_empty=r.allow_empty,
        n=r.n,
        model_id=r.model_id,
        calibration_id=r.calibration_id,
        answers=[answer_out(a) for a in r.answers],
        best_outside=answer_out(r.best_outside) if r.best_outside else None,
        guarantee=r.guarantee,
        notes=list(r.notes),
        linking=r.linking,
        ask_id=r.ask_id,
        browser_url=r.browser_url,
        cypher=r.cypher,
    )


class TauOut(BaseModel):
    alpha: float
    risk: Literal["coverage", "fnr"]
    group: int = Field(description="Questions whose best path has this many hops.")
    tau: float | None = Field(
        description="The threshold (lambda-hat with risk fnr; coverage with the calibration's "
        "delta); null when infinite (tau_infinite true: +inf, the alpha is unattainable)."
    )
    tau_infinite: bool


class CalibrationOut(BaseModel):
    """A stored calibration (its per-question scores left out) with its thresholds."""

    id: str
    dataset: str
    model: str
    negatives: str
    hops_filter: int | None = None
    created: str | None = None
    split: str | None = None
    n: int
    delta: float | None = Field(None, description="PAC delta of the coverage taus; null: marginal.")
    alphas: list[float] = Field(description="The alphas `cpr calibrate` computed taus for.")
    alphas_default: bool = Field(
        False,
        description="true for a calibration made before alphas were stored: its taus are "
        "recomputed at the default alphas.",
    )
    taus: list[TauOut]
    recall: float | None = None
    hops: int | None = None
    beam_width: int | None = None
    active: int | None = None
    fanout_cap: int | None = None
    hint_mode: str | None = None
    hint_beta: float | None = None


class ErrorBody(BaseModel):
    status: int
    type: str
    detail: str


class BatchItem(BaseModel):
    result: AskResponse | None = None
    error: ErrorBody | None = None


class BatchResponse(BaseModel):
    results: list[BatchItem]
