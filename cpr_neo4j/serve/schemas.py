"""Request and response bodies of `cpr serve` (they make the OpenAPI schema at /docs)."""

from __future__ import annotations

from pydantic import BaseModel, Field, field_validator

MAX_QUESTION_CHARS = 1000
MAX_BATCH = 100


class AskRequest(BaseModel):
    question: str = Field(
        min_length=1,
        max_length=MAX_QUESTION_CHARS,
        examples=["which person directed the movies starred by [John Krasinski]"],
    )
    alpha: float = Field(0.1, gt=0, lt=1, description="Risk level: coverage >= 1 - alpha.")
    entity: str | None = Field(None, description="Topic entity id or name (skips linking).")
    dataset: str | None = Field(None, description="Default: the most recently calibrated.")
    model: str | None = Field(None, description="Scoring model id (default: newest CPR).")
    hops: int | None = Field(None, ge=1, le=10, description="Newest CPR model for N-hop.")
    beam_width: int | None = Field(None, ge=1, description="Must equal the calibrated B.")
    active: int | None = Field(None, ge=1, description="Must equal the calibrated A.")
    delta: float | None = Field(None, gt=0, lt=1, description="PAC guarantee level.")
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


class BatchRequest(BaseModel):
    requests: list[AskRequest] = Field(min_length=1, max_length=MAX_BATCH)


class PathEntity(BaseModel):
    id: str
    name: str


class AnswerOut(BaseModel):
    rank: int
    id: str
    name: str
    score: float = Field(
        description="Path cost V(p): lower is more plausible; in the set iff <= tau."
    )
    path: str = Field(description="The best path, entity names and relation arrows.")
    path_entities: list[PathEntity]


class AskResponse(BaseModel):
    question: str
    dataset: str
    topics: list[PathEntity]
    alpha: float
    delta: float | None
    tau: float | None = Field(description="Null when tau is +inf (every candidate is in the set).")
    tau_infinite: bool
    n: int = Field(description="Calibration questions behind tau.")
    model_id: str
    calibration_id: str
    answers: list[AnswerOut]
    best_outside: AnswerOut | None = Field(description="Top candidate when the set is empty.")
    guarantee: str | None = Field(description="What the set promises; null: no guarantee.")
    notes: list[str]
    ask_id: str = Field(description="Id of the (:Ask) node recorded in Neo4j.")
    browser_url: str | None
    cypher: str


class ErrorBody(BaseModel):
    status: int
    type: str
    detail: str


class BatchItem(BaseModel):
    result: AskResponse | None = None
    error: ErrorBody | None = None


class BatchResponse(BaseModel):
    results: list[BatchItem]
