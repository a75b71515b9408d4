"""The data terms of the MLP kernels, one block of rows at a time.

* :func:`block_cross_entropy`: the softmax cross-entropy of integer labels (classification);
* :func:`block_half_sse`: half the squared error of real-valued targets (regression);
* :func:`block_data_term`: the one of the two that fits the type of the targets, chosen at
  compile time, so that :mod:`thermonet.kernels.mlp` serves both with one code path.
"""

from __future__ import annotations

import math

import numpy as np
from numba import types
from numba.extending import overload

from thermonet.kernels.elementwise import exp
from thermonet.kernels.jit import kernel


@kernel
def softmax_exp(logits, t):
    """Row maxima ``m`` and ``t[r*n_cls + c] = exp(logits[r, c] - m[r])``, in float64.

    ``t`` (float64) has at least ``rows * (n_cls + 1)`` entries; ``m`` is stored after the
    exponentials. The exponentials are taken in one flat loop, which vectorises (a loop over
    the ~10 classes of one row does not).
    """
    rows, n_cls = logits.shape
    nt = rows * n_cls
    for r in range(rows):
        m = -np.inf
        for c in range(n_cls):
            v = np.float64(logits[r, c])
            if v > m:
                m = v
        t[nt + r] = m
        for c in range(n_cls):
            t[r * n_cls + c] = np.float64(logits[r, c]) - m
    for i in range(nt):
        t[i] = exp(t[i])


#: rows whose softmax normalisers are multiplied together before one ``log``
#: (see :func:`block_cross_entropy`)
_LOG_CHUNK = 64


@kernel
def block_cross_entropy(logits, yb, delta, want_delta):
    """Cross-entropy of one block, accumulated in float64 from float64 copies of the logits;
    with ``want_delta`` also writes dE/dlogits (softmax - one-hot) to ``delta``.

    Per row, ``-log p(y) = m + log s - logit_y`` with ``m`` the row maximum and
    ``s = sum_c exp(logit_c - m)`` in [1, n_cls]. The ``log s`` terms are taken as the log of
    the product of up to 64 rows' ``s`` (at most ``n_cls**64``, far from overflow for fewer than
    ~2^15 classes), so a 128-row block takes 2 scalar ``log`` calls instead of 128. The energy
    and the energy-and-gradient kernels share this code, so they agree bit for bit.
    """
    rows, n_cls = logits.shape
    t = np.empty(rows * (n_cls + 1))
    softmax_exp(logits, t)
    chunk = _LOG_CHUNK if n_cls <= 32768 else 1
    e = 0.0
    prod = 1.0
    n_prod = 0
    for r in range(rows):
        m = t[rows * n_cls + r]
        if not math.isfinite(m):
            # +inf or NaN logits: a non-finite energy, rejected by the caller.
            e += np.nan if m != -np.inf else np.inf
            if want_delta:
                for c in range(n_cls):
                    delta[r, c] = np.nan
            continue
        s = 0.0
        for c in range(n_cls):
            s += t[r * n_cls + c]
        e += m - np.float64(logits[r, yb[r]])
        prod *= s
        n_prod += 1
        if n_prod == chunk:
            e += math.log(prod)
            prod = 1.0
            n_prod = 0
        if want_delta:
            inv = 1.0 / s
            for c in range(n_cls):
                delta[r, c] = t[r * n_cls + c] * inv
            delta[r, yb[r]] -= 1.0
    if n_prod > 0:
        e += math.log(prod)
    return e


@kernel
def block_half_sse(outputs, yb, delta, want_delta):
    """Half the squared error ``sum |f - y|^2 / 2`` of one block, accumulated in float64; with
    ``want_delta`` also writes dS/doutputs = ``f - y`` to ``delta``. Non-finite outputs give a
    non-finite energy (rejected by the caller)."""
    rows, n_out = outputs.shape
    e = 0.0
    for r in range(rows):
        for c in range(n_out):
            d = np.float64(outputs[r, c]) - yb[r, c]
            e += 0.5 * d * d
            if want_delta:
                delta[r, c] = d
    return e


def block_data_term(logits, yb, delta, want_delta):
    """The data term of one block: :func:`block_cross_entropy` for integer labels,
    :func:`block_half_sse` for real-valued targets (chosen at compile time from the type of
    ``yb``, below)."""
    raise NotImplementedError("only callable from compiled code")


@overload(block_data_term, jit_options={"nogil": True})
def _block_data_term_typed(logits, yb, delta, want_delta):
    if isinstance(yb, types.Array) and isinstance(yb.dtype, types.Float) and yb.ndim == 2:
        def impl(logits, yb, delta, want_delta):
            return block_half_sse(logits, yb, delta, want_delta)
    else:
        def impl(logits, yb, delta, want_delta):
            return block_cross_entropy(logits, yb, delta, want_delta)
    return impl
