"""thermonet's own matrix products (thermonet/kernels/matmul/gemm.py) and their place among the backends.

* every element of a product is the chain of fused multiply-adds over ``k`` that the module
  documents: checked bit for bit against exact rational arithmetic (one rounding per term, in
  float64 and in float32),
  for every transposition, for shapes that exercise the full tiles, the row and column tails
  and empty products, for ``product`` and ``product_acc``;
* the same bits when compiled for AVX-512, AVX2 and plain x86-64: test_cross_isa.py;
* the ``own`` backend's M(3) energy and gradient agree with the ``numpy`` backend's to rounding;
* the calibration times it (in a process of its own) and the choice rule keeps ``numpy`` on a
  tie.
"""

from __future__ import annotations

import subprocess
from fractions import Fraction

import llvmlite.binding as llvm
import numba
import numpy as np
import pytest

from tests.kernels.test_blas import probe
from thermonet.kernels.matmul import calibration, gemm


@numba.njit(cache=False)
def _product(ta, tb, a, b, c):
    gemm.product(ta, tb, a, b, c)


@numba.njit(cache=False)
def _product_acc(ta, tb, a, b, c, alpha):
    gemm.product_acc(ta, tb, a, b, c, alpha)


def _chain(row, col):
    """``fma(row[k], col[k], .)`` over ``k`` from 0.0, each step rounded once (exactly: a
    Fraction's float() is correctly rounded)."""
    s = 0.0
    for x, y in zip(row, col, strict=True):
        s = float(Fraction(x) * Fraction(y) + Fraction(s))
    return s


def _same_bits(x, y):
    x, y = np.asarray(x), np.asarray(y)
    view = np.int32 if x.dtype == np.float32 else np.int64
    return x.dtype == y.dtype and np.array_equal(x.view(view), y.view(view))


def _round32(x: Fraction) -> np.float32:
    """``x`` rounded to the nearest float32 (ties to even), exactly."""
    f = np.float32(float(x))
    best = None
    for c in (np.nextafter(f, np.float32(-np.inf)), f, np.nextafter(f, np.float32(np.inf))):
        d = abs(Fraction(float(c)) - x)
        if best is None or d < best[0] or (d == best[0] and int(c.view(np.int32)) % 2 == 0):
            best = (d, c)
    return np.float32(best[1])


def _chain32(row, col):
    """:func:`_chain` in float32: each step rounded once to float32."""
    s = np.float32(0.0)
    for x, y in zip(row, col, strict=True):
        s = _round32(Fraction(float(x)) * Fraction(float(y)) + Fraction(float(s)))
    return s


@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
@pytest.mark.parametrize("m,n,k", [(4, 40, 3), (9, 13, 5), (1, 8, 7), (6, 83, 2), (5, 3, 1),
                                   (3, 8, 0), (0, 5, 2), (2, 0, 2)])
def test_every_element_is_one_chain_of_fmas(ta, tb, m, n, k):
    rng = np.random.default_rng(100 * m + 10 * n + k)
    a = rng.normal(size=(k, m) if ta else (m, k))
    b = rng.normal(size=(n, k) if tb else (k, n))
    op_a = a.T if ta else a
    op_b = b.T if tb else b
    exact = np.array([[_chain(op_a[i], op_b[:, j]) for j in range(n)] for i in range(m)])
    c = np.full((m, n), np.nan)
    _product(ta, tb, a, b, c)
    assert _same_bits(c, exact.reshape(m, n))
    c0 = rng.normal(size=(m, n))
    c = c0.copy()
    _product_acc(ta, tb, a, b, c, -0.375)
    assert _same_bits(c, c0 + -0.375 * exact.reshape(m, n))


@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
@pytest.mark.parametrize("m,n,k", [(4, 40, 3), (9, 37, 5), (1, 16, 2), (7, 3, 4), (2, 0, 1)])
def test_every_float32_element_is_one_chain_of_float32_fmas(ta, tb, m, n, k):
    rng = np.random.default_rng(1000 + 100 * m + 10 * n + k)
    a = rng.normal(size=(k, m) if ta else (m, k)).astype(np.float32)
    b = rng.normal(size=(n, k) if tb else (k, n)).astype(np.float32)
    op_a = a.T if ta else a
    op_b = b.T if tb else b
    exact = np.array([[_chain32(op_a[i], op_b[:, j]) for j in range(n)] for i in range(m)],
                     dtype=np.float32).reshape(m, n)
    c = np.full((m, n), np.nan, np.float32)
    _product(ta, tb, a, b, c)
    assert _same_bits(c, exact)
    c0 = rng.normal(size=(m, n)).astype(np.float32)
    c = c0.copy()
    _product_acc(ta, tb, a, b, c, np.float32(-0.375))
    assert _same_bits(c, c0 + np.float32(-0.375) * exact)


def test_products_of_the_mlp_shapes_match_numpy():
    rng = np.random.default_rng(2)
    for ta, tb, m, n, k in calibration.products("own"):
        a = rng.normal(size=(k, m) if ta else (m, k))
        b = rng.normal(size=(n, k) if tb else (k, n))
        c = np.empty((m, n))
        _product(ta, tb, a, b, c)
        ref = (a.T if ta else a) @ (b.T if tb else b)
        assert np.max(np.abs(c - ref)) <= 1e-13 * np.max(np.abs(ref)), (m, n, k)


def test_non_finite_operands_propagate():
    a = np.ones((5, 4))
    b = np.ones((4, 9))
    a[2, 1] = np.nan
    b[3, 8] = np.inf
    c = np.zeros((5, 9))
    _product(False, False, a, b, c)
    assert np.isnan(c[2]).all()
    assert np.isinf(c[[0, 1, 3, 4], 8]).all()
    assert np.isfinite(c[[0, 1, 3, 4], :8]).all()


@pytest.mark.slow
def test_own_and_numpy_backends_agree_to_round_off():
    own, ref = probe({"THERMONET_BLAS": "own"}), probe({"THERMONET_BLAS": "numpy"})
    assert (own["backend"], ref["backend"]) == ("own", "numpy")
    assert own["e"] == own["e2"]                   # the energy-only kernel: the same bits
    assert own["e"] == pytest.approx(ref["e"], rel=1e-12)
    g, gr = np.array(own["g"]), np.array(ref["g"])
    assert np.max(np.abs(g - gr)) <= 1e-11 * np.max(np.abs(gr))


def test_the_calibration_times_the_own_products():
    rate = calibration.measure_own(budget_s=0.05)
    assert rate["rounds"] >= 5 and rate["us_per_block"] > 0
    flop = calibration.flops(calibration.products("own"))
    assert rate["gflops"] == pytest.approx(flop / rate["us_per_block"] / 1e3)
    assert flop == calibration.flops(calibration.products("numpy"))


@pytest.mark.parametrize("own, mkl, chosen", [(99.0, None, "numpy"), (97.0, None, "own"),
                                              (97.0, 96.0, "mkl"), (150.0, 90.0, "mkl"),
                                              (50.0, 90.0, "own")])
def test_the_fastest_backend_wins_by_more_than_the_margin(own, mkl, chosen):
    rates = {"numpy": {"us_per_block": 100.0}, "own": {"us_per_block": own}}
    if mkl is not None:
        rates["mkl"] = {"us_per_block": mkl}
    assert calibration.choose(rates) == chosen


def test_a_failing_own_timing_warns_and_the_others_are_chosen(tmp_path, monkeypatch):
    """The child process that times the own products fails (e.g. cannot import thermonet):
    one warning that says so, and the choice among the libraries that were measured."""
    monkeypatch.setenv("THERMONET_CACHE_DIR", str(tmp_path))

    def measured(dgemms, budget_s=calibration.BUDGET_S):
        return {name: {"us_per_block": 100.0 if name == "numpy" else 150.0, "gflops": 1.0,
                       "rounds": 5} for name in dgemms}

    def failing_child(*args, **kwargs):
        return subprocess.CompletedProcess(args, 1, "", "ModuleNotFoundError: no thermonet\n")

    monkeypatch.setattr(calibration, "measure", measured)
    monkeypatch.setattr(calibration.subprocess, "run", failing_child)
    with pytest.warns(RuntimeWarning, match="timing thermonet's own products failed: "
                                            "ModuleNotFoundError: no thermonet"):
        record = calibration.calibrate(("numpy", "mkl", "own"),
                                       lambda: dict.fromkeys(("numpy", "mkl")))
    assert record["backend"] == "numpy" and set(record["rates"]) == {"numpy", "mkl"}
    # the record without "own" is a valid cache entry for the same candidates
    again = calibration.calibrate(("numpy", "mkl", "own"), lambda: {})
    assert again["how"] == "cached" and again["backend"] == "numpy"


@pytest.mark.parametrize("env, wide", [
    ({"NUMBA_CPU_FEATURES": "+avx2,+fma,+avx512f,-prefer-256-bit"}, True),
    ({"NUMBA_CPU_FEATURES": "+avx2,+fma,-avx512f"}, False),
    ({"NUMBA_CPU_NAME": "haswell"}, False),
    ({"NUMBA_CPU_NAME": "generic", "NUMBA_CPU_FEATURES": ""}, False),
    ({}, None),                                       # the host's own features
])
def test_the_tile_follows_the_compile_target(monkeypatch, env, wide):
    from thermonet.kernels.environment import compiled_for_avx512

    for key in ("NUMBA_CPU_NAME", "NUMBA_CPU_FEATURES"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    expected = bool(llvm.get_host_cpu_features().get("avx512f")) if wide is None else wide
    assert compiled_for_avx512() is expected
