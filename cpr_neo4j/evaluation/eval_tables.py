"""The questions `cpr eval` answers and their candidate tables, one per method.

Question sets (never the test split for choosing anything):
- `inner-dev`: the training questions the model never saw, cut by a hash of the question
  id into a calibration half and a measurement half: defaults are compared there, and the
  model's calibration share is never looked at;
- `test`: the WORKING half of the test split (a hash of the id), answered with the model's
  calibration share as `cpr calibrate` uses it: the tables variants are compared on;
- `final`: the other half, reported once in the release table `make results` writes and
  never used to compare variants.

Linking (`text` or `gold`) is decided as `cpr calibrate` decides it, so evaluation counts
linking misses exactly as `cpr ask` meets them.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from cpr_neo4j.errors import CprError
from cpr_neo4j.evaluation.table import CandidateTable, TableBuilder
from cpr_neo4j.graph.neighbours import Neo4jNeighbours
from cpr_neo4j.graph.store import GraphStore
from cpr_neo4j.search.adjacency_cache import CachedAdjacency
from cpr_neo4j.stages.calibrate import AUTO, TEXT, choose_linking, link_text, search_readings
from cpr_neo4j.stages.retrieval import RetrievalSettings, Retriever
from cpr_neo4j.stages.scoring import columns
from cpr_neo4j.stages.workers import interleave, run_shares, share_store
from cpr_neo4j.training import questions as qsel

INNER_DEV, TEST, FINAL = "inner-dev", "test", "final"
SPLITS = (INNER_DEV, TEST, FINAL)


def half(qid: str) -> int:
    """0 or 1 from a hash of the question id: stable across runs, machines and ingests."""
    return hashlib.sha1(qid.encode()).digest()[0] & 1


def question_sets(
    store: GraphStore, dataset: str, split: str, meta: dict, max_questions: int | None, seed: int
) -> tuple[list[qsel.Question], list[qsel.Question], list[str]]:
    """(calibration questions, evaluation questions, notes) for `split`."""
    if split not in SPLITS:
        raise CprError(f"--split must be one of {', '.join(SPLITS)}, got {split!r}")
    hops, notes = meta.get("hops_filter"), []
    if split == INNER_DEV:
        ids = set(meta.get("inner_dev_ids") or [])
        if not ids:
            raise CprError(f"model {meta['model_id']} records no inner dev split: retrain it")
        inner = qsel.load(store, dataset, meta["split"], hops, ids)
        cal = [q for q in inner if half(q.id) == 0]
        target = [q for q in inner if half(q.id) == 1]
        notes.append(
            f"inner dev split ({len(inner)} training questions never trained on): "
            f"{len(cal)} calibrate, {len(target)} are measured (halves by question-id hash); "
            "the model's calibration share is not used"
        )
    else:
        cal = qsel.load(store, dataset, meta["split"], hops, set(meta["calibration_ids"]))
        target = [
            q for q in qsel.load(store, dataset, "test", hops) if half(q.id) == (split == FINAL)
        ]
        which = "final (release table only)" if split == FINAL else "working"
        notes.append(f"the {which} half of the test split (question-id hash): {len(target)}")
    if not cal:
        raise CprError(f"model {meta['model_id']} lists no calibration questions in {dataset!r}")
    if not target:
        raise CprError(f"dataset {dataset!r} has no {split} questions to evaluate on")
    if max_questions and len(target) > max_questions:
        target = random.Random(seed).sample(target, max_questions)
        notes.append(f"{split} questions subsampled to {max_questions} (seed {seed})")
    return cal, target, notes


@dataclass
class Inputs:
    """Per question what search starts from: topic ids and the masked text."""

    choices: dict[str, list[tuple[list[str], str]]]  # question id -> readings searched
    mode: str  # TEXT or GOLD
    accuracy: float  # share of calibration questions whose text links to the gold topics


def search_inputs(
    store: GraphStore, dataset: str, cal: list, target: list, linking: str, graph: str
) -> Inputs:
    """Link the way `cpr calibrate` would: AUTO picks text when the calibration questions'
    text finds their gold topics for at least half of them."""
    everyone = cal + target
    text = {q.id: link_text(store, dataset, q.text, graph) for q in everyone}
    hit = [any(set(t) == set(q.topics) for t, _ in text[q.id]) for q in cal]
    accuracy = sum(hit) / max(len(cal), 1)
    mode = choose_linking(linking or AUTO, accuracy)
    if mode == TEXT:
        return Inputs(text, mode, accuracy)
    return Inputs({q.id: [(q.topics, q.masked)] for q in everyone}, mode, accuracy)


def tables(
    store: GraphStore,
    dataset: str,
    scorer,
    settings: RetrievalSettings,
    spec: dict,
    qs: list,
    inputs: Inputs,
    hints,
    workers: int,
    tick: Callable[[], None],
) -> CandidateTable:
    """Every question's candidates under one scorer, searched by `workers` processes (each
    its own driver and neighbour cache), back in question order."""
    T = float(spec.get("T", 0.0))

    def share(k: int, n: int, done) -> CandidateTable:
        with share_store(store, k) as mine:
            source = CachedAdjacency(Neo4jNeighbours(mine, dataset, settings.fanout_cap))
            r = Retriever(mine, dataset, scorer, settings, hints, source)
            b = TableBuilder(T)
            for q in qs[k::n]:
                found, _ = search_readings(r, inputs.choices[q.id], q)
                if found is not None:
                    cols = columns(found, spec, settings.topic_answers)
                    ids, cost, sur, group = cols.ids, cols.cost, cols.surprisal, cols.group
                else:  # linking failed: no candidates, a miss
                    ids, cost, sur, group = [], np.zeros(0), np.zeros(0), 0
                b.add(q.id, q.hops, q.masked, frozenset(q.answers), ids, cost, sur, group)
                done("")
            return b.build()

    parts = run_shares(share, workers, lambda _: tick())
    pos = interleave([list(range(p.n)) for p in parts])
    owner = interleave([[k] * p.n for k, p in enumerate(parts)])
    offset = np.cumsum([0] + [p.n for p in parts])
    merged = CandidateTable.concat(parts).subset(
        [offset[o] + i for o, i in zip(owner, pos, strict=True)]
    )
    return _first_seen_templates(merged)


def _first_seen_templates(t: CandidateTable) -> CandidateTable:
    """Template codes numbered by first appearance in question order, as one process
    numbers them: the merged shares' numbering depends on the worker count, and the
    template-cluster bootstraps draw clusters by code."""
    seen = list(dict.fromkeys(t.template.tolist()))
    used = set(seen)
    seen += [k for k in range(len(t.templates)) if k not in used]
    code = np.empty(len(t.templates), dtype=np.int32)
    code[seen] = np.arange(len(seen), dtype=np.int32)
    return replace(t, template=code[t.template], templates=[t.templates[k] for k in seen])
