"""One-hidden-layer regression networks with the data stored feature by feature.

The networks of Neal (1993), MacKay (1992) and Rasmussen (1996) are small: a few inputs, tens
of tanh units, a few hundred cases. For them the blocked kernel of
:mod:`thermonet.kernels.mlp` makes five matrix-product library calls per gradient on matrices
2-16 columns wide; this one makes none, and is 2.2 times faster on the robot arm
(docs/performance.md, "The shallow kernel"). Here the data are stored
feature-major, ``xt`` of shape ``(n_in, n)`` and ``yt`` of shape ``(n_out, n)``, and every
step is a loop over the n cases that LLVM vectorises: a hidden unit's pre-activations are
``n_in`` scaled additions of input rows, its tanh or logistic values one pass of
:mod:`thermonet.kernels.elementwise`, and every gradient entry a dot product over the cases in
the fixed 8-lane order of :mod:`thermonet.kernels.reduce` (the same bits on AVX2 and AVX-512).

Same network, parameter layout and data term as :func:`thermonet.kernels.mlp.loss_and_grad`
with real-valued targets and linear outputs (``S(w) = sum_n |f(x_n) - y_n|^2 / 2``); the
results agree with it to rounding (tests/test_regression_kernels.py), not bit for bit, since
the sums run in another order. Which kernel a regression potential uses is its ``kernel``
option (docs/regression.md; timings in docs/performance.md).

The cases are taken in blocks of ``block`` (the blocked kernel's block size), so that one
block's activations stay in the CPU's cache however many cases there are; a gradient entry is
the sum of its blocks' dot products in block order. Scratch ``work`` (float64, length
:func:`work_size`) holds one block's hidden activations (then its hidden deltas), residuals
and back-propagated errors.
"""

from __future__ import annotations

from thermonet.kernels.elementwise import logistic
from thermonet.kernels.jit import kernel
from thermonet.kernels.mlp import HIDDEN_TANH
from thermonet.kernels.reduce import vdot, vsum

#: bit of the activation code: the data are feature-major and this module's kernels run
FEATURE_MAJOR = 4


@kernel
def work_size(widths, block):
    """Length of the scratch array for blocks of ``block`` cases (one hidden layer)."""
    return (widths[1] + widths[2] + 1) * block


@kernel
def _phi_axpy(z, w, x, tanh):
    """``z[c] <- phi(z[c] + w x[c])``, phi tanh or the logistic function (one loop for each,
    so that each vectorises)."""
    if tanh:
        for c in range(z.shape[0]):
            z[c] = 2.0 * logistic(2.0 * (z[c] + w * x[c])) - 1.0
    else:
        for c in range(z.shape[0]):
            z[c] = logistic(z[c] + w * x[c])


@kernel
def _hidden(theta, widths, act, xt, r0, r1, z):
    """``z[j, c] <- phi(b_j + sum_i W[j, i] xt[i, r0 + c])`` for the hidden units."""
    n_in = widths[0]
    nh = widths[1]
    m = r1 - r0
    o_b1 = nh * n_in
    tanh = (act & HIDDEN_TANH) != 0
    last = n_in - 1
    x0 = xt[0][r0:r1]
    for j in range(nh):
        zj = z[j]
        b = theta[o_b1 + j]
        w = theta[j * n_in]
        # the first input's term is added in the pass that sets the bias, the last one's in
        # the pass that applies phi: n_in passes over the cases per unit, not n_in + 2
        if last == 0:
            for c in range(m):
                zj[c] = b
            _phi_axpy(zj, w, x0, tanh)
            continue
        for c in range(m):
            zj[c] = b + w * x0[c]
        for i in range(1, last):
            w = theta[j * n_in + i]
            xi = xt[i][r0:r1]
            for c in range(m):
                zj[c] += w * xi[c]
        _phi_axpy(zj, theta[j * n_in + last], xt[last][r0:r1], tanh)


@kernel
def _residual(theta, widths, z, yk, k, rk):
    """``rk[c] <- f_k(x_c) - yk[c]``: output k's residuals on one block."""
    nh = widths[1]
    n_out = widths[2]
    o_w2 = nh * widths[0] + nh
    b = theta[o_w2 + n_out * nh + k]
    w = theta[o_w2 + k * nh]
    z0 = z[0]
    for c in range(rk.shape[0]):
        rk[c] = (b - yk[c]) + w * z0[c]
    for j in range(1, nh):
        w = theta[o_w2 + k * nh + j]
        zj = z[j]
        for c in range(rk.shape[0]):
            rk[c] += w * zj[c]


@kernel
def _delta(z, w, r, d, d_scale, act):
    """``z[c] <- (d_scale d[c] + w r[c]) phi'(.)`` with ``z`` holding the activations:
    phi' is ``1 - a^2`` for tanh, ``a (1 - a)`` for the logistic function (one loop each, so
    that each vectorises)."""
    if act & HIDDEN_TANH:
        for c in range(z.shape[0]):
            a = z[c]
            z[c] = (d_scale * d[c] + w * r[c]) * (1.0 - a * a)
    else:
        for c in range(z.shape[0]):
            a = z[c]
            z[c] = (d_scale * d[c] + w * r[c]) * (a * (1.0 - a))


@kernel
def _views(widths, work, m):
    """One block's scratch: activations/deltas ``(nh, m)``, residuals ``(n_out, m)``, and one
    row of back-propagated errors ``(m,)``."""
    nh = widths[1]
    n_out = widths[2]
    z = work[:nh * m].reshape((nh, m))
    r = work[nh * m:(nh + n_out) * m].reshape((n_out, m))
    da = work[(nh + n_out) * m:(nh + n_out + 1) * m]
    return z, r, da


@kernel
def loss(theta, widths, act, xt, yt, block, work):
    """``S(w)`` (float64); NaN or inf if the network overflowed."""
    n = xt.shape[1]
    s = 0.0
    for r0 in range(0, n, block):
        r1 = min(n, r0 + block)
        z, r, _ = _views(widths, work, r1 - r0)
        _hidden(theta, widths, act, xt, r0, r1, z)
        for k in range(widths[2]):
            _residual(theta, widths, z, yt[k][r0:r1], k, r[k])
            s += 0.5 * vdot(r[k], r[k])
    return s


@kernel
def loss_and_grad(theta, widths, act, xt, yt, block, work, grad):
    """``S(w)`` and its gradient (written to ``grad``, layout of :mod:`thermonet.kernels.mlp`)."""
    n_in = widths[0]
    nh = widths[1]
    n_out = widths[2]
    n = xt.shape[1]
    o_b1 = nh * n_in
    o_w2 = o_b1 + nh
    o_b2 = o_w2 + n_out * nh
    last = n_out - 1
    for i in range(grad.shape[0]):
        grad[i] = 0.0
    s = 0.0
    for r0 in range(0, n, block):
        r1 = min(n, r0 + block)
        z, r, da = _views(widths, work, r1 - r0)
        _hidden(theta, widths, act, xt, r0, r1, z)
        for k in range(n_out):
            rk = r[k]
            _residual(theta, widths, z, yt[k][r0:r1], k, rk)
            s += 0.5 * vdot(rk, rk)
            grad[o_b2 + k] += vsum(rk)
            for j in range(nh):
                grad[o_w2 + k * nh + j] += vdot(rk, z[j])
        for j in range(nh):
            zj = z[j]
            # back-propagated error sum_k W2[k, j] r_k, the last output's term added in the
            # pass that turns zj into the unit's delta (its activation is not needed after)
            if n_out > 1:
                w = theta[o_w2 + j]
                r_0 = r[0]
                for c in range(da.shape[0]):
                    da[c] = w * r_0[c]
                for k in range(1, last):
                    w = theta[o_w2 + k * nh + j]
                    rk = r[k]
                    for c in range(da.shape[0]):
                        da[c] += w * rk[c]
            w = theta[o_w2 + last * nh + j]
            rl = r[last]
            if n_out == 1:
                _delta(zj, w, rl, rl, 0.0, act)
            else:
                _delta(zj, w, rl, da, 1.0, act)
            grad[o_b1 + j] += vsum(zj)
            for i in range(n_in):
                grad[j * n_in + i] += vdot(zj, xt[i][r0:r1])
    return s
