"""Matrix products whose result does not depend on the BLAS kernel, the batch or the threads.

A float32 matrix product from BLAS sums each output in an order chosen by the kernel: the
row's position inside the kernel's tile, the thread split and the kernel itself (OpenBLAS
picks one per CPU: Haswell, SkylakeX, Zen...) all change it, so a row's result moves by
~1e-7 relative with the rows that come with it (experiments/batch_invariance.py measures it).

Here a product is computed exactly on rounded operands and rounded once (the first slice
of Ozaki et al.'s error-free splitting, 2012). Each operand is rounded to integers of at
most `beta` bits times a power of two shared by the row (left operand) or the column
(right operand): 2**(e - beta), with every |entry| of that row or column below 2**e. With
k * 2**(2 beta) <= 2**53 every partial sum of the product is an integer multiple of the
row's and column's powers of two below 2**53, so float64 BLAS computes it without
rounding, in any order, with or without FMA, on any thread. Rounding that to float32 gives
a result that is a function of the row and the matrix alone: the same bits in every batch,
position, thread count, BLAS kernel and CPU.

The operand rounding is at most 2**-beta-1 of the row's (column's) largest entry: beta = 22
for k <= 512 (the scorer's products), 21 up to 2048, so ~1e-7 relative, the order of
float32's own rounding. Cost: one float64 product instead of one float32 product.
"""

from __future__ import annotations

import math

import numpy as np

MANTISSA = 53  # float64


def slice_bits(k: int) -> int:
    """The largest beta with k * 2**(2 beta) <= 2**53: products of length k are exact."""
    return (MANTISSA - math.ceil(math.log2(max(k, 2)))) // 2


def rounded(a: np.ndarray, axis: int, beta: int) -> np.ndarray:
    """a in float64, rounded to integers of at most beta bits times 2**(e - beta) (ties to
    even), e the exponent of the largest |entry| along `axis` (largest < 2**e). Scaling by
    a power of two is exact, so the rounding is the only change."""
    a = np.asarray(a, dtype=np.float64)
    _, e = np.frexp(np.max(np.abs(a), axis=axis, keepdims=True))
    scale = np.ldexp(1.0, beta - e)
    out = np.rint(a * scale)
    out /= scale
    return out


class ExactMatrix:
    """A fixed right operand w (k, n), rounded once: `rows @ w` for any rows, exactly."""

    def __init__(self, w: np.ndarray):
        w = np.asarray(w, dtype=np.float32)
        if w.ndim != 2:
            raise ValueError(f"a matrix is 2-d, not {w.shape}")
        self.shape = w.shape
        self.beta = slice_bits(w.shape[0])
        self.w = np.ascontiguousarray(rounded(w, 0, self.beta))

    def times(self, rows: np.ndarray) -> np.ndarray:
        """rows (m, k) @ w as float32 (m, n): each row's result depends on that row alone."""
        rows = np.asarray(rows)
        k, n = self.shape
        if rows.ndim != 2 or rows.shape[1] != k:
            raise ValueError(f"rows {rows.shape} do not fit a ({k}, {n}) matrix")
        if not len(rows):
            return np.zeros((0, n), dtype=np.float32)
        return _product(rounded(rows, 1, self.beta), self.w).astype(np.float32)


def _product(a: np.ndarray, w: np.ndarray) -> np.ndarray:
    """a @ w in float64 for exactly representable products (any order gives the same bits),
    shaped for the BLAS: a search scores a few rows at a time, where OpenBLAS's gemm spends
    most of its time packing w. Two or three rows go one vector-matrix product each (1536
    wide: 139 vs 277 us for two rows on an AMD EPYC); 5-7 rows past a multiple of 8 are
    padded with zero rows to it, the kernels' tile (6 rows: 410 us, 8 rows: 293 us; the same
    on the Haswell kernel). bench/exact_shapes.py measures it."""
    m = len(a)
    if m in (2, 3):
        return np.stack([row @ w for row in a])
    if m < 64 and m % 8 >= 5:
        padded = np.zeros((m + 8 - m % 8, a.shape[1]))
        padded[:m] = a
        return (padded @ w)[:m]
    return a @ w


def product(rows: np.ndarray, w: np.ndarray | ExactMatrix) -> np.ndarray:
    """rows @ w, float32, the same bits on every CPU and BLAS and in every batch (w rounded
    here unless it comes as an ExactMatrix)."""
    matrix = w if isinstance(w, ExactMatrix) else ExactMatrix(w)
    return matrix.times(rows)


def row_dots(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise dot products (n,) of two (n, k) float32 arrays as float32: products exact in
    float64, summed per row by numpy's pairwise sum (a fixed order that depends on k only)."""
    a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return np.add.reduce(a64 * b64, axis=1).astype(np.float32)
