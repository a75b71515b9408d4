"""Element-wise float arithmetic for the kernels: a vectorisable ``exp`` and logistic unit.

``math.exp`` is a scalar libm call that LLVM cannot vectorise (this llvmlite has no SVML), so
the logistic units and the softmax use the branch-free arithmetic below, which LLVM vectorises
inside the element loops. Accuracy and special values are checked in
tests/kernels/test_kernel_numerics.py; timings are in docs/performance.md.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from thermonet.kernels.jit import kernel
from thermonet.kernels.matmul import simd

# ---------------------------------------------------------------------------------------------
# exp in plain arithmetic
#
# ``math.exp`` is a scalar libm call that LLVM cannot vectorise (and this llvmlite has no SVML),
# ``exp`` is branch-free arithmetic that
# LLVM vectorises inside the element loops: Cody-Waite range reduction x = n ln2 + r with
# |r| <= ln2/2, the degree-13 Taylor polynomial of exp(r) (truncation < 2e-18 relative) in
# Horner form with fused multiply-adds (``llvm.fma``: one rounding per step, 13 vector FMAs
# instead of 13 multiplies and 13 adds), and
# the scale 2^n built from exponent bits in two halves, so that results in the subnormal range
# (x < -708.4) round once and x just below log(DBL_MAX) = 709.78 does not overflow early.
# Measured error: <= 1.05 ulp from the correctly rounded exp (tests/kernels/test_kernel_numerics.py).
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
def fma(typingctx, a, b, c):
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


#: 2^52 + 1023: adding it to an integer-valued k in [-1023, 2^52 - 1024] leaves k + 1023 in
#: the low bits of the sum's significand
_EXP2_MAGIC = 4503599627371519.0


@kernel
def pow2(k):
    """``2^k`` for an integer-valued float64 ``k`` in [-1022, 1023], from exponent bits:
    ``(k + 1023) << 52``, with ``k + 1023`` read from the bits of ``k + 2^52 + 1023``. The same
    bits as converting ``k`` to an integer, but a vector loop needs no conversion from double to
    64-bit integer, which AVX2 lacks (LLVM then converts one lane at a time). On AMD EPYC, AVX2
    code for the logistic units of a 500 x 40 block took 18.6 µs this way, 23.7 µs with the
    conversion; AVX-512 code 9.9 and 10.3 µs."""
    return np.int64(np.float64(k + _EXP2_MAGIC).view(np.int64) << 52).view(np.float64)


@kernel
def exp(x):
    """``exp(x)`` for a float64 ``x``, in vectorisable arithmetic (see the note above)."""
    xc = x if x < _EXP_XMAX else _EXP_XMAX
    xc = xc if xc > _EXP_XMIN else _EXP_XMIN          # NaN -> _EXP_XMIN here, restored below
    n = np.floor(xc * _LOG2E + 0.5)
    r = fma(-n, _LN2_LO, fma(-n, _LN2_HI, xc))
    p = fma(r, _C13, _C12)
    p = fma(r, p, _C11)
    p = fma(r, p, _C10)
    p = fma(r, p, _C9)
    p = fma(r, p, _C8)
    p = fma(r, p, _C7)
    p = fma(r, p, _C6)
    p = fma(r, p, _C5)
    p = fma(r, p, _C4)
    p = fma(r, p, _C3)
    p = fma(r, p, _C2)
    p = fma(r, p, 1.0)
    p = fma(r, p, 1.0)
    n1 = np.floor(n * 0.5)
    s1 = pow2(n1)
    s2 = pow2(n - n1)
    y = p * s1 * s2
    return y if x == x else x


# The float64 logistic unit 1/(1 + exp(-v)) in one rational step. Writing exp(x) = 2^k N/D
# with Cephes' Pade-type form on |r| <= ln2/2 (N = Q(r^2) + r P(r^2), D = Q(r^2) - r P(r^2), P of
# degree 2 and Q of degree 3 in r^2; Moshier, Cephes exp.c, ~1 ulp) gives
#     1/(1 + exp(-v)) = D/(D + 2^k N)    with x = -v = k ln2 + r,
# one division per unit (the polynomial's own division merges with the logistic's), and 6 FMAs
# instead of 13 (timings: docs/performance.md), within 3.4 ulp of the exact value
# (tests/kernels/test_kernel_numerics.py). Saturation: x is clamped to [-40, 708]; for v > 40 the result
# rounds to 1, and for v <= -708 (exact value below 3.3e-308) the unit returns 0, never a subnormal
# (subnormal operands slow the GEMMs down). NaN in, NaN out.
_LP0 = 1.26177193074810590878e-4
_LP1 = 3.02994407707441961300e-2
_LP2 = 9.99999999999999999910e-1
_LQ0 = 3.00198505138664455042e-6
_LQ1 = 2.52448340349684104192e-3
_LQ2 = 2.27265548208155028766e-1
_LQ3 = 2.00000000000000000009e0
_LOGISTIC_VMIN = -708.0


@kernel
def logistic(v):
    """``1 / (1 + exp(-v))`` for a float64 ``v``, in vectorisable arithmetic (note above)."""
    x = -v
    x = x if x < -_LOGISTIC_VMIN else -_LOGISTIC_VMIN
    x = x if x > -40.0 else -40.0                    # NaN -> -40 here, restored below
    k = np.floor(x * _LOG2E + 0.5)
    r = fma(-k, _LN2_LO, fma(-k, _LN2_HI, x))
    rr = r * r
    px = r * fma(fma(_LP0, rr, _LP1), rr, _LP2)
    q = fma(fma(fma(_LQ0, rr, _LQ1), rr, _LQ2), rr, _LQ3)
    s = pow2(k)                                                          # k in [-58, 1021]
    d = q - px
    y = d / (d + s * (q + px))
    y = y if v > _LOGISTIC_VMIN else 0.0
    return y if v == v else v


@kernel
def _pade8(x, k):
    """``rP(r^2)`` and ``Q(r^2)`` of :func:`logistic`'s form ``exp(x) = 2^k (Q + rP)/(Q - rP)``
    for eight lanes, with ``r = x - k ln2`` in two steps (ln2's high part first)."""
    mk = simd.sub(simd.splat(-0.0), k)
    r = simd.fma(mk, simd.splat(_LN2_LO), simd.fma(mk, simd.splat(_LN2_HI), x))
    rr = simd.mul(r, r)
    px = simd.mul(r, simd.fma(simd.fma(simd.splat(_LP0), rr, simd.splat(_LP1)), rr,
                              simd.splat(_LP2)))
    q = simd.fma(simd.fma(simd.fma(simd.splat(_LQ0), rr, simd.splat(_LQ1)), rr,
                          simd.splat(_LQ2)), rr, simd.splat(_LQ3))
    return px, q


@kernel
def logistic8(v):
    """:func:`logistic` of eight lanes (a :data:`thermonet.kernels.matmul.simd.f64x8`): the same
    operations in the same order, so every lane has the bits of the scalar function."""
    x = simd.sub(simd.splat(-0.0), v)
    hi = simd.splat(-_LOGISTIC_VMIN)
    x = simd.where("<", x, hi, x, hi)
    lo = simd.splat(-40.0)
    x = simd.where(">", x, lo, x, lo)
    k = simd.floor(simd.add(simd.mul(x, simd.splat(_LOG2E)), simd.splat(0.5)))
    px, q = _pade8(x, k)
    d = simd.sub(q, px)
    y = simd.div(d, simd.add(d, simd.mul(simd.exp2i(k), simd.add(q, px))))
    y = simd.where(">", v, simd.splat(_LOGISTIC_VMIN), y, simd.splat(0.0))
    return simd.where("==", v, v, y, v)


@kernel
def tanh8(z):
    """``tanh(z)`` of eight lanes (a :data:`thermonet.kernels.matmul.simd.f64x8`) in one rational
    step: with ``x = -2 z = k ln2 + r`` and Cephes' ``exp(x) = 2^k (Q + rP)/(Q - rP)`` (the form
    of :func:`logistic`), ``tanh(z) = (1 - exp(x))/(1 + exp(x)) = (Q (1 - 2^k) - rP (1 + 2^k)) /
    (Q (1 + 2^k) - rP (1 - 2^k))``. Written so, the numerator has no cancellation near
    ``z = 0`` (where ``2 logistic(2 z) - 1`` loses the relative accuracy of small values). ``x``
    is clamped to [-40, 40], beyond which the result rounds to -1 or 1; the clamps keep a NaN,
    which then gives NaN."""
    x = simd.mul(z, simd.splat(-2.0))
    hi = simd.splat(40.0)
    x = simd.where("<", hi, x, hi, x)
    lo = simd.splat(-40.0)
    x = simd.where(">", lo, x, lo, x)
    k = simd.floor(simd.fma(x, simd.splat(_LOG2E), simd.splat(0.5)))
    px, q = _pade8(x, k)
    s = simd.exp2i(k)
    one = simd.splat(1.0)
    a = simd.sub(one, s)
    b = simd.add(one, s)
    num = simd.fms(q, a, simd.mul(px, b))
    den = simd.fms(q, b, simd.mul(px, a))
    return simd.div(num, den)


# float32 reduction constants (Cephes' expf): x = k ln2 + r with |r| <= ln2/2, in float32
# arithmetic so that LLVM packs twice as many lanes as in float64.
_F32 = np.float32
_LOG2E_F = _F32(1.4426950408889634)
_LN2_HI_F = _F32(0.693359375)             # k * _LN2_HI_F is exact for |k| < 2^15
_LN2_LO_F = _F32(-2.12194440e-4)
_HALF_F = _F32(0.5)
ONE_F = _F32(1.0)


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
def logistic32(v):
    """``1 / (1 + exp(-v))`` for a float32 ``v``, in vectorisable float32 arithmetic."""
    x = -v
    x = x if x < _LOGISTIC_XMAX_F else _LOGISTIC_XMAX_F
    x = x if x > _LOGISTIC_XMIN_F else _LOGISTIC_XMIN_F   # NaN -> -20 here, restored below
    k = np.floor(x * _LOG2E_F + _HALF_F)
    r = fma(-k, _LN2_LO_F, fma(-k, _LN2_HI_F, x))
    rr = r * r
    q = fma(_PADE_B_F, rr, _PADE_A_F)
    p = r * (rr + _PADE_C_F)
    s = np.int32((np.int32(k) + 127) << 23).view(np.float32)            # 2^k, k in [-29, 127]
    d = q - p
    y = d / (d + s * (q + p))
    return y if v == v else v


@kernel
def sigmoid_inplace(z, bias):
    """``z[n, j] <- 1 / (1 + exp(-(z[n, j] + bias[j])))``, in place, in the dtype of ``z``."""
    rows, cols = z.shape
    if z.itemsize == 4:
        for r in range(rows):
            for c in range(cols):
                v = _F32(z[r, c] + bias[c])
                z[r, c] = logistic32(v)
    else:
        for r in range(rows):
            for c in range(cols):
                z[r, c] = logistic(np.float64(z[r, c] + bias[c]))


_TWO_F = _F32(2.0)


@kernel
def tanh_inplace(z, bias):
    """``z[n, j] <- tanh(z[n, j] + bias[j])``, in place, in the dtype of ``z``.

    ``tanh(v) = 2 logistic(2 v) - 1`` through the vectorisable logistic units above: the
    absolute error is a few ulp of 1 (tests/kernels/test_regression_kernels.py), which is what a
    hidden unit's output needs (its relative error near v = 0 is larger, and irrelevant there:
    the unit's output enters sums of order-one terms).
    """
    rows, cols = z.shape
    if z.itemsize == 4:
        for r in range(rows):
            for c in range(cols):
                v = _F32(z[r, c] + bias[c])
                z[r, c] = _TWO_F * logistic32(_TWO_F * v) - ONE_F
    else:
        for r in range(rows):
            for c in range(cols):
                z[r, c] = 2.0 * logistic(2.0 * np.float64(z[r, c] + bias[c])) - 1.0


@kernel
def add_bias(z, bias):
    """``z[n, j] += bias[j]``, in place."""
    rows, cols = z.shape
    for r in range(rows):
        for c in range(cols):
            z[r, c] += bias[c]
