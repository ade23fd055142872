"""Ingest throughput on the MetaQA KB: online MERGE batches vs neo4j-admin bulk import vs a
naive one-MERGE-per-triple baseline, all measured in this run. Prints ratios.

    python bench/ingest.py [--naive-sample 3000]

Online and naive write to throw-away datasets on the configured server (NEO4J_* or the
local one) and delete them afterwards. Bulk needs an empty database, so it runs on a
private second local server (its own CPR_HOME and ports), never on yours.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from cpr_neo4j.graph import bulk
from cpr_neo4j.graph.cypher import rel_type
from cpr_neo4j.graph.ingest import drop, ingest
from cpr_neo4j.graph.store import GraphStore
from cpr_neo4j.loaders.metaqa import load_metaqa
from cpr_neo4j.neo4j_server import server

NAIVE = (
    "MERGE (h:Entity {{dataset: $d, id: $h}}) ON CREATE SET h.name = $h "
    "MERGE (t:Entity {{dataset: $d, id: $t}}) ON CREATE SET t.name = $t "
    "MERGE (h)-[:{rel}]->(t)"
)


def graph_only(ds, name):
    return replace(ds, name=name, questions=ds.questions.head(0))


def online(ds) -> float:
    with GraphStore() as store:
        drop(store, "bench_online")
        began = time.perf_counter()
        ingest(store, graph_only(ds, "bench_online"))
        took = time.perf_counter() - began
        drop(store, "bench_online")
    return took


def naive(ds, sample: int) -> float:
    rows = ds.triples.sample(n=sample, seed=0).iter_rows()
    with GraphStore() as store:
        drop(store, "bench_naive")
        began = time.perf_counter()
        for h, r, t in rows:
            store.query(
                NAIVE.format(rel=rel_type(r)), {"d": "bench_naive", "h": h, "t": t}, write=True
            )
        took = time.perf_counter() - began
        drop(store, "bench_naive")
    return took


def bulk_run(ds) -> tuple[float, float]:
    """(seconds for the whole --bulk ingest incl. server restart, seconds of import alone)."""
    main_lib = server.home() / "lib"
    saved = os.environ.get("CPR_HOME")
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["CPR_HOME"] = tmp
        try:
            (Path(tmp) / "neo4j").mkdir()
            (Path(tmp) / "neo4j" / "lib").symlink_to(main_lib)
            server.install(bolt_port=17689, http_port=17476, echo=lambda *_: None)
            server.start()
            env_uri = os.environ.pop("NEO4J_URI", None)
            try:
                with GraphStore() as store:
                    began = time.perf_counter()
                    bulk.bulk_import(store, graph_only(ds, "bench_bulk"), echo=lambda *_: None)
                    total = time.perf_counter() - began
            finally:
                if env_uri:
                    os.environ["NEO4J_URI"] = env_uri
            # Import alone, without the restarts: the same CSVs straight into the stopped server.
            server.stop()
            nodes, rels = bulk.write_csv(graph_only(ds, "bench_bulk"), Path(tmp) / "csv")
            began = time.perf_counter()
            bulk.admin_import(nodes, rels, Path(tmp))
            alone = time.perf_counter() - began
        finally:
            server.stop()
            if saved is None:
                os.environ.pop("CPR_HOME", None)
            else:
                os.environ["CPR_HOME"] = saved
    return total, alone


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--naive-sample", type=int, default=3000)
    args = ap.parse_args()
    ds = load_metaqa()
    n = ds.triples.height
    print(f"MetaQA KB: {n:,} triples, {ds.entities.height:,} entities")
    t_naive = naive(ds, args.naive_sample)
    naive_rate = args.naive_sample / t_naive
    print(f"naive (1 MERGE/triple/tx, {args.naive_sample:,} sampled): {naive_rate:,.0f} triples/s")
    t_online = online(ds)
    print(f"online (UNWIND MERGE batches): {t_online:.1f} s, {n / t_online:,.0f} triples/s")
    t_bulk, t_import = bulk_run(ds)
    print(
        f"bulk (--bulk incl. 2 restarts): {t_bulk:.1f} s, {n / t_bulk:,.0f} triples/s; "
        f"neo4j-admin import alone {t_import:.1f} s, {n / t_import:,.0f} triples/s"
    )
    print("ratios vs naive baseline:")
    print(f"  online / naive = {n / t_online / naive_rate:.1f}x")
    print(
        f"  bulk   / naive = {n / t_bulk / naive_rate:.1f}x (import alone "
        f"{n / t_import / naive_rate:.1f}x)"
    )
    print(f"online KB under 30 s: {'yes' if t_online < 30 else 'NO'} ({t_online:.1f} s)")


if __name__ == "__main__":
    main()
