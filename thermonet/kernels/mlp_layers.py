"""The forward products of an MLP's layers, ``z = a @ W.T``, in the layout each backend
handles well.

With ``np.dot`` and thermonet's own products the small weight matrices above the first layer
are transposed into scratch first (OpenBLAS is slower on ``(rows x k) (k x m)^T`` than on a
plain product for these small ``k``, ``m``; the own products read their second operand row by
row), and with the own products the first layer's too; not with MKL. The backend is read when
a kernel is typed (:mod:`thermonet.kernels.matmul.blas` says why), so these choices are
overloads.

A narrow first layer (fewer than 40 units with AVX-512) fills too few of the own products'
register tiles in that orientation: ``(rows x 256) (256 x 12)`` runs in strips of four
accumulators. Its transpose ``z.T = W @ x.T`` has the data rows as its columns and fills
whole tiles: the product 1.7 times faster for 256-12-10 on D50, the gradient 1.26 times
(benchmarks/bench_first_layer.py; :func:`transposes_data` says when it is used). It needs the
block's inputs transposed, which the potential makes once (:func:`transposed_blocks`), and it
computes every element as the same chain of fused multiply-adds over the inputs in the same
order, so the bits are those of the plain orientation.
"""

from __future__ import annotations

import numpy as np
from numba import types
from numba.extending import overload

from thermonet.kernels.jit import compiled_backend, kernel
from thermonet.kernels.matmul import blas, gemm


def _transposes_first():
    """Whether the first layer's weights are transposed into scratch (the own products)."""


@overload(_transposes_first)
def _transposes_first_typed():
    first = compiled_backend() == "own"
    return lambda: first


@kernel
def transposed_size(widths):
    """Room for a transposed copy of the largest weight matrix that is transposed (above the
    first layer; with the own products the first too)."""
    m = 0
    for layer in range(0 if _transposes_first() else 1, widths.shape[0] - 1):
        m = max(m, widths[layer] * widths[layer + 1])
    return m


@kernel
def transpose(w, wt):
    """``wt[i, o] = w[o, i]``."""
    for o in range(w.shape[0]):
        for i in range(w.shape[1]):
            wt[i, o] = w[o, i]


@kernel
def product_wt(a, w, work, t_off, z):
    """``z = a @ w.T`` with ``w`` transposed into the scratch ``work[t_off:]`` first (the own
    products read their second operand row by row)."""
    n_out, n_in = w.shape
    wt = work[t_off:t_off + n_in * n_out].reshape((n_in, n_out))
    transpose(w, wt)
    blas.gemm(False, False, a, wt, z)


def first_layer(xb, w, work, t_off, z):
    """``z = xb @ w.T``, resolved when a kernel is compiled: thermonet's own products take
    ``w`` transposed into the scratch ``work[t_off:]`` first."""


@overload(first_layer)
def _first_layer_typed(xb, w, work, t_off, z):
    if compiled_backend() == "own" and xb.dtype in (types.float64, types.float32):
        return lambda xb, w, work, t_off, z: product_wt(xb, w, work, t_off, z)
    return lambda xb, w, work, t_off, z: blas.gemm(False, True, xb, w, z)


@kernel
def first_layer_transposed(xtb, w, zt, z):
    """``z = (w @ xtb).T`` for the block's inputs transposed, ``xtb`` (flat, ``n_in * rows``
    entries, row-major ``(n_in, rows)``), through the scratch ``zt`` (at least ``n_out * rows``
    entries)."""
    n_out, n_in = w.shape
    rows = z.shape[0]
    zt2 = zt[:n_out * rows].reshape((n_out, rows))
    blas.gemm(False, False, w, xtb.reshape((n_in, rows)), zt2)
    transpose(zt2, z)


def hidden_layer(a_prev, w, work, t_off, z):
    """``z = a_prev @ w.T`` above the first layer, resolved when a kernel is compiled: with
    ``np.dot`` and the own products ``w`` transposed into the scratch ``work[t_off:]`` first."""


@overload(hidden_layer)
def _hidden_layer_typed(a_prev, w, work, t_off, z):
    if compiled_backend() in ("numpy", "own"):
        return lambda a_prev, w, work, t_off, z: product_wt(a_prev, w, work, t_off, z)
    return lambda a_prev, w, work, t_off, z: blas.gemm(False, True, a_prev, w, z)


def transposes_data(widths: np.ndarray, dtype: np.dtype) -> bool:
    """Whether the first layer of ``widths`` is computed from its inputs transposed: float64,
    the own products compiled for AVX-512 (five groups of eight columns to a tile), and a
    first layer of 9 to 39 units, more than one group and less than a tile. Reads the backend
    (which may measure it).

    Measured (benchmarks/bench_first_layer.py, Intel Emerald Rapids): 1.04-1.55 times faster on
    D50 for 8-32 units, 1.05-1.6 on blocks of 128 rows for 12-32; with 8 units on 128 rows the
    plain orientation's strips, which keep the transposed weights in L1, were 1.1 times faster.
    """
    return (np.dtype(dtype) == np.float64 and str(blas.BACKEND) == "own" and gemm.NG > 1
            and len(widths) > 1 and 8 < int(widths[1]) < gemm.NG * 8)


def transposed_blocks(x: np.ndarray, block: int) -> np.ndarray:
    """The rows of ``x`` transposed block by block, flat: block ``b`` (rows ``r0:r1``) is
    ``x[r0:r1].T`` row-major at ``[r0 * n_in, r1 * n_in)``."""
    n, n_in = x.shape
    out = np.empty(n * n_in, dtype=x.dtype)
    for r0 in range(0, n, block):
        r1 = min(n, r0 + block)
        out[r0 * n_in:r1 * n_in] = x[r0:r1].T.ravel()
    return out


__all__ = ["first_layer", "first_layer_transposed", "hidden_layer", "product_wt", "transpose",
           "transposed_blocks", "transposed_size", "transposes_data"]
