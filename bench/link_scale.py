"""Text linking at 1x, 10x and 100x MetaQA's entities, in one run: bench/scale.py's graphs
(k copies of the KB sharing its hubs, bulk-ingested into a private server per size, which
also stores the linker's name index), then all servers up at once and the questions linked
round-robin across the sizes (question by question, so that load on the machine hits every
size alike), as `cpr ask` links them: the index record's first read, each question's
linking (p50 / p95), and, in a fresh process per size, the process's memory before and
after linking every question; ratios against the first size.

    python bench/link_scale.py [--sizes 1,10,100] [--questions 50] [--heap 1g --pagecache 512m]
                               [--work /tmp/cpr-linkscale] [--port 7713] [--keep]

Questions: bench/scale.py's 2-hop and 3-hop test questions (--questions of each), brackets
removed. Names repeat across copies, so at k copies a name is shared by k entities: the
linker hands its 4 best by degree to the search, and every copy's rows are read (the cost
that does grow, and is measured). Size k's server listens on --port + 10 * index."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scale import Server, base_dataset, link_jars, scale_graph, write_files  # noqa: E402


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def memory(name: str, texts: list[str]) -> dict:
    """In this process (fresh): link each text as `cpr ask` does; memory and the record."""
    from cpr_neo4j.config import Neo4jSettings
    from cpr_neo4j.errors import CprError
    from cpr_neo4j.graph import entity_index, fingerprint
    from cpr_neo4j.graph.store import GraphStore
    from cpr_neo4j.linking import resolve

    with GraphStore(Neo4jSettings.load()) as store:
        graph = fingerprint.current(store, name)
        before = rss_mb()
        began = time.perf_counter()
        entity_index.get(store, name, graph)
        first = time.perf_counter() - began
        refused = ties = 0
        for t in texts:
            try:
                ties += len(resolve.resolve(store, name, t, graph=graph).choices) > 1
            except CprError:
                refused += 1
        after = rss_mb()
        info = store.read("dataset_info", dataset=name)[0]["d"]
    return {
        "entities": info["link_entities"],
        "build_s": info.get("link_build_s"),
        "first_ms": first * 1e3,
        "rss_before_mb": before,
        "rss_after_mb": after,
        "rss_linking_mb": after - before,
        "refused": refused,
        "tied": ties,
    }


def servers(a: argparse.Namespace) -> dict[int, tuple[str, Server]]:
    out = {}
    for i, k in enumerate(a.sizes.split(",")):
        port = a.port + 10 * i
        out[int(k)] = (f"metaqa-x{k}", Server(a.work / f"x{k}" / "home", port, port + 1))
    return out


def build(k: int, name: str, server: Server, a: argparse.Namespace, base: tuple) -> float:
    """Write size k's files, bulk-ingest them into its own server, stop it; ingest seconds."""
    folder = server.home.parent
    if folder.exists():
        raise SystemExit(f"{folder} exists: remove it")
    triples, questions = base
    print(f"== {k}x: building {triples.height * k:,} triples ...", flush=True)
    paths = write_files(scale_graph(triples, questions, k), folder / "files")
    link_jars(server.home)
    server.cpr("neo4j", "start", "--heap", a.heap, "--pagecache", a.pagecache)
    try:
        began = time.perf_counter()
        server.cpr(
            "ingest", name, "--bulk",
            "--triples", str(paths["triples"]),
            "--entities", str(paths["entities"]),
            "--questions", str(paths["questions"]),
        )  # fmt: skip
        return time.perf_counter() - began
    finally:
        shutil.rmtree(folder / "files", ignore_errors=True)
        server.cpr("neo4j", "stop")


def interleaved(sized: dict, texts: list[str]) -> dict[int, list[float]]:
    """Each question linked at every size in turn (one process, one connection per size)."""
    from cpr_neo4j.errors import CprError
    from cpr_neo4j.graph import entity_index, fingerprint
    from cpr_neo4j.graph.store import GraphStore
    from cpr_neo4j.linking import resolve

    stores = {k: GraphStore(server.settings()) for k, (_, server) in sized.items()}
    try:
        graphs = {k: fingerprint.current(stores[k], sized[k][0]) for k in sized}
        for k in sized:  # the index record, and a warm-up question
            entity_index.get(stores[k], sized[k][0], graphs[k])
            resolve.resolve(stores[k], sized[k][0], texts[0], graph=graphs[k])
        times: dict[int, list[float]] = {k: [] for k in sized}
        for t in texts:
            for k, (name, _) in sized.items():
                began = time.perf_counter()
                with contextlib.suppress(CprError):
                    resolve.resolve(stores[k], name, t, graph=graphs[k])
                times[k].append(time.perf_counter() - began)
        return times
    finally:
        for s in stores.values():
            s.close()


def pct(v: list[float], p: float) -> float:
    v = sorted(v)
    return v[min(len(v) - 1, int(p * len(v)))] * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1,10,100")
    ap.add_argument("--questions", type=int, default=50, help="per hop count (2 and 3)")
    ap.add_argument("--heap", default="1g")
    ap.add_argument("--pagecache", default="512m")
    ap.add_argument("--work", type=Path, default=Path("/tmp/cpr-linkscale"))
    ap.add_argument("--port", type=int, default=7713, help="size i: bolt port + 10 i, http + 1")
    ap.add_argument("--keep", action="store_true", help="keep the servers' files")
    ap.add_argument("--reuse", action="store_true", help="measure kept servers, no ingest")
    ap.add_argument("--memory", help=argparse.SUPPRESS)  # the fresh process per size
    a = ap.parse_args()
    if a.memory:
        print(json.dumps(memory(a.memory, json.loads(sys.stdin.read()))))
        return
    base = base_dataset(a.questions)
    texts = [t.replace("[", "").replace("]", "") for t in base[1].get_column("text").to_list()]
    sized = servers(a)
    ingest_s = {k: 0.0 if a.reuse else build(k, n, s, a, base) for k, (n, s) in sized.items()}
    for _, server in sized.values():
        server.cpr("neo4j", "start", "--heap", a.heap, "--pagecache", a.pagecache)
    try:
        rows = {}
        for k, (name, server) in sized.items():
            out = subprocess.run(
                [sys.executable, __file__, "--memory", name],
                input=json.dumps(texts),
                capture_output=True,
                text=True,
                env=server.env(),
                check=True,
            ).stdout
            rows[k] = json.loads(out.strip().splitlines()[-1]) | {"ingest_s": ingest_s[k]}
            rows[k]["store_bytes"] = server.store_bytes()[0]
        times = interleaved(sized, texts)
    finally:
        for _, server in sized.values():
            server.cpr("neo4j", "stop")
        if not a.keep:
            shutil.rmtree(a.work, ignore_errors=True)
    first = min(rows)
    print(f"\n{len(texts)} questions, round-robin over the sizes; load {os.getloadavg()}")
    print("size   entities  ingest s  index s  first ms  p50 ms  p95 ms  linking MB  RSS MB")
    for k, r in rows.items():
        p50, p95 = pct(times[k], 0.5), pct(times[k], 0.95)
        print(
            f"{k:>3}x {r['entities']:>10,} {r['ingest_s']:>9.1f} {r['build_s']:>8.1f} "
            f"{r['first_ms']:>9.1f} {p50:>7.2f} {p95:>7.2f} {r['rss_linking_mb']:>11.1f} "
            f"{r['rss_after_mb']:>7.1f}   p50 {p50 / pct(times[first], 0.5):.2f}x, "
            f"p95 {p95 / pct(times[first], 0.95):.2f}x, RSS "
            f"{r['rss_after_mb'] / rows[first]['rss_after_mb']:.2f}x of {first}x; "
            f"refused {r['refused']}, tied {r['tied']}"
        )
    print(
        json.dumps(
            {
                str(k): r | {"p50_ms": pct(times[k], 0.5), "p95_ms": pct(times[k], 0.95)}
                for k, r in rows.items()
            }
        )
    )


if __name__ == "__main__":
    main()
