"""`cpr serve` under 8 concurrent clients against one `cpr ask` process per question.

    python bench/serve.py [--questions 200] [--clients 8] [--solo 50] [--baseline 5] [--unbatched]
    python bench/serve.py --hops 0 --both-calibrations --no-preload-too   # issue 36's run
    python bench/serve.py --fault   # Neo4j stopped and started again under that load
    python bench/serve.py --before /tmp/old   # a `git worktree` of an earlier revision first
    python bench/serve.py --before /tmp/old --paired 100   # + both up, lone questions paired

Starts `cpr serve` on a free loopback port, asks test questions (texts from Neo4j; --hops 0:
every hop count, interleaved) from concurrent closed-loop client threads, and prints latency
p50/p99, questions/s and CPU per answered question of `cpr serve` and of Neo4j; then the
latency of one lone client on other questions of each hop count (alternately through a
persistent `http.client` connection and a `requests` session, printed apart: `requests`
adds ~0.6 ms of its own per call); then runs `cpr ask` once
per question for a few of them (a process each, as a shell script would) and prints the
throughput ratio. --both-calibrations: once under the every-hop calibration (no `hops`
field, as users ask) and once under the N-hop one; --no-preload-too: each also with
`cpr serve --no-preload` (rows read as questions need them), the baseline of the same run.
The server runs with its defaults (a worker process per core, at most two); --workers 1,4
also runs those and prints their ratios to it. --paired N (with --before): N more lone
questions per hop count asked of both servers up at once, alternating, so that the
machine's drift between two runs does not decide a lone-latency comparison. --reworded:
the lone client also asks its questions with a made-up word added (a masked text the
server never saw: it embeds the question and computes every path cost). The :Ask
records it creates are deleted after.
"""

from __future__ import annotations

import argparse
import http.client
import itertools
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np
import requests

from cpr_neo4j.graph import records
from cpr_neo4j.graph.store import GraphStore

DATASET = "metaqa"  # --dataset changes it
CPR = [sys.executable, "-m", "cpr_neo4j"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(
    port: int,
    scorers: int,
    log: Path,
    batch: bool = True,
    preload: bool = True,
    workers: int | None = None,
    tree: Path | None = None,
    extra: tuple[str, ...] = (),
) -> subprocess.Popen:
    """`cpr serve` on `port`; workers None: its default. tree: run the server of another
    checkout of this repository (its revision's defaults; only --port and --scorers).
    extra: more `cpr serve` options."""
    cmd = [*CPR, "serve", "--port", str(port), "--scorers", str(scorers), *extra]
    cmd += [] if workers is None else ["--workers", str(workers)]  # the default: per core
    cmd += [] if batch else ["--no-batch"]
    cmd += [] if preload else ["--no-preload"]
    # `python -m` puts the working directory first on sys.path: run from the other tree
    env = os.environ | ({"PYTHONPATH": str(tree.resolve())} if tree else {})
    proc = subprocess.Popen(
        cmd, stdout=log.open("w"), stderr=subprocess.STDOUT, env=env, cwd=tree or None
    )
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"cpr serve exited with {proc.returncode}; see {log}")
        try:
            if requests.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                return proc
        except requests.ConnectionError:
            pass
        time.sleep(0.5)
    proc.terminate()
    sys.exit(f"cpr serve did not answer /health in 300 s; see {log}")


def run_clients(url: str, bodies: list[dict], clients: int) -> tuple[list[float], list, float]:
    """(latencies in ms, responses as (status, json), wall seconds) for all bodies."""
    local = threading.local()

    def one(body: dict) -> tuple[float, int, dict]:
        if not hasattr(local, "session"):
            local.session = requests.Session()
        began = time.perf_counter()
        r = local.session.post(url, json=body, timeout=300)
        return (time.perf_counter() - began) * 1000, r.status_code, r.json()

    began = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        done = list(pool.map(one, bodies))
    wall = time.perf_counter() - began
    return [d[0] for d in done], [(d[1], d[2]) for d in done], wall


def server_log(port: int, kind: str = "bench") -> Path:
    """Where a `cpr serve` this bench starts writes its log."""
    return Path(os.environ.get("TMPDIR", "/tmp")) / f"cpr-serve-{kind}-{port}.log"


def post_json(conn: http.client.HTTPConnection, path: str, body: dict) -> tuple[int, dict]:
    """POST a JSON body on a persistent connection: (status, the JSON reply)."""
    conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    reply = conn.getresponse()
    return reply.status, json.loads(reply.read())


def lone_client(url: str, bodies: list[dict]) -> tuple[dict[str, list[float]], list]:
    """One client, one question at a time: latencies in ms by HTTP client, and responses.
    Questions alternate between a persistent `http.client` connection and a `requests`
    session, so both see the same server state: `requests` spends ~0.6 ms of its own per
    call (a 422 answered without work: 1.24 vs 0.59 ms, docs/benchmarks.md), the lighter
    client shows the server's latency."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=300)
    session = requests.Session()
    lat: dict[str, list[float]] = {"http.client": [], "requests": []}
    responses = []
    for i, body in enumerate(bodies):
        light = i % 2 == 0
        began = time.perf_counter()
        if light:
            status, data = post_json(conn, parts.path, body)
        else:
            r = session.post(url, json=body, timeout=300)
            status, data = r.status_code, r.json()
        lat["http.client" if light else "requests"].append((time.perf_counter() - began) * 1000)
        responses.append((status, data))
    conn.close()
    return lat, responses


def paired_lone(
    args: argparse.Namespace,
    warm: list[dict],
    solo: dict[int, list[dict]],
    ask_ids: list[str],
    label: str,
) -> None:
    """Both servers (--before's and this checkout's) up at once, each lone question asked of
    one then the other, the order alternating: drift of the machine between two runs (here
    2-3 ms of a lone p50 within minutes) falls on both alike. `http.client`, p50 by hops."""
    servers: list[tuple[subprocess.Popen, int]] = []
    conns: list[http.client.HTTPConnection] = []
    try:
        for tree in (args.before, None):
            port = free_port()
            servers.append((start_server(port, args.scorers, server_log(port), tree=tree), port))
        for _, port in servers:  # the load run's questions warm each server's scorers
            _, replies, _ = run_clients(f"http://127.0.0.1:{port}/ask", warm, args.clients)
            ask_ids += [b["ask_id"] for status, b in replies if status == 200]
        conns += [http.client.HTTPConnection("127.0.0.1", port, timeout=300) for _, port in servers]
        for hops, part in solo.items():
            lat: tuple[list[float], list[float]] = ([], [])
            sets: tuple[dict, dict] = ({}, {})
            for i, body in enumerate(part):
                for k in (0, 1) if i % 2 == 0 else (1, 0):
                    began = time.perf_counter()
                    status, data = post_json(conns[k], "/ask", body)
                    lat[k].append((time.perf_counter() - began) * 1000)
                    if status == 200:
                        ask_ids.append(data["ask_id"])
                        sets[k][data["question"]] = answer_set(data)
            if not lat[0]:
                continue
            before, now = (float(np.percentile(v, 50)) for v in lat)
            both = sets[0].keys() & sets[1].keys()
            same = sum(sets[0][q] == sets[1][q] for q in both)
            print(
                f"{label}paired lone client, both servers up, {hops}-hop ({len(part)} questions "
                f"each, order alternating): p50 {before:.1f} ms before, {now:.1f} ms now "
                f"({before / now:.2f}x lower); sets identical for {same} of {len(both)}"
            )
    finally:
        for conn in conns:
            conn.close()
        for proc, _ in servers:
            proc.terminate()
            proc.wait(timeout=30)


def cli_baseline(texts: list[str], alpha: float, hops: int | None) -> tuple[list[float], list[str]]:
    """Seconds per `cpr ask` process, and the Ask ids they recorded."""
    seconds, ids = [], []
    for text in texts:
        began = time.perf_counter()
        out = subprocess.run(
            [
                *CPR,
                "ask",
                text,
                "--dataset",
                DATASET,
                "--alpha",
                str(alpha),
                *(["--hops", str(hops)] if hops else []),
                "--json",
            ],
            capture_output=True,
            text=True,
        )
        seconds.append(time.perf_counter() - began)
        if out.returncode == 0:
            ids.append(json.loads(out.stdout)["ask_id"])
        else:
            print(f"  cpr ask failed ({out.returncode}): {out.stderr.strip()[:200]}")
    return seconds, ids


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU seconds of a process so far (Linux /proc); 0 when unknown."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError, TypeError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tree_cpu_seconds(pid: int) -> float:
    """cpu_seconds of a process and of all its descendants (`cpr serve --workers N`)."""
    parent = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    tree, grew = {pid}, True
    while grew:
        more = {p for p, pp in parent.items() if pp in tree} - tree
        tree |= more
        grew = bool(more)
    return sum(cpu_seconds(p) for p in tree)


def tree_rss_mb(pid: int) -> float:
    """Resident memory of a process and its children in MB (Linux /proc)."""
    total = 0.0
    for p in [pid, *_children(pid)]:
        try:
            status = Path(f"/proc/{p}/status").read_text()
        except OSError:
            continue
        total += next(
            (int(ln.split()[1]) for ln in status.splitlines() if ln.startswith("VmRSS")), 0
        )
    return total / 1024


def _children(pid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(stat.parent.name))
        except (OSError, ValueError, IndexError):
            continue
    return out


def neo4j_pid() -> int | None:
    from cpr_neo4j.neo4j_server import server

    info = server.status()
    return info.pid if info else None


def bench_server(
    args: argparse.Namespace,
    bodies: list[dict],
    warmup: list[dict],
    solo: dict[int, list[dict]],
    ask_ids: list[str],
    batch: bool = True,
    preload: bool = True,
    label: str = "",
    workers: int | None = None,
    tree: Path | None = None,
    sets: dict | None = None,
) -> tuple[float, float]:
    """Print and return (p50 ms, questions/s) of `cpr serve` under concurrent clients;
    solo: hop count -> the questions one lone client asks after; sets: filled with each
    timed question's answer set (`answer_set`)."""
    port = free_port()
    log = server_log(port)
    began = time.perf_counter()
    proc = start_server(port, args.scorers, log, batch, preload, workers, tree)
    print(f"cpr serve ready in {time.perf_counter() - began:.1f} s (log {log})")
    try:
        url = f"http://127.0.0.1:{port}/ask"
        # Warm-up on other questions: load every pooled scorer and open the driver's
        # connections before timing.
        _, warm, _ = run_clients(url, warmup, args.clients)
        ask_ids += [body["ask_id"] for status, body in warm if status == 200]
        db = neo4j_pid()
        cpu0 = tree_cpu_seconds(proc.pid), cpu_seconds(db), time.process_time()
        lat, responses, wall = run_clients(url, bodies, args.clients)
        cpu1 = tree_cpu_seconds(proc.pid), cpu_seconds(db), time.process_time()
        rss = tree_rss_mb(proc.pid)
        # One client, nothing else in flight: the latency a lone request sees, on questions
        # not asked yet (asking the timed ones again would find their neighbours cached).
        solo_lat = {}
        for hops, part in solo.items():
            solo_lat[hops], solo_responses = lone_client(url, part)
            ask_ids += [body["ask_id"] for status, body in solo_responses if status == 200]
        for hops, part in solo.items() if args.reworded else ():
            # a word no question has: a masked text (so an embedding and every path cost)
            # this server has not seen, as a question of a new form would be
            bodies_new = [
                b | {"question": f"{b['question']} (v{uuid.uuid4().hex[:8]})"} for b in part
            ]
            solo_lat[f"{hops}-hop, reworded"], solo_responses = lone_client(url, bodies_new)
            ask_ids += [body["ask_id"] for status, body in solo_responses if status == 200]
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    ok = [body for status, body in responses if status == 200]
    ask_ids += [body["ask_id"] for body in ok]
    if sets is not None:
        sets.update((b["question"], answer_set(b)) for b in ok)
    failed = dict(Counter(status for status, _ in responses if status != 200))
    qps = len(ok) / wall  # answered questions: an error is quick and answers nothing
    p50, p99 = float(np.percentile(lat, 50)), float(np.percentile(lat, 99))
    answers = statistics.mean(len(b["answers"]) for b in ok) if ok else 0.0
    kind = f"{args.hops}-hop" if args.hops else "every-hop-count"
    print(
        f"{label}{DATASET} {kind} test, {len(bodies)} questions, alpha {args.alpha}, "
        f"{args.clients} concurrent clients, {args.scorers} scorer(s) per model, "
        + ("searches batched" if batch else "each search alone (--no-batch)")
        + ("" if preload else ", --no-preload")
        + (f", --workers {workers}" if workers else ", its default workers")
        + (f", the server of {tree} (its defaults)" if tree else "")
    )
    print(
        f"  cpr serve: p50 {p50:.0f} ms, p99 {p99:.0f} ms, {qps:.2f} questions/s "
        f"({len(ok)} answered, mean set size {answers:.1f}, cpr serve RSS {rss:.0f} MB"
        + (f", errors by status {failed}" if failed else "")
        + ")"
    )
    serve_ms, db_ms, client_ms = (
        (b - a) * 1000 / max(len(ok), 1) for a, b in zip(cpu0, cpu1, strict=True)
    )
    cores = os.cpu_count() or 1
    print(
        f"  CPU per answered question: cpr serve {serve_ms:.1f} ms + Neo4j {db_ms:.1f} ms; "
        f"{cores} cores could answer at most {cores * 1000 / (serve_ms + db_ms):.0f} questions/s"
        f" if nothing else ran (the {args.clients} client threads here, on the same cores, "
        f"used {client_ms:.1f} ms)"
    )
    # Closed loop (each client sends its next question when the answer comes): by Little's
    # law mean latency = clients / throughput, so a latency target fixes the throughput.
    print(
        f"  {args.clients} closed-loop clients: mean latency {statistics.mean(lat):.0f} ms vs "
        f"clients / throughput {args.clients * 1000 / qps:.0f} ms (Little's law); a mean under "
        f"20 ms would take {args.clients * 1000 / 20:.0f} questions/s"
    )
    for hops, by_client in solo_lat.items():
        if by_client["http.client"]:
            shown = ", ".join(
                f"{name} p50 {np.percentile(v, 50):.1f} ms p99 {np.percentile(v, 99):.0f} ms"
                for name, v in by_client.items()
                if v
            )
            n = sum(len(v) for v in by_client.values())
            kind = hops if isinstance(hops, str) else f"{hops}-hop"
            print(f"  one client alone, {kind} ({n} questions, alternating): {shown}")
    return p50, qps


def answer_set(body: dict) -> tuple:
    """What two servers must agree on: the threshold, each answer with its score and path,
    and the best answer outside an empty set."""
    shown = body["answers"] + ([body["best_outside"]] if body.get("best_outside") else [])
    return body["tau"], tuple((a["id"], a["score"], a["path"]) for a in shown)


def fault_run(args: argparse.Namespace, bodies: list[dict], ask_ids: list[str]) -> None:
    """Clients ask in a loop while Neo4j is stopped and started again; prints the counts of
    answered and failed requests and of the :Ask records written in that time."""
    port = free_port()
    log = server_log(port, "fault")
    proc = start_server(port, args.scorers, log)
    url = f"http://127.0.0.1:{port}/ask"
    with GraphStore() as store:
        began_at = store.query("RETURN toString(datetime()) AS t")[0][0]["t"]
    outcomes: list[tuple[float, int, str | None]] = []
    stop = threading.Event()
    began = time.perf_counter()

    def client(k: int) -> None:
        session = requests.Session()
        i = k
        while not stop.is_set():
            try:
                r = session.post(url, json=bodies[i % len(bodies)], timeout=60)
                ask_id = r.json().get("ask_id") if r.status_code == 200 else None
                outcomes.append((time.perf_counter() - began, r.status_code, ask_id))
            except requests.RequestException:
                outcomes.append((time.perf_counter() - began, 0, None))
            i += args.clients

    threads = [threading.Thread(target=client, args=(k,)) for k in range(args.clients)]
    try:
        for t in threads:
            t.start()
        time.sleep(args.fault_at)
        down = time.perf_counter() - began
        subprocess.run([*CPR, "neo4j", "stop"], check=True, capture_output=True)
        time.sleep(args.fault_for)
        subprocess.run([*CPR, "neo4j", "start"], check=True, capture_output=True)
        up = time.perf_counter() - began
        time.sleep(args.fault_at)
        stop.set()
        for t in threads:
            t.join()
    finally:
        stop.set()
        proc.terminate()
        proc.wait(timeout=30)
    returned = [a for _, status, a in outcomes if status == 200]
    ask_ids += returned
    with GraphStore() as store:
        rows = store.query(
            "MATCH (a:Ask) WHERE a.created >= $t AND a.question IN $qs "
            "RETURN a.id AS id, count{ (a)-[:ANSWER]->() } AS answers, a.answer_count AS n",
            {"t": began_at, "qs": sorted({b["question"] for b in bodies})},
        )[0]
    written = [r["id"] for r in rows]
    ask_ids += sorted(set(written) - set(returned))
    by_status = Counter(status for _, status, _ in outcomes)
    after = [status for t, status, _ in outcomes if t > up + 5]
    print(
        f"fault run: {len(outcomes)} requests from {args.clients} clients; Neo4j stopped at "
        f"{down:.0f} s and back (started) at {up:.0f} s"
    )
    print(f"  answered {by_status.get(200, 0)}, by status {dict(sorted(by_status.items()))}")
    print(
        f"  :Ask records written {len(written)} ({len(set(written))} distinct ids); answered "
        f"requests with a record {len(set(returned) & set(written))}; records no request "
        f"reported {len(set(written) - set(returned))}; records with fewer ANSWER "
        f"relationships than answer_count {sum(r['answers'] < r['n'] for r in rows)}"
    )
    print(
        f"  after recovery (+5 s): {sum(s == 200 for s in after)} of {len(after)} answered, "
        "without restarting cpr serve"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--questions", type=int, default=200)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--baseline", type=int, default=5, help="`cpr ask` processes to time")
    ap.add_argument("--scorers", type=int, default=4, help="cpr serve --scorers")
    ap.add_argument("--solo", type=int, default=50, help="questions asked by one lone client")
    ap.add_argument("--alpha", type=float, default=0.1)
    ap.add_argument(
        "--hops", type=int, default=2, help="hop count of the questions asked (0: every one)"
    )
    ap.add_argument(
        "--both-calibrations",
        action="store_true",
        help="run under the every-hop calibration, then under the --hops N one",
    )
    ap.add_argument(
        "--no-preload-too",
        action="store_true",
        help="also run `cpr serve --no-preload` and print the ratio",
    )
    ap.add_argument(
        "--as-hops",
        action="store_true",
        help="send the hop count with each request (a calibration for N-hop questions); "
        "default: none, the every-hop-count calibration answers, as `cpr ask` does",
    )
    ap.add_argument(
        "--workers",
        type=lambda v: [int(n) for n in v.split(",") if int(n) >= 1],
        default=[],
        help="also run `cpr serve --workers N` for each N of this list (e.g. 1,4); the first run "
        "is the default (one per core, at most MAX_DEFAULT_WORKERS)",
    )
    ap.add_argument("--keep-asks", action="store_true", help="keep the :Ask records")
    ap.add_argument(
        "--reworded",
        action="store_true",
        help="the lone client also asks its questions with a made-up word added: a wording "
        "the server has never seen (an embedding and every path cost to compute)",
    )
    ap.add_argument(
        "--unbatched",
        action="store_true",
        help="also run `cpr serve --no-batch` (each search alone) and print the ratio",
    )
    ap.add_argument("--fault", action="store_true", help="stop and start Neo4j under load")
    ap.add_argument("--fault-at", type=float, default=15, help="seconds of load before/after")
    ap.add_argument("--fault-for", type=float, default=10, help="seconds Neo4j stays down")
    ap.add_argument("--dataset", default=DATASET, help="dataset whose test questions are asked")
    ap.add_argument(
        "--before",
        type=Path,
        help="first run `cpr serve` from this other checkout (e.g. a `git worktree` of an "
        "earlier revision), then this one's with its defaults, and print the ratio",
    )
    ap.add_argument(
        "--paired",
        type=int,
        default=0,
        help="with --before: also ask this many more lone questions per hop count of both "
        "servers, up at once, alternating (drift between runs cancels)",
    )
    args = ap.parse_args()
    globals()["DATASET"] = args.dataset

    with GraphStore() as store:
        by_hops = {
            h: records.questions(store, DATASET, "test", h)
            for h in ((args.hops,) if args.hops else (1, 2, 3))
        }
    by_hops = {h: rows for h, rows in by_hops.items() if rows}
    if not by_hops:
        sys.exit(f"no such test questions of {DATASET!r} in Neo4j: cpr ingest {DATASET}")
    lone = args.solo // len(by_hops)
    rows = [r for group in itertools.zip_longest(*by_hops.values()) for r in group if r]
    qs = rows[: args.questions]
    warmup = rows[-2 * args.clients :]
    # lone questions of each hop count: neither timed nor warm-up ones
    used = {r.id for r in qs + warmup}
    fresh = {h: [r for r in group if r.id not in used] for h, group in by_hops.items()}
    alone = {h: group[:lone] for h, group in fresh.items()}
    pairs = {h: group[lone : lone + args.paired] for h, group in fresh.items()}

    def body(q, as_hops: bool) -> dict:
        out = {"question": q.text, "dataset": DATASET, "alpha": args.alpha}
        return out | ({"hops": q.hops} if as_hops else {})

    runs = [("every-hop calibration: ", False)]  # (label, send the hop count)
    if args.as_hops:
        runs = [(f"{args.hops}-hop calibration: ", True)]
    elif args.both_calibrations:
        runs.append((f"{args.hops}-hop calibration: ", True))
    if (args.as_hops or args.both_calibrations) and not args.hops:
        sys.exit("--as-hops and --both-calibrations need --hops N")
    ask_ids: list[str] = []
    first: tuple[float, float] | None = None  # (p50, questions/s) of the first run
    try:
        if args.fault:
            fault_run(args, [body(q, args.as_hops) for q in qs], ask_ids)
            return
        for label, as_hops in runs:
            bodies = [body(q, as_hops) for q in qs]
            warm = [body(q, as_hops) for q in warmup]
            solo = {h: [body(q, as_hops) for q in part] for h, part in alone.items()}
            if args.before:  # the other checkout first, then this one: the same run
                old_sets: dict = {}
                new_sets: dict = {}
                before = bench_server(args, bodies, warm, solo, ask_ids, label=label,
                                      workers=None, tree=args.before, sets=old_sets)  # fmt: skip
                p50_d, qps_d = bench_server(
                    args, bodies, warm, solo, ask_ids, label=label, workers=None, sets=new_sets
                )
                print(
                    f"  ratio, this checkout's defaults against {args.before}'s: "
                    f"{qps_d / before[1]:.2f}x the questions/s, p50 {before[0] / p50_d:.2f}x lower"
                )
                both = old_sets.keys() & new_sets.keys()
                same = sum(old_sets[q] == new_sets[q] for q in both)
                print(
                    f"  answer sets (tau, answers, scores, paths) identical for {same} of "
                    f"{len(both)} questions both answered"
                )
                if args.paired:
                    paired = {h: [body(q, as_hops) for q in part] for h, part in pairs.items()}
                    paired_lone(args, bodies, paired, ask_ids, label)
            p50, qps = bench_server(args, bodies, warm, solo, ask_ids, label=label)
            first = first or (p50, qps)
            # the same run's baselines: (wanted, bench_server options, what the ratio compares)
            baselines = [
                (args.no_preload_too, {"preload": False}, "preloaded against --no-preload"),
                (args.unbatched, {"batch": False}, "batched against each search alone"),
            ]
            for wanted, options, what in baselines:
                if wanted:
                    p50_b, qps_b = bench_server(
                        args, bodies, warm, solo, ask_ids, label=label, **options
                    )
                    print(
                        f"  ratio, {what}: {qps / qps_b:.2f}x the questions/s, "
                        f"p50 {p50_b / p50:.2f}x lower"
                    )
            for n in args.workers:
                _, qps_n = bench_server(args, bodies, warm, {}, ask_ids, label=label, workers=n)
                print(
                    f"  ratio, {n} worker processes against the default: {qps_n / qps:.2f}x the "
                    "questions/s"
                )
        if args.baseline > 0 and first is not None:
            p50, qps = first
            texts = [q.text for q in qs[: args.baseline]]
            seconds, cli_ids = cli_baseline(texts, args.alpha, args.hops if args.as_hops else None)
            ask_ids += cli_ids
            cli_qps = len(seconds) / sum(seconds)
            print(
                f"  one `cpr ask` process per question ({len(seconds)} questions, one after "
                f"another): median {statistics.median(seconds):.2f} s per question, "
                f"{cli_qps:.3f} questions/s"
            )
            print(
                f"  ratio: cpr serve answers {qps / cli_qps:.0f}x the questions/s; "
                f"p50 latency {statistics.median(seconds) * 1000 / p50:.0f}x lower"
            )
        print(f"  load average after the run: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    finally:
        if ask_ids and not args.keep_asks:
            with GraphStore() as store:
                store.write("delete_asks", ids=ask_ids)


if __name__ == "__main__":
    main()
