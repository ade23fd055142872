"""A property graph already in Neo4j as a dataset: copy (`cpr ingest NAME --from-neo4j`)
against reading the user's graph in place, on MetaQA's KB written as a user would have it
((:Movie {title})-[:DIRECTED_BY]->(:Person {name}), ...: tests/user_graphs.py).

Measures, in one run on one server (the CPR_HOME's local one):
- the copy: `cpr ingest` wall time (read and write) and the store's growth on disk;
- one search hop both ways, paired on the same random entities: cpr's adjacency read on
  the copy (cypher/adjacency_by_id.cypher, as every search runs it) against the same
  neighbour rows read in place from the user's labels, names taken per label;
- what stays in step: a relationship the user adds shows after the command is re-run.

    python bench/property_graph.py [--entities 200] [--repeats 5] [--keep] [--reuse]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cpr_neo4j.config import cpr_home  # noqa: E402
from cpr_neo4j.graph.neighbours import DEFAULT_FANOUT_CAP  # noqa: E402
from cpr_neo4j.graph.schema import bootstrap  # noqa: E402
from cpr_neo4j.graph.store import GraphStore  # noqa: E402
from tests import user_graphs as ug  # noqa: E402

GRAPH, DATASET = "BenchMovies", "metaqa-pg"
NAMES = ["--name-property", "Year=value", "--name-property", "Rating=value",
         "--name-property", "Votes=value", "--labels", GRAPH]  # fmt: skip
# In place: the neighbours of the user's nodes, named per label as the copy names them.
IN_PLACE = (
    "UNWIND $ids AS i MATCH (e) WHERE elementId(e) = i "
    "MATCH (e)-[r]-(n) "
    "RETURN elementId(e) AS e, type(r) AS type, startNode(r) = e AS forward, elementId(n) AS n, "
    "coalesce(n.name, n.title, toString(n.value)) AS name"
)


def store_bytes(store: GraphStore) -> int:
    """The database's store files, measured with the server stopped (Community has no
    db.checkpoint(): until a checkpoint, writes sit in the transaction logs)."""
    cpr("neo4j", "stop")
    root = cpr_home() / "neo4j" / "data" / "databases" / "neo4j"
    size = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    cpr("neo4j", "start")
    store.reconnect()
    return size


def cpr(*args: str) -> float:
    began = time.perf_counter()
    subprocess.run([sys.executable, "-m", "cpr_neo4j", *args], check=True, capture_output=True)
    return time.perf_counter() - began


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--entities", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--keep", action="store_true", help="leave the graph and dataset behind")
    ap.add_argument("--reuse", action="store_true", help="keep a user graph already written")
    ap.add_argument("--timing-only", action="store_true", help="time one hop on a kept copy")
    a = ap.parse_args()
    with GraphStore() as store:
        bootstrap(store)
        from cpr_neo4j.graph.ingest import drop

        if not a.timing_only:
            drop(store, DATASET)
        have = store.query(f"MATCH (n:{GRAPH}) RETURN count(n) AS n")[0][0]["n"]
        if have and a.reuse:
            print(f"user graph already written: {have:,} nodes")
        else:
            ug.drop(store, GRAPH)
            t0 = time.perf_counter()
            sent = ug.write_metaqa(store, GRAPH)  # the user's graph, as they would have it
            took = time.perf_counter() - t0
            print(f"user graph written: {sent:,} relationships in {took:.1f} s")
        if not a.timing_only:
            size0 = store_bytes(store)
            copy_s = cpr("ingest", DATASET, "--from-neo4j", *NAMES)
            size1 = store_bytes(store)
            print(f"copy: cpr ingest --from-neo4j {copy_s:.1f} s; store {size0 / 2**20:.1f} MiB "
                  f"with the user's graph -> {size1 / 2**20:.1f} MiB with the copy "
                  f"(+{(size1 - size0) / 2**20:.1f} MiB)")  # fmt: skip
        rows = store.query(
            f"MATCH (m:Movie:{GRAPH}) WITH m ORDER BY rand() LIMIT $k RETURN elementId(m) AS id",
            {"k": a.entities},
        )[0]
        ids = [r["id"] for r in rows]
        copy_t, place_t = [], []
        for i in range(-1, a.repeats):  # round -1 warms the page cache for both, untimed
            for order in ((0, 1), (1, 0))[i % 2 :: 2] or ((0, 1),):
                for which in order:
                    t = time.perf_counter()
                    if which == 0:
                        store.read("adjacency_by_id", dataset=DATASET, ids=ids,
                                   cap=DEFAULT_FANOUT_CAP, names=True)  # fmt: skip
                        (copy_t if i >= 0 else []).append(time.perf_counter() - t)
                    else:
                        store.query(IN_PLACE, {"ids": ids})
                        (place_t if i >= 0 else []).append(time.perf_counter() - t)
        print(f"one hop from {len(ids)} movies, median of {a.repeats}: copy "
              f"{statistics.median(copy_t) * 1000:.1f} ms, in place "
              f"{statistics.median(place_t) * 1000:.1f} ms")  # fmt: skip
        if a.timing_only:
            return
        store.query(
            f"MATCH (m:Movie:{GRAPH}) WITH m LIMIT 1 MATCH (p:Person:{GRAPH}) WITH m, p LIMIT 1 "
            "CREATE (m)-[:BENCH_ADDED]->(p)",
            write=True,
        )
        before = store.read("dataset_counts", dataset=DATASET)[0]["triples"]
        again = cpr("ingest", DATASET, "--from-neo4j", *NAMES)
        after = store.read("dataset_counts", dataset=DATASET)[0]["triples"]
        print(f"the user adds a relationship: copy has {before:,} triples; re-run "
              f"({again:.1f} s) -> {after:,}")  # fmt: skip
        if not a.keep:
            drop(store, DATASET)
            ug.drop(store, GRAPH)


if __name__ == "__main__":
    main()
