"""The eight-lane vector type of thermonet.kernels.matmul.simd, the functions built on it, and the
claim that kernels written with it compute the same bits on every x86-64 CPU.

* every operation, lane by lane, against the scalar IEEE operation (fused multiply-add
  against the exactly rounded value of ``a b + c``, from fractions);
* ``logistic8`` has the bits of the scalar ``logistic`` in every lane; ``tanh8`` is within
  3 ulp of ``tanh`` (mpmath at 50 digits) and keeps the relative accuracy of small arguments;
* the row-blocked ``reduce.dots``/``reduce.sums`` give each row the bits of ``reduce.vdot``/
  ``vsum`` of it alone (the order itself is tested in test_kernel_numerics.py);
* the shallow regression kernel compiled for AVX-512, for AVX2 and for plain x86-64 gives the
  same energy and gradient, to the bit: test_cross_isa.py.
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest

from thermonet.kernels import elementwise as ew
from thermonet.kernels.jit import kernel
from thermonet.kernels.matmul import reduce, simd

_BINARY = {"add": simd.add, "sub": simd.sub, "mul": simd.mul, "div": simd.div}


@kernel
def _binary_op(name_code, a, b, out):
    pa = simd.address(a)
    pb = simd.address(b)
    po = simd.address(out)
    for c in range(0, a.shape[0], simd.LANES):
        u = simd.load(pa, c)
        v = simd.load(pb, c)
        if name_code == 0:
            r = simd.add(u, v)
        elif name_code == 1:
            r = simd.sub(u, v)
        elif name_code == 2:
            r = simd.mul(u, v)
        else:
            r = simd.div(u, v)
        simd.store(po, c, r)


@kernel
def _ternary_op(fms, a, b, c_, out):
    pa = simd.address(a)
    pb = simd.address(b)
    pc = simd.address(c_)
    po = simd.address(out)
    for c in range(0, a.shape[0], simd.LANES):
        u = simd.load(pa, c)
        v = simd.load(pb, c)
        w = simd.load(pc, c)
        simd.store(po, c, simd.fms(u, v, w) if fms else simd.fma(u, v, w))


@kernel
def _misc(a, b, floor_out, lt_out, gt_out, eq_out, pow2_out, sums_out):
    pa = simd.address(a)
    pb = simd.address(b)
    for c in range(0, a.shape[0], simd.LANES):
        u = simd.load(pa, c)
        v = simd.load(pb, c)
        simd.store(simd.address(floor_out), c, simd.floor(u))
        simd.store(simd.address(lt_out), c, simd.where("<", u, v, u, v))
        simd.store(simd.address(gt_out), c, simd.where(">", u, v, u, v))
        simd.store(simd.address(eq_out), c, simd.where("==", u, v, simd.splat(1.0),
                                                      simd.splat(0.0)))
        simd.store(simd.address(pow2_out), c, simd.exp2i(simd.floor(u)))
        sums_out[c // simd.LANES] = simd.pairwise_sum(u)


@kernel
def _apply8(which, z, out):
    pz = simd.address(z)
    po = simd.address(out)
    for c in range(0, z.shape[0], simd.LANES):
        v = simd.load(pz, c)
        simd.store(po, c, ew.tanh8(v) if which == 0 else ew.logistic8(v))


@kernel
def _logistic_scalar(z, out):
    for c in range(z.shape[0]):
        out[c] = ew.logistic(z[c])


@kernel
def _dots(a, b, m, out):
    reduce.dots(simd.address(a), simd.address(b), b.shape[1], b.shape[0], m,
                simd.address(out), 0, 1)


@kernel
def _sums(b, m, out):
    reduce.sums(simd.address(b), b.shape[1], b.shape[0], m, simd.address(out), 0)


def _same_bits(x, y):
    return np.array_equal(np.asarray(x).view(np.uint64), np.asarray(y).view(np.uint64))


def _operands(rng, n=400):
    a = rng.normal(size=n) * 10.0 ** rng.integers(-5, 5, size=n)
    b = rng.normal(size=n) * 10.0 ** rng.integers(-5, 5, size=n)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e308, -5e-324, 1.0])
    a[:8], b[8:16] = special, special
    return a, b


@pytest.mark.parametrize("name", list(_BINARY))
def test_arithmetic_is_the_scalar_operation_in_every_lane(rng, name):
    a, b = _operands(rng)
    out = np.empty_like(a)
    with np.errstate(all="ignore"):
        _binary_op(list(_BINARY).index(name), a, b, out)
        ref = {"add": a + b, "sub": a - b, "mul": a * b, "div": a / b}[name]
    assert _same_bits(out[~np.isnan(ref)], ref[~np.isnan(ref)])
    assert np.all(np.isnan(out[np.isnan(ref)]))


def test_fused_multiply_add_rounds_once(rng):
    a = rng.normal(size=64)
    b = rng.normal(size=64)
    out = np.empty(64)
    for fms in (False, True):
        sign = -1 if fms else 1
        # c close to -sign a b: the result cancels, so the product's rounding would show
        c = -sign * a * b * (1 + rng.normal(size=64) * 1e-12)
        _ternary_op(fms, a, b, c, out)
        exact = [float(Fraction(u) * Fraction(v) + sign * Fraction(w))
                 for u, v, w in zip(a, b, c, strict=True)]
        assert _same_bits(out, exact)
        # and multiply-then-add would have given other bits in most lanes
        assert np.sum(out != a * b + sign * c) > 32


def test_floor_where_exp2i_and_pairwise_sum(rng):
    a, b = _operands(rng)
    a[16:24] = [np.nan, 1.0, 2.0, np.nan, -3.0, 3.0, 0.5, -0.5]
    b[16:24] = [1.0, np.nan, 2.0, np.nan, 3.0, -3.0, 0.5, 0.5]
    outs = [np.empty_like(a) for _ in range(4)]
    sums = np.empty(a.size // 8)
    _misc(a, b, *outs, np.empty_like(a), sums)
    floor_o, lt, gt, eq = outs
    assert _same_bits(floor_o[~np.isnan(a)], np.floor(a)[~np.isnan(a)])
    # where is Python's conditional expression: an ordered comparison, false with a NaN
    assert _same_bits(lt, [u if u < v else v for u, v in zip(a, b, strict=True)])
    assert _same_bits(gt, [u if u > v else v for u, v in zip(a, b, strict=True)])
    assert np.array_equal(eq, [1.0 if u == v else 0.0 for u, v in zip(a, b, strict=True)])
    v = a.reshape(-1, 8)
    with np.errstate(all="ignore"):
        ref = ((v[:, 0] + v[:, 1]) + (v[:, 2] + v[:, 3])) + ((v[:, 4] + v[:, 5])
                                                              + (v[:, 6] + v[:, 7]))
    ok = ~np.isnan(ref)
    assert _same_bits(sums[ok], ref[ok]) and np.all(np.isnan(sums[~ok]))
    # exp2i: 2^k from exponent bits, for integer lanes in [-1022, 1023]
    ks = np.arange(-1022, 1024, dtype=float)
    ks = np.concatenate([ks, np.zeros((-ks.size) % 8)])
    pow2 = np.empty_like(ks)
    _misc(ks, ks, np.empty_like(ks), np.empty_like(ks), np.empty_like(ks), np.empty_like(ks),
          pow2, np.empty(ks.size // 8))
    assert np.array_equal(pow2, np.ldexp(1.0, ks.astype(int)))


def test_logistic8_has_the_bits_of_the_scalar_logistic(rng):
    z = np.concatenate([rng.normal(size=800) * 5, rng.normal(size=80) * 300,
                        [0.0, -0.0, np.inf, -np.inf, np.nan, -708.0, -707.9, 40.0, 41.0,
                         -745.0, 1e300, -1e300, 709.0, -40.0, 5e-324, -5e-324]])
    vec, ref = np.empty_like(z), np.empty_like(z)
    _apply8(1, z, vec)
    _logistic_scalar(z, ref)
    assert _same_bits(vec, ref)


def test_tanh8_is_within_3_ulp_and_keeps_small_arguments_accurate(rng):
    z = np.concatenate([rng.normal(size=4000) * 3, rng.normal(size=800) * 1e-6,
                        np.ldexp(1.0, rng.integers(-1070, -20, size=200)) *
                        rng.choice([-1, 1], size=200),
                        np.linspace(-20, 20, 1000)])
    z = z[: z.size // 8 * 8]
    out = np.empty_like(z)
    _apply8(0, z, out)
    mpmath.mp.dps = 50
    exact = np.array([float(mpmath.tanh(mpmath.mpf(float(v)))) for v in z])
    ulp = np.abs(out - exact) / np.spacing(np.abs(exact))
    assert ulp.max() <= 3.0, ulp.max()
    # 2 logistic(2 z) - 1 loses the relative accuracy of small z; this formula does not
    small = np.abs(z) < 1e-6
    assert np.all(np.abs(out[small] / exact[small] - 1) <= 4 * np.finfo(float).eps)


def test_tanh8_special_values():
    z = np.array([0.0, np.inf, -np.inf, np.nan, 19.5, -19.5, 1e300, -1e300])
    out = np.empty_like(z)
    _apply8(0, z, out)
    assert out[0] == 0.0 and out[1] == 1.0 and out[2] == -1.0 and math.isnan(out[3])
    assert out[4] == 1.0 and out[5] == -1.0 and out[6] == 1.0 and out[7] == -1.0


@pytest.mark.parametrize("rows,m", [(1, 5), (3, 16), (4, 203), (5, 200), (9, 37), (8, 8)])
def test_blocked_rows_give_each_row_the_bits_of_one_dot_product(rng, rows, m):
    a = rng.normal(size=m)
    b = rng.normal(size=(rows, m))
    out = np.full(rows, 0.25)
    _dots(a, b, m, out)
    assert _same_bits(out, [0.25 + reduce.vdot(a, b[t].copy()) for t in range(rows)])
    out = np.full(rows, -1.5)
    _sums(b, m, out)
    assert _same_bits(out, [-1.5 + reduce.vsum(b[t].copy()) for t in range(rows)])
