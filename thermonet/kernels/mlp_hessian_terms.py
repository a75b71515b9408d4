"""The curvature of the data terms for the R-operator (:mod:`thermonet.kernels.mlp_hessian`).

The R-operator needs two things from a data term ``e(s, y)`` of the network outputs ``s``:
``e`` and ``ds = de/ds`` in its base pass, which are the gradient kernels' own
(:func:`thermonet.kernels.losses.block_data_term`), and, in its forward R pass,
``R{ds} = L R{s}`` with ``L = d^2 e / ds ds^T`` (:func:`data_term_curvature`, here).

Two data terms, chosen at compile time from the type of the targets as in
:mod:`thermonet.kernels.losses` (so the classifier's kernels are the same machine code with or
without regression):

* ``y`` int64 labels, shape ``(n,)``: the softmax cross-entropy
  ``e = logsumexp(s) - s_y``, ``ds = p - onehot(y)``, ``L = diag(p) - p p^T`` with
  ``p = softmax(s)``;
* ``y`` float targets, shape ``(n, K)``: half the squared error ``e = |s - y|^2 / 2``,
  ``ds = s - y``, ``L = I``.
"""

from __future__ import annotations

import numpy as np
from numba import types
from numba.extending import overload

from thermonet.kernels.jit import kernel


@kernel
def cross_entropy_curvature(s, rs, cur):
    """``cur = (diag(p) - p p^T) rs`` row by row, ``p`` the softmax of the logits ``s``."""
    rows, n_cls = s.shape
    for r in range(rows):
        m = s[r, 0]
        for c in range(1, n_cls):
            m = max(m, s[r, c])
        tot = 0.0
        for c in range(n_cls):
            tot += np.exp(s[r, c] - m)
        dot = 0.0
        for c in range(n_cls):
            dot += np.exp(s[r, c] - m) / tot * rs[r, c]
        for c in range(n_cls):
            p = np.exp(s[r, c] - m) / tot
            cur[r, c] = p * (rs[r, c] - dot)


@kernel
def half_sse_curvature(s, rs, cur):
    """``cur = rs`` (the squared error's second derivative is the identity)."""
    rows, n_out = s.shape
    for r in range(rows):
        for c in range(n_out):
            cur[r, c] = rs[r, c]


def _float_targets(yb: types.Type) -> bool:
    return isinstance(yb, types.Array) and isinstance(yb.dtype, types.Float) and yb.ndim == 2


def data_term_curvature(s, yb, rs, cur):
    """``cur = L rs`` with ``L`` the data term's second derivative by the outputs ``s``;
    ``yb`` (the targets) only selects the data term, at compile time."""
    raise NotImplementedError("only callable from compiled code")


@overload(data_term_curvature, jit_options={"nogil": True})
def _data_term_curvature_typed(s, yb, rs, cur):
    if _float_targets(yb):
        def impl(s, yb, rs, cur):
            half_sse_curvature(s, rs, cur)
    else:
        def impl(s, yb, rs, cur):
            cross_entropy_curvature(s, rs, cur)
    return impl
