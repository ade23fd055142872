"""The conformal layer: thresholds, answer sets and coverage evaluation (numbers only)."""

from cpr_neo4j.conformal.evaluate import (
    EvalResults,
    QuestionRecord,
    ScoredQuestion,
    evaluate,
    record_from_retrieval,
)
from cpr_neo4j.conformal.threshold import (
    answer_set,
    conformal_rank,
    conformal_threshold,
    nonconformity,
)

__all__ = [
    "EvalResults",
    "QuestionRecord",
    "ScoredQuestion",
    "answer_set",
    "conformal_rank",
    "conformal_threshold",
    "evaluate",
    "nonconformity",
    "record_from_retrieval",
]
