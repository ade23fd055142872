"""Text linking at 1x, 10x and 100x MetaQA's entities, in one run: bench/scale.py's graphs
(k copies of the KB sharing its hubs, bulk-ingested into a private server per size; the
stored name index is built by the ingest), then, in a fresh process per size, what a cold
`cpr ask` pays to link: the index record's first read, each question's linking (p50 / p95),
and the process's memory before and after; ratios against the first size.

    python bench/link_scale.py [--sizes 1,10,100] [--questions 50] [--heap 2g --pagecache 1g]
                               [--work /tmp/cpr-linkscale] [--bolt-port 7713 --http-port 7493]

Questions: bench/scale.py's 2-hop and 3-hop test questions (--questions of each), brackets
removed, linked from their text as `cpr ask` links them. Names repeat across copies, so at
k copies a name is shared by k entities: the linker hands its 4 best by degree to the
search, and every copy's rows are read (the cost that does grow, and is measured)."""

from __future__ import annotations

import argparse
import json
import os
import resource
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


def measure(name: str, texts: list[str]) -> dict:
    """In this process (fresh): link each text as `cpr ask` does."""
    from cpr_neo4j.config import Neo4jSettings
    from cpr_neo4j.errors import CprError
    from cpr_neo4j.graph import entity_index, fingerprint, linking
    from cpr_neo4j.graph.store import GraphStore

    with GraphStore(Neo4jSettings.load()) as store:
        graph = fingerprint.current(store, name)
        before = rss_mb()
        began = time.perf_counter()
        entity_index.get(store, name, graph)
        first = time.perf_counter() - began
        times, refused, ties = [], 0, 0
        for t in texts:
            began = time.perf_counter()
            try:
                ties += len(linking.resolve(store, name, t, graph=graph).choices) > 1
            except CprError:
                refused += 1
            times.append(time.perf_counter() - began)
        after = rss_mb()
        info = store.read("dataset_info", dataset=name)[0]["d"]
    times.sort()
    return {
        "entities": info["link_entities"],
        "build_s": info.get("link_build_s"),
        "first_ms": first * 1e3,
        "p50_ms": times[len(times) // 2] * 1e3,
        "p95_ms": times[int(0.95 * len(times))] * 1e3,
        "rss_before_mb": before,
        "rss_after_mb": after,
        "rss_linking_mb": after - before,
        "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "refused": refused,
        "tied": ties,
    }


def run_size(k: int, a: argparse.Namespace, base: tuple, texts: list[str]) -> dict:
    name, folder = f"metaqa-x{k}", a.work / f"x{k}"
    if folder.exists():
        raise SystemExit(f"{folder} exists: remove it")
    server = Server(folder / "home", a.bolt_port, a.http_port)
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
        ingest_s = time.perf_counter() - began
        out = subprocess.run(
            [sys.executable, __file__, "--measure", name],
            input=json.dumps(texts),
            capture_output=True,
            text=True,
            env=server.env(),
            check=True,
        ).stdout
        row = json.loads(out.strip().splitlines()[-1]) | {"size": k, "ingest_s": ingest_s}
        row["store_bytes"] = server.store_bytes()[0]
    finally:
        server.cpr("neo4j", "stop")
        shutil.rmtree(folder, ignore_errors=True)
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1,10,100")
    ap.add_argument("--questions", type=int, default=50, help="per hop count (2 and 3)")
    ap.add_argument("--heap", default="2g")
    ap.add_argument("--pagecache", default="1g")
    ap.add_argument("--work", type=Path, default=Path("/tmp/cpr-linkscale"))
    ap.add_argument("--bolt-port", type=int, default=7713)
    ap.add_argument("--http-port", type=int, default=7493)
    ap.add_argument("--measure", help=argparse.SUPPRESS)  # the fresh process per size
    a = ap.parse_args()
    if a.measure:
        print(json.dumps(measure(a.measure, json.loads(sys.stdin.read()))))
        return
    base = base_dataset(a.questions)
    texts = [t.replace("[", "").replace("]", "") for t in base[1].get_column("text").to_list()]
    rows = [run_size(int(k), a, base, texts) for k in a.sizes.split(",")]
    first = rows[0]
    print(f"\n{len(texts)} questions; load average at the end {os.getloadavg()}")
    print("size  entities    build s  first ms  p50 ms  p95 ms  linking MB  RSS MB  ratios")
    for r in rows:
        ratio = (
            f"p50 {r['p50_ms'] / first['p50_ms']:.2f}x, p95 {r['p95_ms'] / first['p95_ms']:.2f}x,"
            f" RSS {r['rss_after_mb'] / first['rss_after_mb']:.2f}x"
        )
        print(
            f"{r['size']:>3}x {r['entities']:>10,} {r['build_s']:>9.1f} {r['first_ms']:>9.1f} "
            f"{r['p50_ms']:>7.2f} {r['p95_ms']:>7.2f} {r['rss_linking_mb']:>10.1f} "
            f"{r['rss_after_mb']:>7.1f}  {ratio}"
        )


if __name__ == "__main__":
    main()
