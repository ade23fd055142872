"""`cpr label`: what a person labelling a plain question sees, and the labels file.

For each question, every candidate answer of the search `cpr calibrate` runs (TreeG's
candidate paths at every hop, linked from the text as `cpr ask` links it), each with its
best path, best-ranked first. Nothing is pre-selected and no threshold is applied: a label
never depends on tau, so a calibration on these labels stays valid (DESIGN.md section 6).

Saved: one line per labelled question in the questions.jsonl shape the loaders read
(`cpr ingest NAME --questions FILE` adds them); a typed answer the graph lacks is kept as
given (no entity has it as id, so calibration counts the question as a miss); a question
the linker finds no entity in keeps topic `UNLINKED` for the same reason. Skipped questions
go to FILE.skipped. Both files are appended to as the person goes, so a quit or a crash
loses nothing and a rerun resumes after the last question saved.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from cpr_neo4j.errors import BadInput
from cpr_neo4j.graph import fingerprint, records
from cpr_neo4j.graph.entity_index import tokens
from cpr_neo4j.graph.neighbours import Neo4jNeighbours
from cpr_neo4j.graph.store import GraphStore
from cpr_neo4j.linking.readings import link_readings, taken_index
from cpr_neo4j.model.encoder import relation_words
from cpr_neo4j.search.adjacency_cache import CachedAdjacency
from cpr_neo4j.search.treeg import retrieve
from cpr_neo4j.training.generate import labelled_splits

UNLINKED = "cpr:unlinked"  # topic of a question with no entity found (a miss, never a node)
DEFAULT_HOPS = 2


@dataclass(frozen=True)
class Choice:
    """One candidate answer as shown: its entity, name and best path."""

    entity: str
    name: str
    path: str
    hops: int
    cost: float


@dataclass(frozen=True)
class Shown:
    """A question as the person sees it."""

    id: str
    text: str
    topics: list[str]
    topic_names: list[str]
    choices: list[Choice]


@dataclass(frozen=True)
class Label:
    """A person's decision on one question."""

    kind: str  # "marked" | "typed" | "skipped"
    numbers: tuple[int, ...] = ()  # 1-based, into Shown.choices
    typed: str = ""


def question_id(text: str) -> str:
    """Stable id from the text, so a rerun recognises what is already labelled."""
    return "label-" + hashlib.sha1(" ".join(text.split()).encode()).hexdigest()[:12]


def read_questions(path: Path) -> list[str]:
    """Plain questions, one a line; blank lines and lines starting with # are ignored."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"cannot read questions from {path}: {exc}") from None
    texts = [" ".join(x.split()) for x in lines if x.strip() and not x.lstrip().startswith("#")]
    if not texts:
        raise BadInput(f"{path} holds no question (one plain question a line)")
    return list(dict.fromkeys(texts))


def labelling_order(texts: list[str]) -> list[str]:
    """The order questions are shown in: by a hash of their text (question_id), not the
    file's. Wherever the person stops, what is labelled is then a uniformly random sample of
    the file, as calibration needs (a file sorted by date or topic would otherwise calibrate
    on its first part alone), and a rerun resumes in the same order."""
    return sorted(texts, key=question_id)


def done_ids(out: Path) -> set[str]:
    """Question ids already saved in `out` or its .skipped file (what a rerun skips)."""
    seen: set[str] = set()
    for p in (out, skipped_path(out)):
        if p.exists():
            for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    seen.add(json.loads(line)["id"])
                except (ValueError, KeyError, TypeError):
                    raise BadInput(
                        f"{p}:{n} is not a label line: fix or remove it, then rerun"
                    ) from None
    return seen


def skipped_path(out: Path) -> Path:
    return out.with_name(out.name + ".skipped")


def parse(answer: str, n_choices: int) -> Label | str:
    """A Label, or a message saying what was wrong. Numbers: `1 3 5-7` (commas too)."""
    text = answer.strip()
    if text.lower() in ("s", "skip"):
        return Label("skipped")
    if text[:2].lower() == "a ":
        typed = " ".join(text[2:].split())
        return Label("typed", typed=typed) if typed else "type the answer after 'a '"
    numbers: set[int] = set()
    for token in text.replace(",", " ").split():
        lo, _, hi = token.partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            return f"not a number or range: {token!r}"
        a, b = int(lo), int(hi or lo)
        if a > b or a < 1 or b > n_choices:
            return f"{token} is outside 1-{n_choices}"
        numbers.update(range(a, b + 1))
    if not numbers:
        return "mark answers by number, or a TEXT, s or q"
    return Label("marked", numbers=tuple(sorted(numbers)))


def find(choices: list[Choice], text: str) -> list[int]:
    """Positions of the candidates whose name holds the words of `text` in a row (folded as
    the linker folds them: "almodovar" finds "Pedro Almodóvar"). A person who knows the
    answer finds it without paging: the candidates' order decides nothing."""
    want = " ".join(w for w, _, _ in tokens(text))
    if not want:
        return []
    return [
        i
        for i, c in enumerate(choices)
        if f" {want} " in f" {' '.join(w for w, _, _ in tokens(c.name))} "
    ]


def record(shown: Shown, label: Label) -> dict:
    """The questions.jsonl line for a label (not for a skip)."""
    topics = shown.topics or [UNLINKED]
    if label.kind == "marked":
        picked = [shown.choices[i - 1] for i in label.numbers]
        answers = [c.entity for c in picked]
        hops: int | None = min(c.hops for c in picked)
    else:
        answers, hops = [label.typed], None
    return {
        "id": shown.id,
        "question": shown.text,
        "topics": topics,
        "answers": answers,
        "split": "train",
        "hops": hops,
        "label": label.kind,
    }


def save(out: Path, shown: Shown, label: Label) -> None:
    """Append one decision (labels file, or the .skipped file for a skip)."""
    if label.kind == "skipped":
        path, row = skipped_path(out), {"id": shown.id, "question": shown.text}
    else:
        path, row = out, record(shown, label)
    with path.open("a", encoding="utf-8") as f:
        f.write(json.dumps(row, ensure_ascii=False) + "\n")


class Candidates:
    """Every candidate answer of a question, with paths, from the newest model of the
    dataset (else the semantic scorer V_sem: the order only helps the person; the labels
    do not depend on it)."""

    def __init__(self, store: GraphStore, dataset: str):
        from cpr_neo4j.model.encoder import TextEncoder
        from cpr_neo4j.model.scorer import PathScorer
        from cpr_neo4j.model.store import load_scorer, read_config

        records.require_dataset(store, dataset)
        self.store, self.dataset = store, dataset
        self.relation_text = records.relation_text(store, dataset)
        self.topic_answers = records.topic_answers(store, dataset)
        self.graph = fingerprint.current(store, dataset)
        model = records.latest_model(store, dataset, negatives="puct")
        if model:
            self.scorer = load_scorer(model["id"])
            self.hops = int(read_config(model["id"])["meta"]["hops"])
            self.scorer_name = f"model {model['id']}"
        else:
            self.scorer = PathScorer(TextEncoder(), self.relation_text)
            have = labelled_splits(store, dataset)
            depth = max((int(v["max_hops"] or 0) for v in have.values()), default=0)
            self.hops = depth or DEFAULT_HOPS
            self.scorer_name = "the semantic scorer (no model trained yet)"
        self.source = CachedAdjacency(Neo4jNeighbours(store, dataset))

    def __call__(self, text: str) -> Shown:
        readings = link_readings(self.store, self.dataset, text, self.graph)
        if not readings:
            return Shown(id=question_id(text), text=text, topics=[], topic_names=[], choices=[])
        found = [
            retrieve(
                self.source,
                self.scorer,
                self.scorer.question(masked),
                topics,
                self.hops,
                topic_answers=self.topic_answers,
            )
            for topics, masked in readings
        ]
        i = taken_index(found)
        r, topics = found[i], list(readings[i][0])
        banned = set() if self.topic_answers else set(topics)
        best: dict[str, tuple[float, object]] = {}
        for c in sorted(r.candidates(), key=lambda c: (c.cost, c.path)):
            for e in c.ends:
                if e not in banned and e not in best:
                    best[e] = (c.cost, c)
        order = sorted(best, key=lambda e: (best[e][0], e))
        chains = {e: r.chain(best[e][1], e) for e in order}
        ids = sorted({x for ch in chains.values() for x in ch} | set(topics))
        names = records.entity_names(self.store, self.dataset, ids) if ids else {}
        choices = []
        for e in order:
            cost, c = best[e]
            choices.append(
                Choice(
                    entity=e,
                    name=names.get(e, e),
                    path=self.path_text(chains[e], c.path, names),
                    hops=len(c.path),
                    cost=float(cost),
                )
            )
        return Shown(
            id=question_id(text),
            text=text,
            topics=topics,
            topic_names=[names.get(t, t) for t in topics],
            choices=choices,
        )

    def path_text(self, chain: list[str], steps, names: dict[str, str]) -> str:
        parts = [names.get(chain[0], chain[0])]
        for step, e in zip(steps, chain[1:], strict=True):
            t = relation_words(step.relation, self.relation_text)
            parts.append(f"-[{t}]->" if step.forward else f"<-[{t}]-")
            parts.append(names.get(e, e))
        return " ".join(parts)
