"""The exact products' row shaping (model/exact.py `_product`) against one plain product.

    python bench/exact_shapes.py [--repeat 300] [--threads 1]

Times `rows @ w` in float64 for the RCVNet head's two weight shapes (256 x 1536, the FiLM
conditioner; 256 x 256, a hidden layer) at the row counts a lone search scores (1-24) and a
few batch sizes, plain and shaped, and prints the ratio; checks the bits are the same.
`cpr serve` runs one BLAS thread per worker, hence the default --threads 1.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from cpr_neo4j.model import exact, threads


def timed(f, repeat: int) -> float:
    f()
    began = time.perf_counter()
    for _ in range(repeat):
        f()
    return (time.perf_counter() - began) / repeat * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=300)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    counts = [*range(1, 25), 50, 53, 100, 101]
    with threads.limited(args.threads):
        for k, n in ((256, 1536), (256, 256)):
            w = exact.ExactMatrix(rng.uniform(-1, 1, size=(k, n)).astype(np.float32))
            plain_us = shaped_us = 0.0
            print(f"rows @ ({k} x {n}), float64, {args.threads} BLAS thread(s): us plain -> shaped")
            line = []
            for m in counts:
                a = exact.rounded(rng.normal(size=(m, k)), 1, w.beta)
                assert np.array_equal(exact._product(a, w.w), a @ w.w)
                p = timed(lambda a=a, b=w.w: a @ b, args.repeat)
                s = timed(lambda a=a, b=w.w: exact._product(a, b), args.repeat)
                if m <= 24:
                    plain_us, shaped_us = plain_us + p, shaped_us + s
                line.append(f"{m}: {p:.0f} -> {s:.0f}")
            print("  " + ", ".join(line))
            print(f"  rows 1-24 in all: {plain_us:.0f} -> {shaped_us:.0f} us "
                  f"({plain_us / shaped_us:.2f}x)")  # fmt: skip


if __name__ == "__main__":
    main()
