"""Whether a topic entity may be its own answer: a dataset convention, decided at ingest.

MetaQA's gold lists exclude the topic; other datasets answer "X's children's mother" with X.
With the setting on, search lets a path's last step land back on a topic (a cycle,
search/frontier.py); off, a topic is never an answer, and a dataset whose gold answers do
include topics loses those questions' recall for good (31% of one such test split).

`auto` (the default for loaders that do not know their convention: generic triples, RoG,
NSM) counts the questions whose gold answers include one of their topics and turns the
setting on when they are at least 1% of the questions. Not "any": where entity ids are
names, homonyms make a few such questions by accident (MetaQA: 4 of 78,231, the film
"Lemmy" and the actor Lemmy are one entity), and turning cycles on for them would add a
wrong candidate to every question to rescue a handful.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import polars as pl

from cpr_neo4j.errors import BadInput
from cpr_neo4j.loaders.base import Dataset

MODES = ("auto", "on", "off")
THRESHOLD = 0.01  # share of questions with a topic among their answers that turns it on


@dataclass(frozen=True)
class TopicAnswers:
    """The decision and what it rests on."""

    with_topic: int  # questions with one of their topics among their gold answers
    questions: int
    on: bool
    why: str  # "auto: ...", "--topic-answers on", "metaqa's convention"

    def message(self) -> str:
        state = "on" if self.on else "off"
        if not self.questions:  # a graph alone: "0 of 0 questions" decided nothing
            return f"no questions to decide from: topic answers {state} ({self.why})"
        return (
            f"{self.with_topic} of {self.questions} questions have a topic entity among their "
            f"gold answers: topic answers {state} ({self.why})"
        )


def count_with_topic(questions: pl.DataFrame) -> int:
    """Questions whose gold answers include one of their own topic entities."""
    if questions.is_empty():
        return 0
    shared = pl.col("answers").list.set_intersection(pl.col("topics")).list.len()
    return int(questions.select((shared > 0).sum()).item() or 0)


def decide(dataset: Dataset, mode: str = "auto") -> tuple[Dataset, TopicAnswers]:
    """The dataset with `topic_answers` set, and why. mode: auto | on | off; auto keeps a
    loader's own convention (MetaQA: off) and otherwise detects it from the questions."""
    if mode not in MODES:
        raise BadInput(f"--topic-answers takes {', '.join(MODES)}, got {mode!r}")
    n, total = count_with_topic(dataset.questions), dataset.questions.height
    if mode == "auto" and dataset.topic_answers is not None:
        on = dataset.topic_answers
        decision = TopicAnswers(with_topic=n, questions=total, on=on,
                                why=f"{dataset.name}'s convention")  # fmt: skip
    else:
        decision = decided(n, total, mode)
    return replace(dataset, topic_answers=decision.on), decision


def decided(n: int, total: int, mode: str) -> TopicAnswers:
    """The setting from `n` of `total` questions having a topic among their gold answers
    (auto), or as `mode` forces it."""
    if mode not in MODES:
        raise BadInput(f"--topic-answers takes {', '.join(MODES)}, got {mode!r}")
    if mode != "auto":
        on, why = mode == "on", f"--topic-answers {mode}"
    else:
        on = n > 0 and n >= THRESHOLD * total
        why = f"auto: {'at least' if on else 'under'} {THRESHOLD:.0%} of questions"
        if not total:
            why = "auto; --topic-answers on if a question's answer can be its own entity"
        elif not on and n:
            why += "; --topic-answers on forces it"
    return TopicAnswers(with_topic=n, questions=total, on=on, why=why)
