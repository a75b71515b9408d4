"""One-hidden-layer regression networks with the data stored feature by feature.

The networks of Neal (1993), MacKay (1992) and Rasmussen (1996) are small: a few inputs, tens
of tanh units, a few hundred cases. For them the blocked kernel of
:mod:`thermonet.kernels.mlp` makes five matrix-product library calls per gradient on matrices
2-16 columns wide; this one makes none, and is 3.3 times faster on the robot arm
(docs/performance.md, "The shallow kernel"). The data are stored feature-major, ``xt`` of
shape ``(n_in, n)`` and ``yt`` of shape ``(n_out, n)``, and the cases are taken eight at a
time as :data:`thermonet.kernels.matmul.simd.f64x8` values: for each group of eight, every hidden
unit's pre-activation (fused multiply-adds over the inputs), its tanh
(:func:`thermonet.kernels.elementwise.tanh8`) or logistic value, its terms in the residuals
``f_k(x) - y_k`` and then the units' deltas are computed in registers, and only the
activations, residuals and deltas are stored. Every gradient entry is then a dot product over
the cases in the fixed 8-lane order of :mod:`thermonet.kernels.matmul.reduce`, four entries at a
time. Each lane is the same IEEE arithmetic whatever the vector width, so the results are the
same bits on AVX2 and AVX-512 CPUs (tests/kernels/test_simd.py compiles for both and compares).

Same network, parameter layout and data term as :func:`thermonet.kernels.mlp.loss_and_grad`
with real-valued targets and linear outputs (``S(w) = sum_n |f(x_n) - y_n|^2 / 2``); the
results agree with it to rounding (tests/kernels/test_regression_kernels.py), not bit for bit, since
the sums run in another order and the tanh is another formula. Which kernel a regression
potential uses is its ``kernel`` option (docs/regression.md; timings in docs/performance.md).

The cases are taken in blocks of ``block`` (the blocked kernel's block size), so that one
block's activations stay in the CPU's cache however many cases there are; a gradient entry is
the sum of its blocks' dot products in block order. Scratch ``work`` (float64, length
:func:`work_size`) holds one block's activations, deltas and residuals and the zero-padded
last group of cases when the block's length is not a multiple of eight.
"""

from __future__ import annotations

from thermonet.kernels.elementwise import logistic8, tanh8
from thermonet.kernels.jit import kernel
from thermonet.kernels.matmul import reduce, simd
from thermonet.kernels.mlp import HIDDEN_TANH

#: bit of the activation code: the data are feature-major and this module's kernels run
FEATURE_MAJOR = 4

_W = simd.LANES


@kernel
def _row_stride(m):
    """Elements from one row of the scratch to the next for a block of ``m`` cases: ``m``
    rounded up to an odd number of groups of eight. A group is one 64-byte cache line, and
    rows a power-of-two number of lines apart fall into one set of the L1 cache, which holds
    only a few (with 512 cases per block every row was 4 KiB from the last: 2.2 times slower
    at N = 2,000 with 64 hidden units, 2.3 times at N = 20,000 with 16)."""
    groups = (m + _W - 1) // _W
    return (groups | 1) * _W


@kernel
def work_size(widths, block):
    """Length of the scratch array for blocks of at most ``block`` cases."""
    return ((2 * widths[1] + widths[2]) * _row_stride(block) + (widths[0] + widths[2]) * _W)


# Scratch layout for a block of m cases, rows mp = _row_stride(m) elements apart: activations
# H (nh rows), deltas D (nh), residuals R (n_out); then the inputs (n_in rows of 8) and targets
# (n_out) of the last group of cases, zero-padded when m is not a multiple of 8. The helpers
# take pointers and sizes, not arrays (thermonet.kernels.matmul.simd says why).
@kernel
def _unit(tp, n_in, nh, tanh, xp, ldx, j):
    """Hidden unit ``j``'s activations on the eight cases at ``xp`` (rows ``ldx`` apart):
    ``phi(b_j + sum_i W[j, i] x_i)``, the terms added in input order by fused multiply-adds."""
    z = simd.splat(tp[nh * n_in + j])
    for i in range(n_in):
        z = simd.fma(simd.splat(tp[j * n_in + i]), simd.load(xp, i * ldx), z)
    if tanh:
        return tanh8(z)
    return logistic8(z)


@kernel
def _dphi(a, tanh):
    """The activation function's derivative from its value ``a``: ``1 - a^2`` (tanh, one
    rounding) or ``a (1 - a)`` (logistic)."""
    if tanh:
        return simd.fms(simd.sub(simd.splat(-0.0), a), a, simd.splat(-1.0))
    return simd.mul(a, simd.sub(simd.splat(1.0), a))


@kernel
def _group(net, cases, rows, grad_too):
    """Eight cases: activations to ``hp``, residuals ``f_k(x) - y_k`` to ``rp`` (rows ``mp``
    apart) and, with ``grad_too``, the hidden units' deltas ``(sum_k W2[k, j] r_k) phi'`` to
    ``dp``. A residual's terms are added in hidden-unit order after ``b_k - y_k``, a delta's
    in output order; ``phi'`` is ``1 - a^2`` for tanh and ``a (1 - a)`` for the logistic.
    ``net = (tp, n_in, nh, n_out, tanh)``: the parameters' pointer, the widths and the
    activation; ``cases = (xp, yp, ldx)``: the inputs and targets, rows ``ldx`` apart;
    ``rows = (hp, rp, dp, mp)``: where the scratch rows go."""
    tp, n_in, nh, n_out, tanh = net
    xp, yp, ldx = cases
    hp, rp, dp, mp = rows
    o_w2 = nh * (n_in + 1)
    o_b2 = o_w2 + n_out * nh
    if n_out <= 4:
        # the residuals in registers: through memory, each hidden unit's term would wait for
        # the previous unit's store to be forwarded
        r0 = simd.sub(simd.splat(tp[o_b2]), simd.load(yp, 0))
        r1 = r0
        r2 = r0
        r3 = r0
        if n_out > 1:
            r1 = simd.sub(simd.splat(tp[o_b2 + 1]), simd.load(yp, ldx))
        if n_out > 2:
            r2 = simd.sub(simd.splat(tp[o_b2 + 2]), simd.load(yp, 2 * ldx))
        if n_out > 3:
            r3 = simd.sub(simd.splat(tp[o_b2 + 3]), simd.load(yp, 3 * ldx))
        for j in range(nh):
            h = _unit(tp, n_in, nh, tanh, xp, ldx, j)
            simd.store(hp, j * mp, h)
            r0 = simd.fma(simd.splat(tp[o_w2 + j]), h, r0)
            if n_out > 1:
                r1 = simd.fma(simd.splat(tp[o_w2 + nh + j]), h, r1)
            if n_out > 2:
                r2 = simd.fma(simd.splat(tp[o_w2 + 2 * nh + j]), h, r2)
            if n_out > 3:
                r3 = simd.fma(simd.splat(tp[o_w2 + 3 * nh + j]), h, r3)
        simd.store(rp, 0, r0)
        if n_out > 1:
            simd.store(rp, mp, r1)
        if n_out > 2:
            simd.store(rp, 2 * mp, r2)
        if n_out > 3:
            simd.store(rp, 3 * mp, r3)
        if not grad_too:
            return
        for j in range(nh):
            d = simd.mul(simd.splat(tp[o_w2 + j]), r0)
            if n_out > 1:
                d = simd.fma(simd.splat(tp[o_w2 + nh + j]), r1, d)
            if n_out > 2:
                d = simd.fma(simd.splat(tp[o_w2 + 2 * nh + j]), r2, d)
            if n_out > 3:
                d = simd.fma(simd.splat(tp[o_w2 + 3 * nh + j]), r3, d)
            simd.store(dp, j * mp, simd.mul(d, _dphi(simd.load(hp, j * mp), tanh)))
        return
    for k in range(n_out):
        simd.store(rp, k * mp, simd.sub(simd.splat(tp[o_b2 + k]), simd.load(yp, k * ldx)))
    for j in range(nh):
        h = _unit(tp, n_in, nh, tanh, xp, ldx, j)
        simd.store(hp, j * mp, h)
        for k in range(n_out):
            r = simd.load(rp, k * mp)
            simd.store(rp, k * mp, simd.fma(simd.splat(tp[o_w2 + k * nh + j]), h, r))
    if not grad_too:
        return
    for j in range(nh):
        d = simd.mul(simd.splat(tp[o_w2 + j]), simd.load(rp, 0))
        for k in range(1, n_out):
            d = simd.fma(simd.splat(tp[o_w2 + k * nh + j]), simd.load(rp, k * mp), d)
        simd.store(dp, j * mp, simd.mul(d, _dphi(simd.load(hp, j * mp), tanh)))


@kernel
def _forward(theta, widths, act, xt, yt, cases, work, grad_too):
    """Cases ``r0 .. r1 - 1`` (``cases = (r0, r1)``), eight at a time, into the scratch
    (layout above)."""
    r0, r1 = cases
    n_in = widths[0]
    nh = widths[1]
    n_out = widths[2]
    tanh = (act & HIDDEN_TANH) != 0
    m = r1 - r0
    mp = _row_stride(m)
    n = xt.shape[1]
    tp = simd.address(theta)
    wp = simd.address(work)
    rp = simd.offset(wp, 2 * nh * mp)
    xpad = simd.offset(wp, (2 * nh + n_out) * mp)
    ypad = simd.offset(xpad, n_in * _W)
    head = m // _W * _W
    net = (tp, n_in, nh, n_out, tanh)
    for c in range(0, head, _W):
        _group(net, (simd.offset(simd.address(xt), r0 + c), simd.offset(simd.address(yt), r0 + c),
                     n),
               (simd.offset(wp, c), simd.offset(rp, c), simd.offset(wp, nh * mp + c), mp),
               grad_too)
    if head == m:
        return
    for lane in range(_W):
        c = r0 + head + lane
        for i in range(n_in):
            xpad[i * _W + lane] = xt[i, c] if head + lane < m else 0.0
        for k in range(n_out):
            ypad[k * _W + lane] = yt[k, c] if head + lane < m else 0.0
    _group(net, (xpad, ypad, _W),
           (simd.offset(wp, head), simd.offset(rp, head), simd.offset(wp, nh * mp + head), mp),
           grad_too)


@kernel
def _squares(widths, m, work):
    """``sum_k |r_k|^2 / 2`` of a block whose residuals are in the scratch, the outputs in
    order."""
    mp = _row_stride(m)
    rp = simd.offset(simd.address(work), 2 * widths[1] * mp)
    s = 0.0
    for k in range(widths[2]):
        rk = simd.offset(rp, k * mp)
        s += 0.5 * reduce.dot(rk, rk, m)
    return s


@kernel
def loss(theta, widths, act, xt, yt, block, work):
    """``S(w)`` (float64); NaN or inf if the network overflowed."""
    n = xt.shape[1]
    s = 0.0
    for r0 in range(0, n, block):
        r1 = min(n, r0 + block)
        _forward(theta, widths, act, xt, yt, (r0, r1), work, False)
        s += _squares(widths, r1 - r0, work)
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
    for p in range(grad.shape[0]):
        grad[p] = 0.0
    wp = simd.address(work)
    gp = simd.address(grad)
    s = 0.0
    for r0 in range(0, n, block):
        r1 = min(n, r0 + block)
        m = r1 - r0
        mp = _row_stride(m)
        _forward(theta, widths, act, xt, yt, (r0, r1), work, True)
        s += _squares(widths, m, work)
        hp = wp
        dp = simd.offset(wp, nh * mp)
        rp = simd.offset(wp, 2 * nh * mp)
        reduce.sums(rp, mp, n_out, m, gp, o_b2)
        for k in range(n_out):
            reduce.dots(simd.offset(rp, k * mp), hp, mp, nh, m, gp, o_w2 + k * nh, 1)
        reduce.sums(dp, mp, nh, m, gp, o_b1)
        for i in range(n_in):
            reduce.dots(simd.offset(simd.address(xt), i * n + r0), dp, mp, nh, m, gp, i, n_in)
    return s
