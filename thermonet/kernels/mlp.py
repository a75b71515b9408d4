"""Fully connected networks on a flat parameter vector: energy and gradient kernels.

Layout (the paper's code, original-code-spec.md §1.2): for each layer in order (hidden 1, ...,
hidden H, output), the weights ``W`` of shape ``(out, in)`` flattened row-major
(``index = o*in + i``), then the biases ``b`` (length ``out``).

The network is described by data, not by code, so one compiled kernel serves M(1), M(3), M(3*)
and every user-defined MLP:

``widths`` : int64 array ``[n_in, h_1, ..., h_H, n_out]``
``out_act`` : 0 for a linear output layer (M1, M3), 1 for a logistic output layer (M3*)

Hidden units are logistic. The energy is the summed cross-entropy
``E(D|w) = sum_n [logsumexp(z_n) - z_n[y_n]]`` (not a mean), computed with the max-shift
log-sum-exp and accumulated in float64 whatever the dtype of the arrays.

Blocks
------
The data set is processed in blocks of ``block`` rows. Each block's gradient is a separate
partial sum, and partials are added in block order. The serial kernel
(:func:`loss_and_grad`) and the threaded one (:func:`loss_and_grad_parallel`) perform exactly
the same floating-point operations in the same order, so their results are bitwise identical
for any number of threads. The block size is part of the numerical recipe; the thread count is
not.

Scratch
-------
Kernels take a caller-owned ``work`` array (see :func:`work_size`) so that no large array is
allocated inside a sampling loop. (The only allocation per block is a float64 array of
``block * (n_out + 1)`` entries for the softmax.)

Speed (docs/performance.md)
---------------------------
The matrix products go through :func:`thermonet.kernels.blas.gemm`: Intel MKL when it is
installed, else ``np.dot`` (SciPy's OpenBLAS), in layouts each handles well (with OpenBLAS the
small weight matrices above the first layer are transposed into scratch for the forward
products). Everything else is written so that LLVM vectorises it:
the logistic units are one rational step each, :func:`_logistic` (float64) and
:func:`_logistic32` (float32 kernels), instead of the scalar libm ``math.exp`` (no SVML here),
and the softmax takes its exponentials in one flat loop. Parallel kernels leave BLAS
single-threaded per Numba thread (:func:`thermonet.kernels.threads.limit`).
"""

from __future__ import annotations

import math

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic, overload

from thermonet.kernels._jit import kernel
from thermonet.kernels.blas import BACKEND as _BLAS_BACKEND
from thermonet.kernels.blas import gemm, gemm_acc

LINEAR = 0
LOGISTIC = 1

#: transpose the small weight matrices for the forward products (helps OpenBLAS, not MKL)
_TRANSPOSE_SMALL = _BLAS_BACKEND == "numpy"


@kernel
def n_params(widths):
    """Number of parameters of the MLP ``widths`` (weights plus biases of every layer)."""
    n = 0
    for layer in range(widths.shape[0] - 1):
        n += (widths[layer] + 1) * widths[layer + 1]
    return n


@kernel
def fan_in(widths, out):
    """Write the fan-in, *including the bias*, of the neuron each parameter feeds into.

    ``out`` (int64, shape ``(n_params,)``) is overwritten. This is ``k_i`` of the paper's
    Sec. 3.2: 257 for every parameter of the first layer of a 256-input network.
    """
    pos = 0
    for layer in range(widths.shape[0] - 1):
        k = widths[layer] + 1
        m = k * widths[layer + 1]
        for i in range(m):
            out[pos + i] = k
        pos += m


@kernel
def work_size(widths, block):
    """Length of the scratch array one block of ``block`` rows needs."""
    return block * _act_width(widths) + _wt_size(widths) + _widest(widths)


@kernel
def _widest(widths):
    """Room for one layer's bias gradient (the kick mode of :func:`_block_loss_and_grad`)."""
    m = 0
    for layer in range(1, widths.shape[0]):
        m = max(m, widths[layer])
    return m


@kernel
def _act_width(widths):
    """Scratch entries per data row: the activations of every layer plus two delta buffers."""
    total = 0
    widest = 0
    for layer in range(1, widths.shape[0]):
        total += widths[layer]
        widest = max(widest, widths[layer])
    return total + 2 * widest


@kernel
def _wt_size(widths):
    """Room for a transposed copy of the largest weight matrix above the first layer."""
    m = 0
    for layer in range(1, widths.shape[0] - 1):
        m = max(m, widths[layer] * widths[layer + 1])
    return m


@kernel
def n_blocks(n_data, block):
    """Number of blocks of at most ``block`` rows covering ``n_data`` rows (0 for no data)."""
    return (n_data + block - 1) // block


# ---------------------------------------------------------------------------------------------
# exp in plain arithmetic
#
# ``math.exp`` is a scalar libm call that LLVM cannot vectorise (and this llvmlite has no SVML),
# which made the logistic units ~30-40% of the kernel. ``_exp`` is branch-free arithmetic that
# LLVM vectorises inside the element loops: Cody-Waite range reduction x = n ln2 + r with
# |r| <= ln2/2, the degree-13 Taylor polynomial of exp(r) (truncation < 2e-18 relative) in
# Horner form with fused multiply-adds (``llvm.fma``: one rounding per step, 13 vector FMAs
# instead of 13 multiplies and 13 adds; measured 32% cheaper logistic layers), and
# the scale 2^n built from exponent bits in two halves, so that results in the subnormal range
# (x < -708.4) round once and x just below log(DBL_MAX) = 709.78 does not overflow early.
# Measured error: <= 1.05 ulp from the correctly rounded exp (tests/test_kernel_numerics.py).
# Special values: exp(x > 709.78) = inf, exp(x < -745.13) = 0, exp(+-inf) = inf / 0,
# exp(NaN) = NaN. This relies on IEEE evaluation order, i.e. fastmath off (the default). Under
# the opt-in THERMONET_FASTMATH=1 ("reassoc") LLVM may merge the two halves of ln 2 and the two
# scale factors: measured errors then reach 2.4e-14 relative, and exp(x) for x in
# (709.09, 709.78) overflows to inf (a logistic unit then gives 0 instead of ~1e-308).

_LOG2E = 1.4426950408889634               # 1/ln 2
_LN2_HI = 6.93147180369123816490e-01      # ln 2, high part: n * _LN2_HI is exact for |n| < 2^11
_LN2_LO = 1.90821492927058770002e-10      # ln 2 - _LN2_HI
_EXP_XMAX = 710.0                         # exp(710) = inf
_EXP_XMIN = -746.0                        # exp(-746) rounds to 0
_C2 = 1.0 / 2
_C3 = 1.0 / 6
_C4 = 1.0 / 24
_C5 = 1.0 / 120
_C6 = 1.0 / 720
_C7 = 1.0 / 5040
_C8 = 1.0 / 40320
_C9 = 1.0 / 362880
_C10 = 1.0 / 3628800
_C11 = 1.0 / 39916800
_C12 = 1.0 / 479001600
_C13 = 1.0 / 6227020800


@intrinsic
def _fma(typingctx, a, b, c):
    """``a * b + c`` with one rounding (LLVM's ``llvm.fma``; vectorises to vfmadd)."""
    if not (isinstance(a, types.Float) and a == b == c):
        return None
    sig = a(a, b, c)

    def codegen(context, builder, signature, args):
        t = args[0].type
        name = "llvm.fma.f32" if a == types.float32 else "llvm.fma.f64"
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(t, [t, t, t]), name)
        return builder.call(fn, args)

    return sig, codegen


@kernel
def _exp(x):
    """``exp(x)`` for a float64 ``x``, in vectorisable arithmetic (see the note above)."""
    xc = x if x < _EXP_XMAX else _EXP_XMAX
    xc = xc if xc > _EXP_XMIN else _EXP_XMIN          # NaN -> _EXP_XMIN here, restored below
    n = np.floor(xc * _LOG2E + 0.5)
    r = _fma(-n, _LN2_LO, _fma(-n, _LN2_HI, xc))
    p = _fma(r, _C13, _C12)
    p = _fma(r, p, _C11)
    p = _fma(r, p, _C10)
    p = _fma(r, p, _C9)
    p = _fma(r, p, _C8)
    p = _fma(r, p, _C7)
    p = _fma(r, p, _C6)
    p = _fma(r, p, _C5)
    p = _fma(r, p, _C4)
    p = _fma(r, p, _C3)
    p = _fma(r, p, _C2)
    p = _fma(r, p, 1.0)
    p = _fma(r, p, 1.0)
    n1 = np.floor(n * 0.5)
    s1 = np.int64((np.int64(n1) + 1023) << 52).view(np.float64)        # 2^n1
    s2 = np.int64((np.int64(n - n1) + 1023) << 52).view(np.float64)    # 2^(n - n1)
    y = p * s1 * s2
    return y if x == x else x


# The float64 logistic unit 1/(1 + exp(-v)) in one rational step. Writing exp(x) = 2^k N/D
# with Cephes' Pade-type form on |r| <= ln2/2 (N = Q(r^2) + r P(r^2), D = Q(r^2) - r P(r^2), P of
# degree 2 and Q of degree 3 in r^2; Moshier, Cephes exp.c, ~1 ulp) gives
#     1/(1 + exp(-v)) = D/(D + 2^k N)    with x = -v = k ln2 + r,
# one division per unit (the polynomial's own division merges with the logistic's), and 6 FMAs
# instead of 13. Measured: 7.4 us per 256 x 40 layer against 11.5 us for 1/(1 + _exp(-v)),
# within 3.4 ulp of the exact value (tests/test_kernel_numerics.py). Saturation: x is clamped
# to [-40, 708]; for v > 40 the result rounds to 1, and for v <= -708 (exact value below
# 3.3e-308) the unit returns 0, never a subnormal (subnormal operands slow the GEMMs down).
# NaN in, NaN out.
_LP0 = 1.26177193074810590878e-4
_LP1 = 3.02994407707441961300e-2
_LP2 = 9.99999999999999999910e-1
_LQ0 = 3.00198505138664455042e-6
_LQ1 = 2.52448340349684104192e-3
_LQ2 = 2.27265548208155028766e-1
_LQ3 = 2.00000000000000000009e0
_LOGISTIC_VMIN = -708.0


@kernel
def _logistic(v):
    """``1 / (1 + exp(-v))`` for a float64 ``v``, in vectorisable arithmetic (note above)."""
    x = -v
    x = x if x < -_LOGISTIC_VMIN else -_LOGISTIC_VMIN
    x = x if x > -40.0 else -40.0                    # NaN -> -40 here, restored below
    k = np.floor(x * _LOG2E + 0.5)
    r = _fma(-k, _LN2_LO, _fma(-k, _LN2_HI, x))
    rr = r * r
    px = r * _fma(_fma(_LP0, rr, _LP1), rr, _LP2)
    q = _fma(_fma(_fma(_LQ0, rr, _LQ1), rr, _LQ2), rr, _LQ3)
    s = np.int64((np.int64(k) + 1023) << 52).view(np.float64)          # 2^k, k in [-58, 1021]
    d = q - px
    y = d / (d + s * (q + px))
    y = y if v > _LOGISTIC_VMIN else 0.0
    return y if v == v else v


# float32 reduction constants (Cephes' expf): x = k ln2 + r with |r| <= ln2/2, in float32
# arithmetic so that LLVM packs twice as many lanes as in float64.
_F32 = np.float32
_LOG2E_F = _F32(1.4426950408889634)
_LN2_HI_F = _F32(0.693359375)             # k * _LN2_HI_F is exact for |k| < 2^15
_LN2_LO_F = _F32(-2.12194440e-4)
_HALF_F = _F32(0.5)
_ONE_F = _F32(1.0)


# The float32 logistic unit in the same rational form as the float64 one, with the [3/3] Pade
# approximant of exp on |r| <= ln2/2, exp(r) ~ (120 + 12 r^2 + r (60 + r^2))/(120 + 12 r^2 -
# r (60 + r^2)) (truncation error below 1e-8, under float32's 6e-8 rounding), so
#     1/(1 + exp(-v)) = D/(D + 2^k N)    with x = -v = k ln2 + r,
# one division and 3 FMAs per unit (the float32 exp polynomial it replaces, Cephes' expf with a
# division after it, took 7 FMAs).
# Range: x is clamped to [-20, 88]; for v > 20 the result rounds to 1. For x above about 84,
# 2^k N overflows to inf and the unit returns 0 (the exact value, below 3e-37, is still a
# normal float32 there, so the unit never produces a subnormal). NaN in, NaN out.
_LOGISTIC_XMAX_F = _F32(88.0)             # k <= 127: 2^k is a normal float32
_LOGISTIC_XMIN_F = _F32(-20.0)            # exp(-20) = 2.1e-9 < float32 eps/2
_PADE_A_F = _F32(120.0)
_PADE_B_F = _F32(12.0)
_PADE_C_F = _F32(60.0)


@kernel
def _logistic32(v):
    """``1 / (1 + exp(-v))`` for a float32 ``v``, in vectorisable float32 arithmetic."""
    x = -v
    x = x if x < _LOGISTIC_XMAX_F else _LOGISTIC_XMAX_F
    x = x if x > _LOGISTIC_XMIN_F else _LOGISTIC_XMIN_F   # NaN -> -20 here, restored below
    k = np.floor(x * _LOG2E_F + _HALF_F)
    r = _fma(-k, _LN2_LO_F, _fma(-k, _LN2_HI_F, x))
    rr = r * r
    q = _fma(_PADE_B_F, rr, _PADE_A_F)
    p = r * (rr + _PADE_C_F)
    s = np.int32((np.int32(k) + 127) << 23).view(np.float32)            # 2^k, k in [-29, 127]
    d = q - p
    y = d / (d + s * (q + p))
    return y if v == v else v


@kernel
def _sigmoid_inplace(z, bias):
    """``z[n, j] <- 1 / (1 + exp(-(z[n, j] + bias[j])))``, in place, in the dtype of ``z``."""
    rows, cols = z.shape
    if z.itemsize == 4:
        for r in range(rows):
            for c in range(cols):
                v = _F32(z[r, c] + bias[c])
                z[r, c] = _logistic32(v)
    else:
        for r in range(rows):
            for c in range(cols):
                z[r, c] = _logistic(np.float64(z[r, c] + bias[c]))


@kernel
def _add_bias(z, bias):
    rows, cols = z.shape
    for r in range(rows):
        for c in range(cols):
            z[r, c] += bias[c]


@kernel
def _forward(theta, widths, out_act, xb, work):
    """Forward pass of one block; returns the offset of the output activations in ``work``.

    Activations of layer ``l`` (after its non-linearity) are stored row-major in ``work``.
    """
    rows = xb.shape[0]
    n_layers = widths.shape[0] - 1
    t_off = rows * _act_width(widths)
    p_off = 0
    a_off = 0
    prev_off = -1
    for layer in range(n_layers):
        n_in = widths[layer]
        n_out = widths[layer + 1]
        w = theta[p_off:p_off + n_out * n_in].reshape((n_out, n_in))
        b = theta[p_off + n_out * n_in:p_off + n_out * n_in + n_out]
        z = work[a_off:a_off + rows * n_out].reshape((rows, n_out))
        if layer == 0:
            gemm(False, True, xb, w, z)
        else:
            a_prev = work[prev_off:prev_off + rows * n_in].reshape((rows, n_in))
            if _TRANSPOSE_SMALL:
                # OpenBLAS is ~25% slower on (rows x k) (k x m)^T than on a plain product for
                # these small k, m: transpose the (small) weight matrix into scratch first.
                wt = work[t_off:t_off + n_in * n_out].reshape((n_in, n_out))
                for o in range(n_out):
                    for i in range(n_in):
                        wt[i, o] = w[o, i]
                gemm(False, False, a_prev, wt, z)
            else:
                gemm(False, True, a_prev, w, z)
        if layer < n_layers - 1 or out_act == LOGISTIC:
            _sigmoid_inplace(z, b)
        else:
            _add_bias(z, b)
        p_off += n_out * n_in + n_out
        prev_off = a_off
        a_off += rows * n_out
    return prev_off


@kernel
def _softmax_exp(logits, t):
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
        t[i] = _exp(t[i])


#: rows whose softmax normalisers are multiplied together before one ``log`` (see _block_ce)
_LOG_CHUNK = 64


@kernel
def _block_ce(logits, yb, delta, want_delta):
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
    _softmax_exp(logits, t)
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
def _block_energy_and_delta(logits, yb, delta):
    """Cross-entropy of one block; writes dE/dlogits (softmax - one-hot) to ``delta``."""
    return _block_ce(logits, yb, delta, True)


@kernel
def _block_energy(logits, yb):
    return _block_ce(logits, yb, logits, False)


@kernel
def _bias_out(out, acc, kick):
    """The bias part of :func:`_block_loss_and_grad`'s output from the column sums ``acc``."""
    for c in range(out.shape[0]):
        out[c] = out[c] - kick * acc[c]


@kernel
def _block_loss_and_grad(theta, widths, out_act, xb, yb, work, grad, kicking=False, kick=0.0):
    """Energy of one block and its gradient written (not added) to ``grad``.

    With ``kicking`` true (float64 only) ``grad`` is instead the momentum vector ``p`` and
    receives ``p -= kick * gradient`` directly: the weight gradients are accumulated into ``p``
    by the matrix products (:func:`thermonet.kernels.blas.gemm_acc`) and the bias gradients
    (column sums, formed in scratch at the end of ``work``) are subtracted afterwards. The
    gradient itself is never written to memory, which saves the leapfrog pass two streams
    over the parameters (docs/performance.md).
    """
    rows = xb.shape[0]
    n_layers = widths.shape[0] - 1
    out_off = _forward(theta, widths, out_act, xb, work)
    n_cls = widths[n_layers]
    widest = 0
    total = 0
    for layer in range(1, n_layers + 1):
        widest = max(widest, widths[layer])
        total += widths[layer]
    d_off = rows * total
    logits = work[out_off:out_off + rows * n_cls].reshape((rows, n_cls))
    delta = work[d_off:d_off + rows * n_cls].reshape((rows, n_cls))
    e = _block_energy_and_delta(logits, yb, delta)
    if out_act == LOGISTIC:
        for r in range(rows):
            for c in range(n_cls):
                a = logits[r, c]
                delta[r, c] *= a * (_ONE_F - a)
    # Backward, from the output layer down. ``cur`` and ``nxt`` alternate between the two
    # delta buffers at the end of ``work``. Each layer's bias gradient (the column sums of its
    # delta, rows in ascending order) is accumulated in the same pass that forms that delta.
    p_end = theta.shape[0]
    acc_off = rows * _act_width(widths) + _wt_size(widths)
    gb = work[acc_off:acc_off + n_cls] if kicking else grad[p_end - n_cls:p_end]
    for c in range(n_cls):
        gb[c] = 0.0
    for r in range(rows):
        for c in range(n_cls):
            gb[c] += delta[r, c]
    if kicking:
        _bias_out(grad[p_end - n_cls:p_end], gb, kick)
    a_off = out_off
    cur = d_off
    nxt = d_off + rows * widest
    for layer in range(n_layers - 1, -1, -1):
        n_in = widths[layer]
        n_out = widths[layer + 1]
        p_off = p_end - (n_out * n_in + n_out)
        dz = work[cur:cur + rows * n_out].reshape((rows, n_out))
        gw = grad[p_off:p_off + n_out * n_in].reshape((n_out, n_in))
        if layer == 0:
            if kicking:
                gemm_acc(True, False, dz, xb, gw, -kick)
            else:
                gemm(True, False, dz, xb, gw)
        else:
            prev_off = a_off - rows * n_in
            a_prev = work[prev_off:prev_off + rows * n_in].reshape((rows, n_in))
            if kicking:
                gemm_acc(True, False, dz, a_prev, gw, -kick)
            else:
                gemm(True, False, dz, a_prev, gw)
            w = theta[p_off:p_off + n_out * n_in].reshape((n_out, n_in))
            da = work[nxt:nxt + rows * n_in].reshape((rows, n_in))
            gemm(False, False, dz, w, da)
            # the bias gradient of the layer below
            gb = work[acc_off:acc_off + n_in] if kicking else grad[p_off - n_in:p_off]
            for c in range(n_in):
                gb[c] = 0.0
            # _ONE_F, not 1.0: a float64 literal would promote the float32 kernels' loop to
            # float64 (half the vector lanes, two conversions per element); float64 arrays
            # promote _ONE_F exactly, so their results are unchanged
            for r in range(rows):
                for c in range(n_in):
                    a = a_prev[r, c]
                    v = da[r, c] * (a * (_ONE_F - a))
                    da[r, c] = v
                    gb[c] += v
            if kicking:
                _bias_out(grad[p_off - n_in:p_off], gb, kick)
            cur, nxt = nxt, cur
            a_off = prev_off
        p_end = p_off
    return e


@kernel
def loss(theta, widths, out_act, x, y, block, work):
    """Energy ``E(D|w)`` (summed cross-entropy, float64) of the MLP at ``theta``.

    Parameters
    ----------
    theta : ndarray of float64 or float32, shape (n_params,)
    widths : ndarray of int64, shape (n_layers + 1,)
    out_act : int, 0 (linear) or 1 (logistic)
    x : ndarray, same dtype as theta, shape (n_data, widths[0]), C-contiguous
    y : ndarray of int64, shape (n_data,), labels in ``[0, widths[-1])``
    block : int, rows per block
    work : ndarray, same dtype as theta, shape (>= work_size(widths, block),)

    Returns
    -------
    float
        The energy in nats; NaN or inf if the forward pass overflowed.
    """
    n = x.shape[0]
    n_layers = widths.shape[0] - 1
    n_cls = widths[n_layers]
    e = 0.0
    for blk in range(n_blocks(n, block)):
        r0 = blk * block
        r1 = min(n, r0 + block)
        rows = r1 - r0
        out_off = _forward(theta, widths, out_act, x[r0:r1], work)
        logits = work[out_off:out_off + rows * n_cls].reshape((rows, n_cls))
        e += _block_energy(logits, y[r0:r1])
    return e


@kernel
def loss_and_grad(theta, widths, out_act, x, y, block, work, partial, grad):
    """Energy and gradient in one pass, serially over blocks.

    ``grad`` (shape ``(n_params,)``) is overwritten with dE/dtheta; ``partial`` is scratch of
    shape ``(n_params,)``. Returns the energy (float64). Other arguments as in :func:`loss`.
    """
    n = x.shape[0]
    nb = n_blocks(n, block)
    if nb == 0:
        grad[:] = 0.0
        return 0.0
    e = _block_loss_and_grad(theta, widths, out_act, x[0:min(n, block)], y[0:min(n, block)],
                             work, grad)
    for blk in range(1, nb):
        r0 = blk * block
        r1 = min(n, r0 + block)
        e += _block_loss_and_grad(theta, widths, out_act, x[r0:r1], y[r0:r1], work, partial)
        for i in range(grad.shape[0]):
            grad[i] += partial[i]
    return e


def _kick_block(theta, widths, out_act, x, y, work, p, kick):
    """``(True, energy)`` after the kick-mode block kernel when every array is float64, else
    ``(False, 0.0)`` without doing anything (resolved at compile time, below)."""
    raise NotImplementedError("only callable from compiled code")


@overload(_kick_block, jit_options={"nogil": True})
def _kick_block_typed(theta, widths, out_act, x, y, work, p, kick):
    if all(getattr(a, "dtype", None) == types.float64 for a in (theta, x, work, p)):
        def impl(theta, widths, out_act, x, y, work, p, kick):
            return True, _block_loss_and_grad(theta, widths, out_act, x, y, work, p, True, kick)
    else:
        def impl(theta, widths, out_act, x, y, work, p, kick):
            return False, 0.0
    return impl


@kernel
def loss_and_kick(theta, widths, out_act, x, y, block, work, partial, grad, p, kick):
    """Energy, and the momentum update ``p -= kick * dE/dtheta`` (a leapfrog kick).

    With the data in one block and float64 arrays the gradient goes straight into ``p``
    (:func:`_block_loss_and_grad`'s kick mode) and ``grad`` is left untouched; otherwise the
    gradient is computed into ``grad`` by :func:`loss_and_grad` and ``p`` updated from it.
    Either way ``p`` ends up equal to ``p - kick * gradient`` up to the rounding of the matrix
    products (bitwise equal with the ``np.dot`` backend). Returns the energy, bitwise that of
    :func:`loss_and_grad`.
    """
    n = x.shape[0]
    if n_blocks(n, block) == 1:
        done, e = _kick_block(theta, widths, out_act, x, y, work, p, kick)
        if done:
            return e
    e = loss_and_grad(theta, widths, out_act, x, y, block, work, partial, grad)
    for i in range(p.shape[0]):
        p[i] = p[i] - kick * grad[i]
    return e


#: below this many partial-gradient entries (n_blocks * n_params) the ordered reduction of
#: :func:`loss_and_grad_parallel` runs on one thread (a second parallel region costs more)
_PAR_REDUCE_MIN = 1 << 17
_REDUCE_CHUNK = 2048


@kernel(parallel=True)
def loss_and_grad_parallel(theta, widths, out_act, x, y, block, n_slots, work_s, partial_b,
                           grad):
    """As :func:`loss_and_grad`, with the blocks spread over Numba's threads.

    The blocks are split into ``min(n_slots, n_blocks)`` contiguous ranges ("slots"), run in
    parallel (pass the number of threads as ``n_slots``: one slot per thread). ``work_s`` has
    shape ``(>= n_slots, work_size)``: one activation scratch per slot, reused by the slot's
    blocks while it is hot in cache (the thread id inside a kernel is a ctypes global that Numba
    cannot cache, so the slot, not the thread, owns the scratch). ``partial_b`` has shape
    ``(n_blocks, n_params)``. Slot 0 sums its blocks' gradients into ``grad`` as it goes, in
    block order, exactly as the serial kernel does; the other blocks' partial gradients are
    added afterwards, still in block order (in parallel over parameter chunks when there are
    many). So the result is bitwise identical to the serial kernel's for any ``n_slots`` and
    any thread count.
    """
    n = x.shape[0]
    nb = n_blocks(n, block)
    n_p = grad.shape[0]
    if nb == 0:
        grad[:] = 0.0
        return 0.0
    ns = max(1, min(n_slots, nb))
    e_b = np.zeros(nb)
    for s in numba.prange(ns):
        b0 = (s * nb) // ns
        b1 = ((s + 1) * nb) // ns
        for blk in range(b0, b1):
            r0 = blk * block
            r1 = min(n, r0 + block)
            if blk == 0:
                e_b[0] = _block_loss_and_grad(theta, widths, out_act, x[r0:r1], y[r0:r1],
                                              work_s[s], grad)
            else:
                e_b[blk] = _block_loss_and_grad(theta, widths, out_act, x[r0:r1], y[r0:r1],
                                                work_s[s], partial_b[blk])
                if s == 0:
                    for i in range(n_p):
                        grad[i] += partial_b[blk, i]
    e = e_b[0]
    for blk in range(1, nb):
        e += e_b[blk]
        e_b[blk] = e    # a running sum (a scan) is never vectorised: the additions stay in
        #                 block order even under THERMONET_FASTMATH's "reassoc" flag
    first = nb // ns    # slot 0 holds blocks 0 .. first - 1, already summed into grad
    if (nb - first) * n_p >= _PAR_REDUCE_MIN:
        n_chunks = (n_p + _REDUCE_CHUNK - 1) // _REDUCE_CHUNK
        for ch in numba.prange(n_chunks):
            i0 = ch * _REDUCE_CHUNK
            i1 = min(n_p, i0 + _REDUCE_CHUNK)
            for blk in range(first, nb):
                for i in range(i0, i1):
                    grad[i] += partial_b[blk, i]
    else:
        for blk in range(first, nb):
            for i in range(n_p):
                grad[i] += partial_b[blk, i]
    return e


@kernel
def loss_batch(theta_kp, widths, out_act, x, y, block, work, e_k):
    """Energies of many parameter vectors (rows of ``theta_kp``), written to ``e_k``."""
    for k in range(theta_kp.shape[0]):
        e_k[k] = loss(theta_kp[k], widths, out_act, x, y, block, work)


@kernel
def loss_and_grad_batch(theta_kp, widths, out_act, x, y, block, work, partial, grad_kp, e_k):
    """Energies and gradients of many parameter vectors, serially (one replica after another).

    ``grad_kp`` (shape ``(K, n_params)``) and ``e_k`` (shape ``(K,)``) are overwritten.
    """
    for k in range(theta_kp.shape[0]):
        e_k[k] = loss_and_grad(theta_kp[k], widths, out_act, x, y, block, work, partial,
                               grad_kp[k])


@kernel(parallel=True)
def loss_and_grad_batch_parallel(theta_kp, widths, out_act, x, y, block, work_k, partial_k,
                                 grad_kp, e_k):
    """As :func:`loss_and_grad_batch`, replicas spread over Numba's threads.

    ``work_k`` has shape ``(K, work_size)`` and ``partial_k`` shape ``(K, n_params)``. Each
    replica's result is bitwise identical to the serial kernel's.
    """
    for k in numba.prange(theta_kp.shape[0]):
        e_k[k] = loss_and_grad(theta_kp[k], widths, out_act, x, y, block, work_k[k],
                               partial_k[k], grad_kp[k])


@kernel
def predict_logits(theta, widths, out_act, x, block, work, logits_out):
    """Write the values entering the softmax (shape ``(n_data, n_out)``) to ``logits_out``."""
    n = x.shape[0]
    n_cls = widths[widths.shape[0] - 1]
    for blk in range(n_blocks(n, block)):
        r0 = blk * block
        r1 = min(n, r0 + block)
        rows = r1 - r0
        out_off = _forward(theta, widths, out_act, x[r0:r1], work)
        logits = work[out_off:out_off + rows * n_cls].reshape((rows, n_cls))
        for r in range(rows):
            for c in range(n_cls):
                logits_out[r0 + r, c] = logits[r, c]
