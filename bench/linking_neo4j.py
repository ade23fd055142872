"""Text linking against Neo4j: the linker as `cpr ask` runs it (its candidates from the index
Neo4j keeps, graph/entity_index.py) against the linker of an earlier commit (default
7508136, names-v3: a Python index of every name, built per process), on the same server's
dataset, in one run.

    python bench/linking_neo4j.py metaqa-plain [--sample 600]   # the issue's MetaQA sample
    python bench/linking_neo4j.py webqsp-names [--splits train,dev,test] [--drop-cal MODEL]
    python bench/linking_neo4j.py DATASET                        # every question of it

Per linker: correct (one reading, the gold topic), tied with the gold topic among the
readings (the search decides those), tied without it, wrong, refused; how many questions the
two link identically, and each difference. Also the new rules on an in-memory index built
from the same server rows (`memory`): it must agree with the stored index on every
question. Times: the old linker's index build, and per question p50 / p95 of each linker
(the stored one includes its query). MetaQA's sample is the issue's: `random.seed(0);
random.sample(loader test rows, 600)`, brackets removed, linked in `metaqa-plain`."""

from __future__ import annotations

import argparse
import importlib
import random
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from cpr_neo4j.config import Neo4jSettings
from cpr_neo4j.errors import CprError
from cpr_neo4j.graph import entity_index, fingerprint, records
from cpr_neo4j.graph.store import GraphStore
from cpr_neo4j.linking import resolve

REPO = Path(__file__).resolve().parents[1]
FILES = ("entity_index", "linking", "name_rules")


def old_linker(rev: str):
    """graph/linking.py of commit `rev` (with its entity_index and name_rules; a commit
    from before linking/ existed), importable beside today's: a copy under a temporary
    package."""
    pkg = f"oldlink_{rev[:7]}"
    root = Path(tempfile.mkdtemp()) / pkg
    root.mkdir()
    (root / "__init__.py").write_text("")
    for f in FILES:
        text = subprocess.run(
            ["git", "-C", str(REPO), "show", f"{rev}:cpr_neo4j/graph/{f}.py"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for g in FILES:
            text = text.replace(f"from cpr_neo4j.graph import {g}", f"from {pkg} import {g}")
            text = text.replace(f"cpr_neo4j.graph.{g}", f"{pkg}.{g}")
        (root / f"{f}.py").write_text(text)
    sys.path.insert(0, str(root.parent))
    return importlib.import_module(f"{pkg}.linking"), importlib.import_module(f"{pkg}.entity_index")


def outcome(call, gold: set[str]) -> tuple[str, list[list[str]]]:
    try:
        found = call()
    except CprError as exc:  # the kind of refusal, without the names it quotes
        return "refused: " + re.sub(r"'[^']*'|\"[^\"]*\"", "NAME", str(exc).split(":")[0]), []
    choices = [sorted(t["id"] for t in c.topics) for c in found.choices]
    if len(choices) == 1:
        return ("correct" if set(choices[0]) == gold else "wrong"), choices
    hit = any(set(c) == gold for c in choices)
    return ("tied, gold among them" if hit else "tied, gold not among them"), choices


def questions(store, a) -> list[tuple[str, list[str]]]:
    if a.dataset == "metaqa-plain" and a.sample:
        from cpr_neo4j.loaders.metaqa import load_metaqa

        rows = load_metaqa(splits=("test",)).questions.select("text", "topics").rows()
        random.seed(0)
        rows = random.sample(rows, a.sample)
        return [(t.replace("[", "").replace("]", ""), list(tp)) for t, tp in rows]
    rows = [q for s in a.splits.split(",") for q in records.questions(store, a.dataset, s)]
    if a.drop_cal:  # questions outside a model's calibration share
        from cpr_neo4j.model.store import read_config

        held = set(read_config(a.drop_cal)["meta"]["calibration_ids"])
        rows = [q for q in rows if q.id not in held]
    return [(q.text, q.topics) for q in rows]


def pct(v: list[float], p: float) -> float:
    v = sorted(v)
    return v[min(len(v) - 1, int(p * len(v)))] * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dataset")
    ap.add_argument("--sample", type=int, default=600, help="metaqa-plain: the issue's sample")
    ap.add_argument("--splits", default="train,dev,test")
    ap.add_argument("--drop-cal", metavar="MODEL", help="leave out MODEL's calibration share")
    ap.add_argument("--old", default="7508136", help="the commit of the linker compared with")
    ap.add_argument("--show", type=int, default=20, help="differences printed")
    a = ap.parse_args()
    old, old_index = old_linker(a.old)
    with GraphStore(Neo4jSettings.load()) as store:
        graph = fingerprint.current(store, a.dataset)
        qs = questions(store, a)
        began = time.perf_counter()
        stored = entity_index.get(store, a.dataset, graph)  # built on first use if missing
        first = time.perf_counter() - began
        began = time.perf_counter()
        built = old_index.build(store, a.dataset)
        old_build = time.perf_counter() - began
        memory = entity_index.EntityIndex(
            list(built.name_of), list(built.name_of.values()), list(built.degree.values()),
            records.relation_text(store, a.dataset),
        )  # fmt: skip
        runs = {
            "old": lambda t: old.resolve(store, a.dataset, t, index=built),
            "new": lambda t: resolve.resolve(store, a.dataset, t, graph=graph, index=stored),
            "memory": lambda t: resolve.resolve(store, a.dataset, t, index=memory),
        }
        counts = {k: Counter() for k in runs}
        times = {k: [] for k in runs}
        same, differ, stored_differs = 0, [], 0
        for text, gold in qs:
            got = {}
            for k, run in runs.items():
                t0 = time.perf_counter()
                got[k] = outcome(lambda: run(text), set(gold))  # noqa: B023
                times[k].append(time.perf_counter() - t0)
                counts[k][got[k][0]] += 1
            stored_differs += got["new"] != got["memory"]
            if got["old"] == got["new"]:
                same += 1
            else:
                differ.append((text, gold, got["old"], got["new"]))
    n = len(qs)
    print(f"{a.dataset}: {n} questions; old = {a.old} ({old.LINKER}), new = {resolve.LINKER}")
    print(f"  old index build (per process): {old_build:.2f} s for {len(built):,} entities")
    print(f"  new: first question's index record {first * 1e3:.1f} ms (built if missing)")
    for k in runs:
        print(
            f"  {k:6s} {dict(counts[k].most_common())}  per question p50 "
            f"{pct(times[k], 0.5):.2f} ms, p95 {pct(times[k], 0.95):.2f} ms"
        )
    print(f"  identical old/new: {same} of {n}; stored vs in-memory differ on {stored_differs}")
    for d in differ[: a.show]:
        print("   ", d)


if __name__ == "__main__":
    main()
