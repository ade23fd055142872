"""How long loading the bundled MetaQA takes (`load_metaqa()`, parse and checks, no Neo4j):
the figure tests/test_loaders.py once asserted as a wall-clock limit, which a loaded CI
machine could break without anything being wrong.

    python bench/load_metaqa.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

from cpr_neo4j.loaders.metaqa import load_metaqa


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    a = parser.parse_args()
    took = []
    for _ in range(a.repeats):
        began = time.perf_counter()
        ds = load_metaqa()
        took.append(time.perf_counter() - began)
    print(
        f"load_metaqa: {ds.triples.height:,} triples, {ds.questions.height:,} questions; "
        f"median {statistics.median(took):.2f} s of {a.repeats} (min {min(took):.2f} s)"
    )


if __name__ == "__main__":
    main()
