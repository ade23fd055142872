"""Ingest throughput: online (column batches, all relation types in one statement) against
the frozen previous online path (`v1`: a map per row, one statement per relation type) and a
naive one-MERGE-per-triple baseline, on the MetaQA KB and on synthetic graphs with 10 /
1,000 / 5,000 relation types at equal triple count; then neo4j-admin bulk import. All
measured in this run; v1 and new alternate, and ratios compare them. On the MetaQA KB a
`floor` runs too: the new path's batches written by plain CREATEs (not idempotent), i.e.
what the same batches cost with no existence check at all.

    python bench/ingest.py [--naive-sample 3000] [--types 10,1000,5000] [--type-triples 50000]
                           [--repeats 1] [--skip-bulk]

Online, v1 and naive write to throw-away datasets on the configured server (NEO4J_* or the
local one under CPR_HOME: point CPR_HOME at a private server to keep yours clean) and
delete them afterwards. Bulk needs an empty database, so it runs on a private second local
server (its own CPR_HOME and ports), never on yours.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import polars as pl

from cpr_neo4j.graph import bulk
from cpr_neo4j.graph.cypher import rel_type, statement, with_rel_type
from cpr_neo4j.graph.ingest import drop, ingest, validate_relations, write_entities, write_triples
from cpr_neo4j.graph.schema import bootstrap
from cpr_neo4j.graph.store import GraphStore
from cpr_neo4j.loaders.base import Dataset, build_dataset, questions_frame
from cpr_neo4j.loaders.metaqa import load_metaqa
from cpr_neo4j.neo4j_server import install as installer
from cpr_neo4j.neo4j_server import server

NAIVE = (
    "MERGE (h:Entity {{dataset: $d, id: $h}}) ON CREATE SET h.name = $h "
    "MERGE (t:Entity {{dataset: $d, id: $t}}) ON CREATE SET t.name = $t "
    "MERGE (h)-[:{rel}]->(t)"
)


def graph_only(ds: Dataset, name: str) -> Dataset:
    return replace(ds, name=name, questions=ds.questions.head(0))


def ingest_v1(store: GraphStore, ds: Dataset, batch_size: int = 10_000) -> None:
    """The previous online graph path, frozen: entities, then one statement per type."""
    bootstrap(store)
    extra = {"dataset": ds.name}
    for _ in store.write_batches(
        statement("merge_entities"), ds.entities.iter_rows(named=True), batch_size, extra
    ):
        pass
    for (rel,), group in ds.triples.group_by("relation", maintain_order=True):
        rows = group.select(pl.col("head").alias("h"), pl.col("tail").alias("t"))
        for _ in store.write_batches(
            with_rel_type("merge_triples", rel), rows.iter_rows(named=True), batch_size, extra
        ):
            pass


def ingest_new(store: GraphStore, ds: Dataset, batch_size: int = 10_000) -> None:
    """The same graph stages as ingest_v1, as `ingest` runs them now."""
    bootstrap(store)
    for _ in write_entities(store, ds, batch_size):
        pass
    for _ in write_triples(store, ds, validate_relations(ds), batch_size):
        pass


def ingest_floor(store: GraphStore, ds: Dataset, batch_size: int = 10_000) -> None:
    """The new path's batches and columns, written by plain CREATEs (no MERGE, no check)."""
    bootstrap(store)
    for _ in write_entities(store, ds, batch_size, name="create_entities_floor"):
        pass
    for _ in write_triples(store, ds, validate_relations(ds), batch_size, "create_triples_floor"):
        pass


def ingest_whole(store: GraphStore, ds: Dataset) -> None:
    """`ingest` itself: the graph plus Relation nodes, questions, links, Dataset record."""
    ingest(store, ds)


def timed(ds: Dataset, fn: Callable[[GraphStore, Dataset], None]) -> float:
    with GraphStore() as store:
        drop(store, ds.name)
        began = time.perf_counter()
        fn(store, ds)
        took = time.perf_counter() - began
        drop(store, ds.name)
    return took


PATHS = {"v1": ingest_v1, "new": ingest_new, "floor": ingest_floor}


def compare(ds: Dataset, repeats: int, paths: tuple[str, ...] = ("v1", "new")) -> dict[str, float]:
    """Median seconds of the graph stages (entities + triples), the paths alternating."""
    runs: dict[str, list[float]] = {name: [] for name in paths}
    for k in range(repeats):
        for name in paths if k % 2 == 0 else paths[::-1]:
            runs[name].append(timed(ds, PATHS[name]))
    return {k: statistics.median(v) for k, v in runs.items()}


def naive(ds: Dataset, sample: int) -> float:
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


def synthetic(types: int, triples: int, seed: int = 0) -> Dataset:
    """`triples` random triples over triples/3 entities with `types` Freebase-like types."""
    rng = random.Random(seed)
    n_ent = max(triples // 3, 10)
    rels = [f"domain{i % 97}.type{i}.property_{i}" for i in range(types)]
    rows = {
        (f"m.{rng.randrange(n_ent):07d}", rels[k % types], f"m.{rng.randrange(n_ent):07d}")
        for k in range(triples * 2)
    }
    frame = pl.DataFrame(sorted(rows)[:triples], schema=["head", "relation", "tail"], orient="row")
    return build_dataset(
        f"bench_types_{types}", "synthetic", frame.with_row_index("line", 1), questions_frame(), []
    )


def bulk_run(ds: Dataset, questions_csv: bool = True) -> tuple[float, float]:
    """(seconds for the whole --bulk ingest incl. server restart, seconds of import alone)."""
    main_lib = server.home() / "lib"
    saved = os.environ.get("CPR_HOME")
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["CPR_HOME"] = tmp
        try:
            (Path(tmp) / "neo4j").mkdir()
            (Path(tmp) / "neo4j" / "lib").symlink_to(main_lib)
            installer.install(bolt_port=17689, http_port=17476, echo=lambda *_: None)
            server.start()
            env_uri = os.environ.pop("NEO4J_URI", None)
            try:
                with GraphStore() as store:
                    began = time.perf_counter()
                    bulk.bulk_import(store, ds, lambda *_: None, questions_csv)
                    total = time.perf_counter() - began
            finally:
                if env_uri:
                    os.environ["NEO4J_URI"] = env_uri
            # Import alone, without the restarts: the same CSVs straight into the stopped server.
            server.stop()
            files = bulk.write_csv(ds, Path(tmp) / "csv", questions_csv)
            began = time.perf_counter()
            bulk.admin_import(files, Path(tmp))
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
    ap.add_argument("--types", default="10,1000,5000")
    ap.add_argument("--type-triples", type=int, default=50_000)
    ap.add_argument("--repeats", type=int, default=1, help="runs of each path (median)")
    ap.add_argument("--skip-bulk", action="store_true")
    ap.add_argument("--skip-metaqa", action="store_true")
    args = ap.parse_args()
    ds = load_metaqa()
    kb = graph_only(ds, "bench_online")
    n = kb.triples.height
    if not args.skip_metaqa:
        print(f"MetaQA KB: {n:,} triples, {ds.entities.height:,} entities")
        naive_rate = args.naive_sample / naive(kb, args.naive_sample)
        print(
            f"naive (1 MERGE/triple/tx, {args.naive_sample:,} sampled): {naive_rate:,.0f} triples/s"
        )
        t = compare(kb, args.repeats, ("v1", "new", "floor"))
        for k in t:
            print(f"online {k:>5} (entities + triples): {t[k]:.1f} s, {n / t[k]:,.0f} triples/s")
        print(f"  ratio new/v1 triples/s: {t['v1'] / t['new']:.2f}x; new/naive "
              f"{n / t['new'] / naive_rate:.1f}x; floor/v1 {t['v1'] / t['floor']:.2f}x "
              f"(plain CREATEs of the same batches)")  # fmt: skip
        whole_kb = timed(kb, ingest_whole)
        whole = timed(replace(ds, name="bench_full"), ingest_whole)
        print(
            f"online `ingest` end to end: KB only {whole_kb:.1f} s; whole MetaQA ({n:,} triples "
            f"+ {ds.questions.height:,} questions) {whole:.1f} s"
        )
    for k in (int(x) for x in args.types.split(",") if x):
        syn = synthetic(k, args.type_triples)
        m = syn.triples.height
        t = compare(syn, args.repeats)
        print(
            f"{k:>5} relation types, {m:,} triples, {syn.entities.height:,} entities: "
            f"v1 {m / t['v1']:,.0f} triples/s ({t['v1']:.1f} s), new {m / t['new']:,.0f} "
            f"triples/s ({t['new']:.1f} s), ratio {t['v1'] / t['new']:.1f}x"
        )
    if not args.skip_bulk:
        for label, data, csv in (
            ("KB only", graph_only(ds, "bench_bulk"), True),
            ("whole MetaQA, questions by MERGE after the import (before)", ds, False),
            ("whole MetaQA, questions in the import (now)", ds, True),
        ):
            total, alone = bulk_run(data, csv)
            print(
                f"bulk ({label}; --bulk incl. 2 restarts): {total:.1f} s; neo4j-admin "
                f"import alone {alone:.1f} s"
            )


if __name__ == "__main__":
    main()
