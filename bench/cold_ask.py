"""A cold `cpr ask` (a fresh process: start to exit) against a bare
`python -c "import numpy, neo4j"`, interleaved run by run so that load on the machine hits
both alike, and where the ask's time goes. A third process, the floor, is what any cold ask
of a new question pays at least: that import, the encoder's ONNX session and one embedding.

    python bench/cold_ask.py DATASET "QUESTION" [--runs 7] [--alpha 0.5] [--before DIR]

The ask runs as `python -m cpr_neo4j ask QUESTION --dataset DATASET --alpha A --json`
against the caller's CPR_HOME and server (it needs a calibration of DATASET). Prints the
median wall of each, their ratio, and for one more ask its phases: the imports
(`-X importtime`, the biggest top-level packages), the linking (linking/resolve.py resolve,
its index record included) and the rest (connecting, search, scoring, the record).
--before DIR: also the ask of the checkout in DIR (e.g. a `git worktree` of an earlier
commit), interleaved with the others."""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from collections import Counter

PHASES = r"""
import sys, time, atexit
t0 = time.perf_counter()
from cpr_neo4j.linking import resolve as linking
from cpr_neo4j.cli.main import main
t_import = time.perf_counter() - t0
spent = {"link": 0.0}
resolve = linking.resolve
def timed(*a, **k):
    t = time.perf_counter()
    try:
        return resolve(*a, **k)
    finally:
        spent["link"] += time.perf_counter() - t
linking.resolve = timed
import cpr_neo4j.linking.readings as linked
linked.resolve = timed
def report():
    print("PHASES " + repr({"imports": t_import, "link": spent["link"],
                            "total": time.perf_counter() - t0}), file=sys.stderr)
atexit.register(report)
sys.argv = ["cpr"] + sys.argv[1:]
main()
"""


FLOOR = """
import numpy, neo4j
from cpr_neo4j.model.encoder import TextEncoder
TextEncoder().embed_now(["who directed ENT"])
"""


def wall(cmd: list[str], env: dict | None = None) -> float:
    began = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    took = time.perf_counter() - began
    if done.returncode not in (0,):
        raise SystemExit(f"{' '.join(cmd[:4])} ... failed: {done.stderr.strip()[-400:]}")
    return took


def imports(ask: list[str]) -> tuple[float, list[tuple[str, float]]]:
    """(seconds importing, the top-level packages that took longest, cumulative)."""
    err = subprocess.run(
        [sys.executable, "-X", "importtime", *ask[1:]], capture_output=True, text=True
    ).stderr
    top: Counter = Counter()
    for line in err.splitlines():
        m = re.match(r"import time:\s+\d+ \|\s+(\d+) \|( *)(\S+)", line)
        if m and len(m.group(2)) == 1:  # a top-level import (one space of indent)
            top[m.group(3).split(".")[0]] += int(m.group(1)) / 1e6
    return sum(top.values()), top.most_common(8)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dataset")
    ap.add_argument("question")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--alpha", default="0.5")
    ap.add_argument("--before", help="a checkout whose ask runs too (PYTHONPATH=DIR)")
    a = ap.parse_args()
    args = ["ask", a.question, "--dataset", a.dataset, "--alpha", a.alpha, "--json"]
    ask = [sys.executable, "-m", "cpr_neo4j", *args]
    bare = [sys.executable, "-c", "import numpy, neo4j"]
    # what any cold ask of a new question pays at least: the bare import, then the encoder's
    # ONNX session opened and one text embedded (no Neo4j, no search, no scoring)
    floor = [sys.executable, "-c", FLOOR]
    before = dict(os.environ, PYTHONPATH=a.before) if a.before else None
    wall(ask)  # warm the OS file cache and the server, as every run after it finds them
    if before:
        wall(ask, before)
    runs: dict[str, list[float]] = {"bare": [], "floor": [], "ask": []}
    runs |= {"before": []} if before else {}
    for _ in range(a.runs):
        runs["bare"].append(wall(bare))
        runs["floor"].append(wall(floor))
        runs["ask"].append(wall(ask))
        if before:
            runs["before"].append(wall(ask, before))
    med = {k: statistics.median(v) for k, v in runs.items()}
    print(f"{a.runs} runs each, interleaved; load average {os.getloadavg()}")
    for k, v in runs.items():
        print(f"  {k:6s} median {med[k]:.3f} s  runs {' '.join(f'{x:.2f}' for x in v)}")
    print(f"  ask / bare import: {med['ask'] / med['bare']:.2f}x")
    print(f"  floor (bare, encoder session, one text) / bare: {med['floor'] / med['bare']:.2f}x")
    if before:
        print(f"  before ({a.before}) / bare import: {med['before'] / med['bare']:.2f}x")
    err = subprocess.run(
        [sys.executable, "-c", PHASES, *args], capture_output=True, text=True
    ).stderr
    phases = next((ln[7:] for ln in err.splitlines() if ln.startswith("PHASES ")), "{}")
    p = eval(phases, {})  # noqa: S307 (our own repr of a dict of floats)
    total, top = imports(ask)
    print(
        f"  one ask's phases: imports {p.get('imports', 0):.3f} s, linking "
        f"{p.get('link', 0) * 1e3:.1f} ms, whole process body {p.get('total', 0):.3f} s"
    )
    print(f"  -X importtime, top-level packages ({total:.3f} s in all):")
    print("   " + json.dumps({k: round(v, 3) for k, v in top}))


if __name__ == "__main__":
    main()
