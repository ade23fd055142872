"""model.exact: matrix products that are the same bits in every batch, at every row position,
with every thread count and BLAS kernel, within one float32 rounding of the exact product."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from cpr_neo4j.model import exact, threads


def operands(seed: int, m: int, k: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(m, k)) * np.exp(rng.normal(size=(m, 1)))  # rows of other scales
    x[:, ::7] *= 1e-4  # small entries beside large ones
    w = rng.uniform(-1, 1, size=(k, n)) / np.sqrt(k)
    return x.astype(np.float32), w.astype(np.float32)


@pytest.mark.parametrize("k", [3, 256, 384, 1152])
def test_rounded_operands_make_every_partial_sum_exact(k):
    beta = exact.slice_bits(k)
    assert k * 2.0 ** (2 * beta) <= 2.0**53 < k * 2.0 ** (2 * beta + 2)
    x, _ = operands(k, 5, k, 4)
    r = exact.rounded(x, 1, beta)
    top = np.max(np.abs(x.astype(float)), axis=1, keepdims=True)
    _, e = np.frexp(top)
    ints = np.ldexp(r, beta - e)
    assert np.all(np.abs(ints) <= 2.0**beta) and np.all(ints == np.rint(ints))
    assert np.all(np.abs(x - r) <= np.ldexp(1.0, e - beta - 1))  # half a step at most


def test_the_product_is_the_exact_one_on_rounded_operands_rounded_once():
    x, w = operands(1, 6, 384, 5)
    m = exact.ExactMatrix(w)
    xr = exact.rounded(x, 1, m.beta)
    wide = xr @ m.w  # float64 BLAS, in whatever order its kernel sums
    for i in range(6):
        for j in range(5):
            pairs = zip(xr[i], m.w[:, j], strict=True)
            true = sum(Fraction(float(a)) * Fraction(float(b)) for a, b in pairs)
            assert Fraction(float(wide[i, j])) == true  # no rounding at all
    assert np.array_equal(m.times(x), wide.astype(np.float32))  # then one


def test_a_row_gives_the_same_bits_in_any_batch_position_and_thread_count():
    x, w = operands(2, 1024, 384, 256)
    matrix = exact.ExactMatrix(w)
    whole = matrix.times(x)
    rng = np.random.default_rng(0)
    order = rng.permutation(1024)
    assert np.array_equal(matrix.times(x[order]), whole[order])
    for n in (1, 2):
        with threads.limited(n):
            alone = np.concatenate([matrix.times(x[i : i + 1]) for i in range(0, 1024, 97)])
        assert np.array_equal(alone, whole[::97])
    assert np.array_equal(exact.product(x[:3], w), whole[:3])
    plain = x.astype(float) @ w.astype(float)
    assert np.abs(whole - plain).max() <= 2e-6 * np.abs(plain).max()


def test_every_shape_of_a_few_rows_gives_the_plain_products_bits():
    """A few rows go one vector-matrix product each, or padded to the BLAS's tile
    (exact._product): the same bits as one plain product, for every row count tried."""
    x, w = operands(3, 70, 256, 1536)
    matrix = exact.ExactMatrix(w)
    xr = exact.rounded(x, 1, matrix.beta)
    plain = (xr @ matrix.w).astype(np.float32)
    for m in range(1, 71):
        assert np.array_equal(matrix.times(x[:m]), plain[:m]), m
        assert np.array_equal(exact._product(xr[-m:], matrix.w), xr[-m:] @ matrix.w), m


def test_row_dots_and_empty_rows():
    x, w = operands(3, 7, 384, 7)
    d = exact.row_dots(x, w.T)
    assert d.dtype == np.float32 and np.array_equal(d[2:3], exact.row_dots(x[2:3], w.T[2:3]))
    assert np.allclose(d, np.einsum("ij,ij->i", x.astype(float), w.T.astype(float)), atol=1e-6)
    assert exact.ExactMatrix(w).times(np.zeros((0, 384), np.float32)).shape == (0, 7)
    assert np.array_equal(exact.product(np.zeros((2, 384), np.float32), w), np.zeros((2, 7)))
