"""Gold relation sequences for hop-level calibration (cypher/gold_sequences.cypher).

A gold sequence is the relation sequence of a simple path of EXACTLY `hops` steps from a
topic to a gold answer that meets no topic after its start: the paths open expansion
(search/open_expansion.py) walks, except that expansion also obeys the neighbour fan-out
cap and checks simple paths only along witness chains. A sequence found here can
therefore be unreachable in expansion (e.g. through a hub whose capped neighbour list
omits the next entity); that only lowers the baseline's coverage, never hides a miss.
"""

from __future__ import annotations

from collections.abc import Sequence

from cpr_neo4j.graph.store import GraphStore
from cpr_neo4j.search.base import RelPath, Step

MAX_HOPS = 4  # the statement has one fixed-length branch per hop count 1..4
DEFAULT_LIMIT = 1000  # sequences per question; MetaQA 3-hop questions have at most a few dozen


def gold_sequences(
    store: GraphStore,
    dataset: str,
    topics: Sequence[str],
    answers: Sequence[str],
    hops: int,
    limit: int = DEFAULT_LIMIT,
) -> list[tuple[RelPath, frozenset[str]]]:
    """(sequence, gold answers it reaches) by sequence; [] when no answer is `hops` away."""
    if not 1 <= hops <= MAX_HOPS:
        raise ValueError(f"gold sequences need 1 <= hops <= {MAX_HOPS}, got {hops}")
    if not topics or not answers:
        return []
    records = store.read(
        "gold_sequences",
        dataset=dataset,
        topics=list(dict.fromkeys(topics)),
        answers=list(dict.fromkeys(answers)),
        hops=hops,
        limit=limit,
    )
    return [(tuple(Step(t, f) for t, f in r["steps"]), frozenset(r["answers"])) for r in records]
