"""Paths scored per second: one batched call for 1,024 paths vs one call per path.

    python bench/score.py [--paths 1024] [--repeats 5]

Uses the real encoder and an RCVNet with non-zero output weights (a zero output layer
would cost the same, but this keeps the numbers honest). "warm" = embeddings already
cached (the steady state inside TreeG), "cold" = the batch includes encoding its
path texts. Runs on CPU, and on CUDA too when available.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cpr_neo4j.model.encoder import TextEncoder  # noqa: E402
from cpr_neo4j.model.rcvnet import RCVNet  # noqa: E402
from cpr_neo4j.model.scorer import PathScorer  # noqa: E402
from cpr_neo4j.search.base import Step  # noqa: E402

RELATIONS = [
    "directed_by",
    "starred_actors",
    "written_by",
    "has_genre",
    "release_year",
    "in_language",
    "has_tags",
    "has_imdb_rating",
    "has_imdb_votes",
]


def relpaths(n: int) -> list[tuple[Step, ...]]:
    steps = [Step(r, f) for r in RELATIONS for f in (True, False)]
    out: list[tuple[Step, ...]] = []
    for hops in (1, 2, 3):
        out += list(itertools.product(steps, repeat=hops))
    return out[-n:]  # mostly 3-hop paths: the longest texts


def timed(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def bench(device: str, n: int, repeats: int) -> None:
    encoder = TextEncoder(device=device)
    net = RCVNet()
    torch.manual_seed(0)
    torch.nn.init.normal_(net.out.weight, std=0.01)
    scorer = PathScorer(encoder, {}, {}, net, device=device)
    ctx = scorer.question("who directed the movies starred by ENT")
    paths = relpaths(n)

    start = time.perf_counter()
    scorer.score(ctx, paths)  # cold: encodes every path text and last step
    cold = time.perf_counter() - start
    scorer.score(ctx, paths)  # warm-up of kernels / allocator
    warm = timed(lambda: scorer.score(ctx, paths), repeats)
    single = timed(lambda: [scorer.score(ctx, [p]) for p in paths], max(1, repeats // 2))
    vsem = timed(lambda: scorer.v_sem(ctx, paths), repeats)

    threads = f", {torch.get_num_threads()} threads" if device == "cpu" else ""
    print(f"[{device}{threads}] {n} distinct relation paths (1-3 hops)")
    print(f"  batched, warm cache : {n / warm:12,.0f} paths/s  ({warm * 1e3:8.2f} ms per batch)")
    print(f"  batched, V_sem only : {n / vsem:12,.0f} paths/s  ({vsem * 1e3:8.2f} ms per batch)")
    print(
        f"  batched, cold cache : {n / cold:12,.0f} paths/s  ({cold * 1e3:8.2f} ms, with encoding)"
    )
    print(f"  one path per call   : {n / single:12,.0f} paths/s  ({single * 1e3:8.2f} ms for all)")
    print(f"  batched / one-by-one: {single / warm:12.1f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--paths", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    bench("cpu", args.paths, args.repeats)
    if torch.cuda.is_available():
        bench("cuda", args.paths, args.repeats)
    else:
        print("[cuda] not available: skipped")


if __name__ == "__main__":
    main()
