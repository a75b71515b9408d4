"""The exact Hessian of a one-hidden-layer network's data term, in closed form.

The network (layout of :mod:`thermonet.kernels.mlp`): ``z = W1 x + b1`` (H hidden units),
``a = phi(z)`` with ``phi`` tanh or logistic, ``f = W2 a + b2`` (K linear outputs). For a data
term ``E(w) = sum_n e(f(x_n, w), t_n)`` whose derivatives by the outputs are ``r_n = de/df``
and ``L_n = d^2 e / df df^T``,

    d^2 E / dw dw^T = sum_n [ J_n^T L_n J_n + sum_k r_nk d^2 f_k / dw dw^T ]

(Bishop, "Exact calculation of the Hessian matrix for the multilayer perceptron", Neural
Computation 4, 494 (1992)), with ``J_n = df/dw`` (K x d). The second derivatives of ``f_k``
are nonzero only in two blocks: within one hidden unit's incoming weights and bias,
``W2_kh phi''(z_h) x~_i x~_j`` (``x~ = (x, 1)``), and between those and the unit's outgoing
weight to output k, ``phi'(z_h) x~_i``. Two data terms:

* squared error (regression, :mod:`thermonet.kernels.mlp_regression`):
  ``e = |f - t|^2 / 2``, ``r = f - t``, ``L = I``;
* softmax cross-entropy (classification, ``t`` one-hot): ``e = logsumexp(f) - t . f``,
  ``r = p - t``, ``L = diag(p) - p p^T`` with ``p = softmax(f)``.

The kernel returns ``scale * d^2 E/dw dw^T + diag(prec)``: for the regression energy ``scale``
is the noise precision and ``prec`` the prior precisions. Exact to rounding (the residual
blocks are written to both triangles from one value; the Gauss-Newton product is symmetric
to rounding); rows are processed in
chunks of :data:`CHUNK` (the Gauss-Newton part as one matrix product per chunk), in a fixed
order, so the result does not depend on anything but the inputs.
"""

from __future__ import annotations

import math

import numpy as np

from thermonet.kernels.jit import kernel

#: rows of the data per Gauss-Newton product (memory ``2 CHUNK K d`` floats)
CHUNK = 64


@kernel
def n_params(n_in, n_hidden, n_out):
    """Parameters of the network: ``H (I + 1) + K (H + 1)``."""
    return n_hidden * (n_in + 1) + n_out * (n_hidden + 1)


@kernel
def _hidden(theta, n_in, n_hidden, tanh, xr, a, d1, d2):
    """Hidden activations of one row and their first and second derivatives."""
    for h in range(n_hidden):
        z = theta[n_hidden * n_in + h]
        for i in range(n_in):
            z += theta[h * n_in + i] * xr[i]
        if tanh:
            t = math.tanh(z)
            a[h] = t
            d1[h] = 1.0 - t * t
            d2[h] = -2.0 * t * d1[h]
        else:
            s = 1.0 / (1.0 + math.exp(-z))
            a[h] = s
            d1[h] = s * (1.0 - s)
            d2[h] = d1[h] * (1.0 - 2.0 * s)


@kernel
def _row_loss(theta, shape, a, trow, f, p, r, energy):
    """One case's outputs ``f`` from its hidden activations ``a``, their residuals ``r``
    (``p``: the softmax probabilities), and ``energy`` plus the case's data term."""
    ni, nh, no, _, softmax = shape
    o_w2 = nh * ni + nh
    o_b2 = o_w2 + no * nh
    for k in range(no):
        acc = theta[o_b2 + k]
        for h in range(nh):
            acc += theta[o_w2 + k * nh + h] * a[h]
        f[k] = acc
    if softmax:
        m = f[0]
        for k in range(1, no):
            m = max(m, f[k])
        tot = 0.0
        for k in range(no):
            p[k] = math.exp(f[k] - m)
            tot += p[k]
        energy += m + math.log(tot)
        for k in range(no):
            p[k] /= tot
            r[k] = p[k] - trow[k]
            energy -= trow[k] * f[k]
    else:
        for k in range(no):
            r[k] = f[k] - trow[k]
            energy += 0.5 * r[k] * r[k]
    return energy


@kernel
def _row_jacobian(theta, shape, xt, a, d1, p, jac, lj):
    """One case's Jacobian rows (``jac``, k = 0..K-1) and ``L J`` (``lj``)."""
    ni, nh, no, _, softmax = shape
    d = n_params(ni, nh, no)
    o_b1 = nh * ni
    o_w2 = o_b1 + nh
    o_b2 = o_w2 + no * nh
    for k in range(no):
        jr = jac[k]
        for h in range(nh):
            g = theta[o_w2 + k * nh + h] * d1[h]
            for i in range(ni):
                jr[h * ni + i] = g * xt[i]
            jr[o_b1 + h] = g
            jr[o_w2 + k * nh + h] = a[h]
        jr[o_b2 + k] = 1.0
    # L J: identity for squared error, (diag(p) - p p^T) J for the softmax
    for k in range(no):
        lj[k, :] = jac[k, :]
    if softmax:
        for col in range(d):
            pj = 0.0
            for k in range(no):
                pj += p[k] * jac[k, col]
            for k in range(no):
                lj[k, col] = p[k] * (jac[k, col] - pj)


@kernel
def _row_residual(theta, shape, xt, d1, d2, r, s, out):
    """Add one case's residual term ``sum_k r_k d^2 f_k`` to ``out``."""
    ni, nh, no, _, _ = shape
    o_b1 = nh * ni
    o_w2 = o_b1 + nh
    for h in range(nh):
        acc = 0.0
        for k in range(no):
            acc += r[k] * theta[o_w2 + k * nh + h]
        s[h] = acc * d2[h]
    for h in range(nh):
        for i in range(ni + 1):
            pi = h * ni + i if i < ni else o_b1 + h
            ci = s[h] * xt[i]
            for j in range(ni + 1):
                pj_ = h * ni + j if j < ni else o_b1 + h
                out[pi, pj_] += ci * xt[j]
            for k in range(no):
                v = r[k] * d1[h] * xt[i]
                out[pi, o_w2 + k * nh + h] += v
                out[o_w2 + k * nh + h, pi] += v


@kernel
def hessian(theta, shape, x, t, scale, prec, out):
    """Write ``scale * nabla nabla E + diag(prec)`` to ``out`` (d x d) and return ``E``.

    ``shape`` is ``(n_in, n_hidden, n_out, tanh, softmax)``: ``tanh`` selects the hidden
    activation, ``softmax`` the data term (module docstring). ``x`` (N, I) inputs, ``t``
    (N, K) float targets (one-hot rows when ``softmax``). A non-finite network gives a
    non-finite Hessian and energy, not an error.
    """
    ni, nh, no, tanh, _ = shape
    d = n_params(ni, nh, no)
    n = x.shape[0]
    out[:, :] = 0.0
    jac = np.zeros((CHUNK * no, d))
    lj = np.zeros((CHUNK * no, d))
    a = np.empty(nh)
    d1 = np.empty(nh)
    d2 = np.empty(nh)
    f = np.empty(no)
    r = np.empty(no)
    p = np.empty(no)
    s = np.empty(nh)
    xt = np.empty(ni + 1)
    energy = 0.0
    for c0 in range(0, n, CHUNK):
        rows = min(CHUNK, n - c0)
        for q in range(rows):
            row = c0 + q
            for i in range(ni):
                xt[i] = x[row, i]
            xt[ni] = 1.0
            _hidden(theta, ni, nh, tanh, xt, a, d1, d2)
            energy = _row_loss(theta, shape, a, t[row], f, p, r, energy)
            _row_jacobian(theta, shape, xt, a, d1, p, jac[q * no:(q + 1) * no],
                          lj[q * no:(q + 1) * no])
            _row_residual(theta, shape, xt, d1, d2, r, s, out)
        if rows < CHUNK:
            jac[rows * no:, :] = 0.0
            lj[rows * no:, :] = 0.0
        out += np.dot(jac.T, lj)
    for i in range(d):
        for j in range(d):
            out[i, j] *= scale
        out[i, i] += prec[i]
    return energy
