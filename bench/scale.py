"""Scale curve: MetaQA's graph at 1x, 10x and 100x its size, each bulk-ingested into its own
private local server; ingest time, store size, `ask` latency and Neo4j memory per size, with
ratios against the first size of the run (1x by default).

    python bench/scale.py [--sizes 1,10,100] [--questions 100] [--heap 2g --pagecache 2g]
                          [--work /tmp/cpr-scale] [--keep] [--torch-threads 1]

Construction (tests/data/scaled_graph.py): k copies of the bundled KB. Every entity gets a
fresh id per copy (`id#c`; copy 0 keeps the original ids) except the hubs (genres, years,
languages, IMDb rating/votes buckets: the tails of HUB_RELATIONS), which all copies share: copy
c's movies link to the same hub nodes, so a hub's degree grows k-fold as it would in a bigger
movie KB (Drama: 4,016 edges at 1x, ~400k at 100x). The first --questions 2-hop and 3-hop test
questions are re-targeted, question i to copy i mod k (topics and answers mapped like the
entities; the text keeps the names, so masking is unchanged). The graph is written as the
generic triples loader's files and loaded with `cpr ingest NAME --triples ... --bulk`, timed
end to end. Gold answers stay those of the copy: where a question's path crosses a hub, the
scaled graph has more true answers than listed (irrelevant here: only latency is measured).

Ask latency is bench/ask.py's `ask_like`: what `cpr ask` does with a linked question (TreeG
naming only the answers it shows, scores, the set at its top level ranked, each answer's best
path) with a cold neighbour source, after a warm-up; scored by the newest CPR model trained
on the main server's metaqa (its files under the caller's CPR_HOME), else V_sem; a second pass
over the same questions gives warm latency. Memory: heap used and G1 old gen peak
(dbms.queryJmx works in Community), process RSS and its peak, and the store bytes the server
read during each pass (/proc rchar: page cache faults; Community's PROFILE reports no page
cache hits).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.data.scaled_graph import SEP, scale_graph, write_files  # noqa: E402

HOPS = (2, 3)


def base_dataset(questions: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The bundled KB and the first `questions` 2-hop and 3-hop test questions."""
    from cpr_neo4j.loaders.metaqa import load_metaqa

    ds = load_metaqa(hops=HOPS, splits=("test",))
    q = pl.concat(
        [ds.questions.filter(pl.col("hops") == h).head(questions) for h in HOPS], how="vertical"
    )
    return ds.triples, q


# --- a private server per size ----------------------------------------------------------------


@dataclass
class Server:
    home: Path
    bolt: int
    http: int

    def env(self) -> dict[str, str]:
        env = dict(os.environ, CPR_HOME=str(self.home))
        env.update(CPR_NEO4J_BOLT_PORT=str(self.bolt), CPR_NEO4J_HTTP_PORT=str(self.http))
        for var in ("NEO4J_URI", "NEO4J_USERNAME", "NEO4J_PASSWORD", "NEO4J_DATABASE"):
            env.pop(var, None)  # this server's own credentials, never the caller's server
        return env

    def cpr(self, *args: str) -> subprocess.CompletedProcess:
        done = subprocess.run([sys.executable, "-m", "cpr_neo4j", *args], env=self.env())
        if done.returncode != 0:
            raise SystemExit(f"`cpr {' '.join(args)}` failed with code {done.returncode}")
        return done

    def settings(self):
        from cpr_neo4j.config import Neo4jSettings

        creds = self.home / "neo4j" / "credentials.json"
        s = json.loads(creds.read_text())
        return Neo4jSettings(s["uri"], s["username"], s["password"], "neo4j", str(creds))

    def pid(self) -> int:
        return int((self.home / "neo4j" / "run" / "neo4j.pid").read_text())

    def store_bytes(self) -> tuple[int, int]:
        """(store files incl. indexes, transaction logs) of the neo4j database."""
        data = self.home / "neo4j" / "data"
        return tuple(  # type: ignore[return-value]
            sum(f.stat().st_size for f in (data / sub / "neo4j").rglob("*") if f.is_file())
            for sub in ("databases", "transactions")
        )


def link_jars(home: Path) -> None:
    """Reuse the caller's Neo4j jars (no Maven fetch) when it has them."""
    from cpr_neo4j.neo4j_server import server

    lib = server.home() / "lib"
    if lib.is_dir() and not (home / "neo4j" / "lib").exists():
        (home / "neo4j").mkdir(parents=True, exist_ok=True)
        (home / "neo4j" / "lib").symlink_to(lib)


# --- measurement ------------------------------------------------------------------------------


def jmx_memory(store) -> dict[str, int]:
    """Heap used now, heap max and the G1 old generation's peak, through dbms.queryJmx."""
    heap = store.query(
        "CALL dbms.queryJmx('java.lang:type=Memory') YIELD attributes "
        "RETURN attributes.HeapMemoryUsage.value.properties AS u"
    )[0][0]["u"]
    old = store.query(
        "CALL dbms.queryJmx('java.lang:type=MemoryPool,name=G1 Old Gen') YIELD attributes "
        "RETURN attributes.PeakUsage.value.properties AS u"
    )[0]
    return {
        "heap_used": heap["used"],
        "heap_max": heap["max"],
        "old_gen_peak": old[0]["u"]["used"] if old else 0,
    }


def rss(pid: int) -> dict[str, int]:
    """Resident and peak resident memory of the server process (kB in /proc -> bytes)."""
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    return {
        k: int(fields[f].split()[0]) * 1024 for k, f in (("rss", "VmRSS"), ("rss_peak", "VmHWM"))
    }


def read_bytes(pid: int) -> int:
    """Bytes the server has read from files (/proc rchar): on a store it is page cache faults
    (Community's PROFILE reports no page cache hits or misses, and no page cache MBean)."""
    io = dict(line.split(": ") for line in Path(f"/proc/{pid}/io").read_text().splitlines())
    return int(io["rchar"])


@dataclass
class Row:
    size: int
    triples: int
    entities: int
    build_s: float
    ingest_s: float
    store: int
    txlogs: int
    ms: dict[int, list[float]] = field(default_factory=dict)  # first pass after the import
    warm: dict[int, list[float]] = field(default_factory=dict)  # the same questions again
    faulted: dict[int, int] = field(default_factory=dict)  # bytes read in during each pass
    refaulted: dict[int, int] = field(default_factory=dict)
    failed: dict[int, list[tuple[str, str]]] = field(default_factory=dict)  # (id, error code)
    by_question: dict[int, dict[str, float]] = field(default_factory=dict)  # base id -> ms
    memory: dict[str, int] = field(default_factory=dict)
    # the same questions with ingest's hub lists hidden: the queries' sort path, as before them
    sorted_ms: dict[int, list[float]] = field(default_factory=dict)
    differ: dict[int, int] = field(default_factory=dict)  # questions whose candidates differ
    hub: dict[str, float] = field(default_factory=dict)  # the biggest hub's query, both ways
    sizes: dict[int, list[int]] = field(default_factory=dict)  # each ask's set (warm pass)


def measure_ask(server: Server, name: str, scorers: dict, row: Row, per_hop: int) -> None:
    """Two passes per hop count: the first after the import (cold page cache), then the same
    questions again; file bytes read in each say whether the working set stays cached."""
    from bench.ask import latencies
    from cpr_neo4j.graph.store import GraphStore
    from cpr_neo4j.model.costs import CostCache
    from cpr_neo4j.training import questions as qsel

    pid = server.pid()
    kept: dict[int, dict[str, dict[str, float]]] = {}  # the warm pass's candidates
    # No driver retries: a refused query fails its question at once and is counted.
    with GraphStore(server.settings(), retry_time=0) as store:
        for h in HOPS:
            qs = qsel.load(store, name, "test", h)[:per_hop]
            scorer = scorers[h](store, name)
            scorer.costs = CostCache()  # every size starts with no costs kept (model.costs)
            print(f"  {h}-hop: {len(qs)} questions, two passes ...", flush=True)
            before = read_bytes(pid)
            row.failed[h], row.sizes[h] = [], []
            row.ms[h] = latencies(store, scorer, qs, h, name, failed=row.failed[h], ask=True)
            between = read_bytes(pid)
            row.warm[h] = latencies(store, scorer, qs, h, name, 0, [], kept.setdefault(h, {}),
                                    ask=True, sizes=row.sizes[h])  # fmt: skip
            refused = {i for i, _ in row.failed[h]}
            answered = [q.id.split(SEP)[0] for q in qs if q.id not in refused]
            row.by_question[h] = dict(zip(answered, row.ms[h], strict=True))
            if row.failed[h]:
                codes = sorted({c for _, c in row.failed[h]})
                print(f"    {len(row.failed[h])} questions refused by the server: {codes}")
            row.faulted[h], row.refaulted[h] = between - before, read_bytes(pid) - between
        row.hub = hub_query(store, name)
        print("  the same questions with the hub lists hidden (the sort path) ...", flush=True)
        hide_hub_lists(store, name, True)
        try:
            row.hub |= {f"sorted {k}": v for k, v in hub_query(store, name).items()}
            for h in HOPS:
                qs = qsel.load(store, name, "test", h)[:per_hop]
                sort: dict[str, dict[str, float]] = {}
                scorer = scorers[h](store, name)
                scorer.costs = CostCache()  # as the first pass found them
                row.sorted_ms[h] = latencies(store, scorer, qs, h, name, 0, [], keep=sort,
                                             ask=True)  # fmt: skip
                row.differ[h] = sum(not same_costs(kept[h].get(q), sort[q]) for q in sort)
        finally:
            hide_hub_lists(store, name, False)
        row.memory = jmx_memory(store)
    row.memory |= rss(pid)


def hide_hub_lists(store, name: str, hide: bool) -> None:
    """Hide ingest's hub lists (cypher/hub_lists.cypher) from the adjacency queries, which then
    sort each hub's neighbours as they did before the lists, or show them again."""
    a, b = ("cpr_hub_cap", "cpr_hub_hidden") if hide else ("cpr_hub_hidden", "cpr_hub_cap")
    store.query(
        f"MATCH (e:Entity {{dataset: $name}}) WHERE e.{a} IS NOT NULL "
        f"SET e.{b} = e.{a} REMOVE e.{a}",
        {"name": name},
        write=True,
    )


def same_costs(a: dict[str, float] | None, b: dict[str, float]) -> bool:
    """The same candidates, their costs equal up to float summation order."""
    return a is not None and a.keys() == b.keys() and all(abs(a[k] - b[k]) <= 1e-6 for k in a)


def hub_query(store, name: str) -> dict[str, float]:
    """The biggest hub's neighbour query (one entity, search's cap): the server's own peak
    memory for it (PROFILE's GlobalMemory) and its median time over 15 runs after 5."""
    from cpr_neo4j.graph.cypher import statement
    from cpr_neo4j.graph.neighbours import DEFAULT_FANOUT_CAP

    hub = store.query(
        "MATCH (e:Entity {dataset: $name}) WITH e ORDER BY COUNT { (e)--() } DESC LIMIT 1 "
        "RETURN e.id AS id, COUNT { (e)--() } AS degree",
        {"name": name},
    )[0][0]
    params = {"ids": [hub["id"]], "dataset": name, "cap": DEFAULT_FANOUT_CAP, "names": True}
    times = []
    for k in range(20):
        began = time.perf_counter()
        store.query(statement("adjacency_by_id"), params)
        if k >= 5:  # after the plan is compiled and warm
            times.append((time.perf_counter() - began) * 1000)
    _, summary = store.query("PROFILE " + statement("adjacency_by_id"), params)
    memory = (summary.profile or {}).get("args", {}).get("GlobalMemory", float("nan"))
    return {
        "degree": hub["degree"],
        "ms": float(np.median(times)),
        "memory MiB": memory / (1 << 20),
    }


def scorer_factory(encoder, hops: int):
    """The main server's newest CPR metaqa model at this depth; else V_sem on the graph's
    relations (built on first use, from the scaled store)."""
    from bench.ask import scorer_for
    from cpr_neo4j.errors import ConnectionFailed
    from cpr_neo4j.graph import records
    from cpr_neo4j.graph.store import GraphStore
    from cpr_neo4j.model.scorer import PathScorer

    try:
        with GraphStore() as main:
            scorer, label = scorer_for(main, hops, encoder)
    except ConnectionFailed:
        scorer, label = None, "V_sem (main server unreachable)"
    print(f"{hops}-hop scorer: {label}")
    cache: dict[str, PathScorer] = {}

    def get(store, dataset: str) -> PathScorer:
        if scorer is not None:
            return scorer
        if "v" not in cache:
            cache["v"] = PathScorer(encoder, records.relation_text(store, dataset))
        return cache["v"]

    return get


# --- report -----------------------------------------------------------------------------------


def pct(v: list[float], p: float) -> float:
    return float(np.percentile(v, p)) if v else float("nan")


def figures(r: Row) -> dict[str, float]:
    """One size's measured figures, by name (MB, s, ms)."""
    mb = 1 << 20
    out = {
        "triples": r.triples,
        "entities": r.entities,
        "build files s": r.build_s,
        "cpr ingest --bulk s": r.ingest_s,
        "store MB": r.store / mb,
        "tx logs MB": r.txlogs / mb,
    }
    for h in HOPS:
        out |= {
            f"{h}-hop questions refused": len(r.failed[h]),
            f"{h}-hop p50 ms": pct(r.ms[h], 50),
            f"{h}-hop p95 ms": pct(r.ms[h], 95),
            f"{h}-hop warm p50 ms": pct(r.warm[h], 50),
            f"{h}-hop warm p95 ms": pct(r.warm[h], 95),
            f"{h}-hop set size p50": pct(r.sizes[h], 50),
            f"{h}-hop store read MB": r.faulted[h] / mb,
            f"{h}-hop warm reread MB": r.refaulted[h] / mb,
        }
    for h in HOPS:
        out |= {
            f"{h}-hop sort path p50 ms": pct(r.sorted_ms[h], 50),
            f"{h}-hop sort path p95 ms": pct(r.sorted_ms[h], 95),
            f"{h}-hop candidates differ": r.differ[h],
        }
    out |= {f"biggest hub query {k}": v for k, v in r.hub.items()}
    return out | {
        "heap used MB": r.memory["heap_used"] / mb,
        "old gen peak MB": r.memory["old_gen_peak"] / mb,
        "RSS MB": r.memory["rss"] / mb,
        "RSS peak MB": r.memory["rss_peak"] / mb,
    }


def common(rows: list[Row]) -> dict[int, set[str]]:
    """Per hop count, the questions answered at every size (the refused ones are the costly
    hub-heavy ones: percentiles over each size's survivors alone would flatter the big sizes)."""
    return {h: set.intersection(*(set(r.by_question[h]) for r in rows)) for h in HOPS}


def report(rows: list[Row], memory: str) -> pl.DataFrame:
    """Figures as rows, sizes as columns, each size after the first with its ratio to it."""
    both = common(rows)

    def all_figures(r: Row) -> dict[str, float]:
        shared = {
            f"{h}-hop p{p} ms, common {len(both[h])}": pct(
                [r.by_question[h][q] for q in both[h]], p
            )
            for h in HOPS
            for p in (50, 95)
        }
        return figures(r) | shared

    base = all_figures(rows[0])
    cols: dict[str, list] = {"figure": list(base)}
    for r in rows:
        f = all_figures(r)
        cols[f"{r.size}x"] = [f"{v:,.0f}" if v >= 100 else f"{v:.1f}" for v in f.values()]
        if r is not rows[0]:
            cols[f"{r.size}x / {rows[0].size}x"] = [
                round(v / base[k], 2) if base[k] else None for k, v in f.items()
            ]
    table = pl.DataFrame(cols, strict=False)
    with pl.Config(
        tbl_rows=60,
        fmt_str_lengths=40,
        tbl_hide_dataframe_shape=True,
        tbl_hide_column_data_types=True,
    ):
        print(f"\nScale, {memory} (ratios against {rows[0].size}x, measured in this run)")
        print(table)
    return table


# --- main -------------------------------------------------------------------------------------


def run_size(k: int, args: argparse.Namespace, base: tuple, scorers: dict) -> Row:
    """Build, ingest and measure one size on its own server (or, with --reuse, measure a
    store kept by an earlier --keep run again, e.g. under another --pagecache)."""
    name, folder = f"metaqa-x{k}", args.work / f"x{k}"
    server = Server(folder / "home", args.bolt_port, args.http_port)
    reuse = args.reuse and (server.home / "neo4j" / "data").is_dir()
    if folder.exists() and not reuse:
        raise SystemExit(f"{folder} exists (from a --keep run?): remove it, or pass --reuse")
    row = Row(k, 0, 0, float("nan"), float("nan"), 0, 0)
    if not reuse:
        triples, questions = base
        print(f"\n== {k}x: building {triples.height * k:,} triples ...", flush=True)
        began = time.perf_counter()
        scaled = scale_graph(triples, questions, k)
        paths = write_files(scaled, folder / "files")
        row.build_s = time.perf_counter() - began
        del scaled
        link_jars(server.home)
    server.cpr("neo4j", "start", "--heap", args.heap, "--pagecache", args.pagecache)
    try:
        if not reuse:
            print(f"== {k}x: cpr ingest {name} --bulk ...", flush=True)
            began = time.perf_counter()
            server.cpr(
                "ingest", name, "--bulk",
                "--triples", str(paths["triples"]),
                "--entities", str(paths["entities"]),
                "--questions", str(paths["questions"]),
            )  # fmt: skip
            row.ingest_s = time.perf_counter() - began
            shutil.rmtree(folder / "files")
        row.store, row.txlogs = server.store_bytes()
        row.triples, row.entities = dataset_size(server, name)
        print(f"== {k}x: ask latency ...", flush=True)
        measure_ask(server, name, scorers, row, args.questions)
    finally:
        server.cpr("neo4j", "stop")
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
    return row


def dataset_size(server: Server, name: str) -> tuple[int, int]:
    from cpr_neo4j.graph.store import GraphStore

    with GraphStore(server.settings()) as store:
        d = store.query(
            "MATCH (d:Dataset {name: $name}) RETURN d.triples_source AS t, d.entities_source AS e",
            {"name": name},
        )[0][0]
    return d["t"], d["e"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1,10,100", help="copies of the KB, e.g. 1,10")
    ap.add_argument("--questions", type=int, default=100, help="per hop count (2 and 3)")
    ap.add_argument("--heap", default="2g", help="each private server's JVM heap")
    ap.add_argument("--pagecache", default="2g", help="each private server's page cache")
    ap.add_argument("--work", type=Path, default=Path("/tmp/cpr-scale"))
    ap.add_argument("--bolt-port", type=int, default=7781)
    ap.add_argument("--http-port", type=int, default=7481)
    ap.add_argument("--keep", action="store_true", help="keep each size's server files (stopped)")
    ap.add_argument("--reuse", action="store_true", help="measure kept stores again, no ingest")
    ap.add_argument("--torch-threads", type=int, default=1)
    ap.add_argument("--out", type=Path, help="also write the figures as JSON here")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]

    from cpr_neo4j.model.encoder import TextEncoder
    from cpr_neo4j.model.threads import set_threads

    set_threads(args.torch_threads)  # the encoder's and scorer's threads (no torch now)
    encoder = TextEncoder()
    scorers = {h: scorer_factory(encoder, h) for h in HOPS}
    base = base_dataset(args.questions)
    memory = f"heap {args.heap}, page cache {args.pagecache}"
    rows: list[Row] = []
    for k in sizes:
        rows.append(run_size(k, args, base, scorers))
        report(rows, memory)
    print(f"load average at the end: {os.getloadavg()}")
    if args.out:
        sizes_out = {f"{r.size}x": figures(r) | {"refused": r.failed} for r in rows}
        args.out.write_text(json.dumps({"memory": memory, "sizes": sizes_out}, indent=2))


if __name__ == "__main__":
    main()
