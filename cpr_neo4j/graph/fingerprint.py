"""Graph fingerprints: which version of a dataset's graph a model or calibration was made on.

A calibration's guarantee holds for the graph it was computed on. The digest of entity and
triple counts plus the relation types, with a generation number bumped whenever the digest
changes or a re-ingest replaced anything (graph/changes.py: a rename or a swapped triple
leaves the counts alone), is the fingerprint stored on the :Dataset node and copied onto
:ScoringModel and :Calibration.

The digest also covers the dataset's topic-answer setting (whether a path may end back on
its topic): it changes which candidates search returns, so a model or calibration made
under the other setting no longer describes retrieval. It enters the digest only when on,
so datasets ingested before the setting existed (all off) keep their fingerprints."""

from __future__ import annotations

import hashlib
import json

from cpr_neo4j.graph.cypher import statement
from cpr_neo4j.graph.store import GraphStore


def refresh(store: GraphStore, dataset: str, bump: bool = False) -> str:
    """Recompute the digest (a scan of the dataset: call after ingest) and store it; bump:
    a new generation even if the digest is the same (a re-ingest replaced a name, a triple
    or a question without moving the counts)."""
    counts = store.read("dataset_counts", dataset=dataset)[0]
    relations = sorted(
        r["name"] for r in store.read("relations", dataset=dataset) if r["direction"] == "forward"
    )
    shape: list = [counts["entities"], counts["triples"], relations]
    info = store.read("dataset_info", dataset=dataset)
    if info and info[0]["d"].get("topic_answers"):
        shape.append({"topic_answers": True})
    digest = hashlib.sha256(json.dumps(shape).encode()).hexdigest()[:12]
    rows, _ = store.query(
        statement("dataset_fingerprint"),
        {"dataset": dataset, "digest": digest, "bump": bump},
        write=True,
    )
    if not rows:
        from cpr_neo4j.graph.records import unknown_dataset  # records imports the driver

        raise unknown_dataset(store, dataset)
    return rows[0]["fingerprint"]


def current(store: GraphStore, dataset: str, stored: str | None = None) -> str:
    """The dataset's fingerprint (`stored`: as already read with another query); computed
    once for a dataset ingested before fingerprints existed."""
    if stored is None:
        rows = store.read("dataset_info", dataset=dataset)
        stored = rows[0]["d"].get("fingerprint") if rows else None
    return stored or refresh(store, dataset)


def stale_reason(made_on: str | None, now: str, what: str = "calibration") -> str | None:
    """Why a record made on graph `made_on` no longer describes graph `now`, or None."""
    if made_on == now:
        return None
    if made_on is None:
        return f"the {what} predates graph fingerprints, so nothing shows it matches the graph"
    return f"the graph changed since the {what} was made (graph {made_on}, now {now})"
