"""Question selection shared by the stages: training split, calibration share, masking."""

from __future__ import annotations

import random
from dataclasses import dataclass

from cpr_neo4j.graph import records
from cpr_neo4j.graph.records import QuestionRow
from cpr_neo4j.graph.store import GraphStore
from cpr_neo4j.linking.named import mask_named


@dataclass(frozen=True)
class Question:
    id: str
    text: str
    masked: str
    hops: int | None
    topics: list[str]
    answers: list[str]


def training_split(store: GraphStore, dataset: str) -> str:
    """'train' when the dataset has it, else 'dev' (MetaQA here ships dev + test only)."""
    have = records.splits(store, dataset)
    for split in ("train", "dev"):
        if split in have:
            return split
    return next(iter(have))


def default_hops(store: GraphStore, dataset: str, split: str) -> int:
    max_hops = records.splits(store, dataset)[split]["max_hops"]
    return int(max_hops) if max_hops else 2


def load(
    store: GraphStore, dataset: str, split: str, hops: int | None, ids: set[str] | None = None
) -> list[Question]:
    """Questions with a topic and an answer, topic mentions masked (names looked up)."""
    rows: list[QuestionRow] = records.questions(store, dataset, split=split, hops=hops)
    rows = [r for r in rows if r.topics and r.answers and (ids is None or r.id in ids)]
    topic_ids = sorted({t for r in rows for t in r.topics})
    names = records.entity_names(store, dataset, topic_ids) if topic_ids else {}
    return [
        Question(
            id=r.id,
            text=r.text,
            masked=mask_named(r.text, [names.get(t, t) for t in r.topics]),
            hops=r.hops,
            topics=r.topics,
            answers=r.answers,
        )
        for r in rows
    ]


def split_off(
    questions: list[Question], share: float, seed: int
) -> tuple[list[Question], list[Question]]:
    """(rest, held out): a seeded random `share` of the questions held out."""
    order = sorted(questions, key=lambda q: q.id)
    random.Random(seed).shuffle(order)
    k = round(len(order) * share)
    return order[k:], order[:k]
