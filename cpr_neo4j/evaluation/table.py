"""Every candidate answer of many questions as flat columns: what evaluation reads.

One row per (question, candidate answer), questions contiguous and each question's
candidates in rank order (cost, then entity id), so "the answer at rank r" and "the top
answer" need no sort. Per question: its id, hop count (-1 when the dataset has none),
template (the question text with its topic masked: outcomes cluster by it), group (the
length of its best answer's best sequence), the number of gold answers |Y| (those the
candidates miss included) and whether the question could be searched at all.

Columns only, so a 3-hop split (~70M candidates) fits in memory and every score family,
threshold and metric is a few vectorised passes. Saved as one .npz.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np


@dataclass
class CandidateTable:
    qids: list[str]
    hops: np.ndarray  # int8 per question
    template: np.ndarray  # int32 per question, index into `templates`
    templates: list[str]
    group: np.ndarray  # int8 per question (0: no candidates)
    n_gold: np.ndarray  # int32 per question
    start: np.ndarray  # int64 per question + 1: candidates of q are rows start[q]:start[q+1]
    cost: np.ndarray  # float64 per candidate (raw V', lower = better)
    gold: np.ndarray  # bool per candidate
    surprisal: np.ndarray  # float32 per candidate: -log sequence-softmax mass (0: not computed)
    temperature: float = 0.0  # the T the surprisal was computed with
    meta: dict = field(default_factory=dict)

    @property
    def n(self) -> int:
        return len(self.qids)

    @property
    def qidx(self) -> np.ndarray:
        """Question index of every candidate row."""
        return np.repeat(np.arange(self.n, dtype=np.int32), np.diff(self.start))

    @property
    def sizes(self) -> np.ndarray:
        return np.diff(self.start)

    def subset(self, rows: Sequence[int] | np.ndarray) -> CandidateTable:
        """The questions at `rows` (in that order), with their candidates."""
        rows = np.asarray(rows, dtype=np.int64)
        lo, hi = self.start[rows], self.start[rows + 1]
        take = (
            np.concatenate([np.arange(a, b) for a, b in zip(lo, hi, strict=True)])
            if len(rows)
            else np.zeros(0, dtype=np.int64)
        )
        start = np.concatenate([[0], np.cumsum(hi - lo)])
        return CandidateTable(
            qids=[self.qids[i] for i in rows.tolist()],
            hops=self.hops[rows],
            template=self.template[rows],
            templates=self.templates,
            group=self.group[rows],
            n_gold=self.n_gold[rows],
            start=start.astype(np.int64),
            cost=self.cost[take],
            gold=self.gold[take],
            surprisal=self.surprisal[take],
            temperature=self.temperature,
            meta=dict(self.meta),
        )

    def save(self, path: str | Path) -> None:
        np.savez_compressed(
            path,
            qids=np.array(self.qids),
            hops=self.hops,
            template=self.template,
            templates=np.array(self.templates),
            group=self.group,
            n_gold=self.n_gold,
            start=self.start,
            cost=self.cost,
            gold=self.gold,
            surprisal=self.surprisal,
            temperature=np.array(self.temperature),
        )

    @classmethod
    def load(cls, path: str | Path) -> CandidateTable:
        z = np.load(path, allow_pickle=False)
        return cls(
            z["qids"].tolist(),
            z["hops"],
            z["template"],
            z["templates"].tolist(),
            z["group"],
            z["n_gold"],
            z["start"],
            z["cost"].astype(float),
            z["gold"],
            z["surprisal"],
            float(z["temperature"]),
        )

    @classmethod
    def concat(cls, tables: Sequence[CandidateTable]) -> CandidateTable:
        """Tables in order; templates are merged by text."""
        texts: dict[str, int] = {}
        codes = []
        for t in tables:
            remap = np.array([texts.setdefault(s, len(texts)) for s in t.templates], np.int32)
            codes.append(remap[t.template] if len(t.template) else t.template)
        offsets = np.cumsum([0] + [len(t.cost) for t in tables])
        start = np.concatenate(
            [[0]] + [t.start[1:] + off for t, off in zip(tables, offsets, strict=False)]
        )
        return cls(
            [q for t in tables for q in t.qids],
            np.concatenate([t.hops for t in tables]),
            np.concatenate(codes).astype(np.int32),
            list(texts),
            np.concatenate([t.group for t in tables]),
            np.concatenate([t.n_gold for t in tables]),
            start.astype(np.int64),
            np.concatenate([t.cost for t in tables]),
            np.concatenate([t.gold for t in tables]),
            np.concatenate([t.surprisal for t in tables]),
            tables[0].temperature if tables else 0.0,
        )


class TableBuilder:
    """Collects one question at a time (answer columns in rank order) into a table."""

    def __init__(self, temperature: float = 0.0):
        self.temperature = temperature
        self.qids: list[str] = []
        self.hops: list[int] = []
        self.templates: dict[str, int] = {}
        self.template: list[int] = []
        self.group: list[int] = []
        self.n_gold: list[int] = []
        self.sizes: list[int] = []
        self.cost: list[np.ndarray] = []
        self.gold: list[np.ndarray] = []
        self.surprisal: list[np.ndarray] = []

    def add(
        self,
        qid: str,
        hops: int | None,
        template: str,
        gold: frozenset[str] | set[str],
        ids: Sequence[str],
        cost: np.ndarray,
        surprisal: np.ndarray,
        group: int,
    ) -> None:
        self.qids.append(qid)
        self.hops.append(-1 if hops is None else int(hops))
        self.template.append(self.templates.setdefault(template, len(self.templates)))
        self.group.append(group)
        self.n_gold.append(len(gold))
        self.sizes.append(len(ids))
        self.cost.append(np.asarray(cost, dtype=float))
        self.gold.append(np.fromiter(map(gold.__contains__, ids), bool, len(ids)))
        self.surprisal.append(np.asarray(surprisal, dtype=np.float32))

    def build(self) -> CandidateTable:
        def cat(parts: list[np.ndarray], dtype) -> np.ndarray:
            return np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype=dtype)

        return CandidateTable(
            qids=self.qids,
            hops=np.array(self.hops, dtype=np.int8),
            template=np.array(self.template, dtype=np.int32),
            templates=list(self.templates),
            group=np.array(self.group, dtype=np.int8),
            n_gold=np.array(self.n_gold, dtype=np.int32),
            start=np.concatenate([[0], np.cumsum(self.sizes, dtype=np.int64)]).astype(np.int64),
            cost=cat(self.cost, float),
            gold=cat(self.gold, bool),
            surprisal=cat(self.surprisal, np.float32),
            temperature=self.temperature,
        )
