"""The kernels' BLAS backend (thermonet/kernels/matmul/blas.py) and the 512-bit vector setting.

* ``gemm`` against NumPy's matmul for every transposition, both dtypes, strided row slices,
  empty and k = 0 products;
* the MKL and np.dot backends give the same M(3) energy and gradient to round-off (each in a
  process of its own, since the backend is fixed at import);
* bad ``THERMONET_BLAS`` values and a missing MKL give one-line errors;
* checkpoints record the backend;
* ``kernels.configure()`` gives ``NUMBA_CPU_FEATURES`` ``-prefer-256-bit`` on AVX-512 CPUs unless
  ``THERMONET_AVX512=0``; importing the kernels changes no environment variable.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numba
import numpy as np
import pytest

from thermonet.kernels.matmul import backend, blas

_PROBE = r"""
import json, sys
import numpy as np
from thermonet.kernels.matmul import blas
from thermonet.architectures.mlp import M3
rng = np.random.default_rng(3)
x = rng.standard_normal((300, 256)); y = rng.integers(0, 10, 300)
pot = M3().potential(x=x, y=y, block=128)
th = rng.uniform(-0.06, 0.06, pot.n_params)
e, g = pot.energy_and_grad(th)
print(json.dumps({"backend": blas.BACKEND, "e": float(e), "e2": float(pot.energy(th)),
                  "g": np.asarray(g).tolist()}))
"""


def probe(env_extra: dict[str, str]) -> dict:
    env = dict(os.environ)
    env.update(env_extra)
    out = subprocess.run(check=False, args=[sys.executable, "-c", _PROBE], env=env, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@numba.njit(cache=False)
def _call(ta, tb, a, b, c):
    blas.gemm(ta, tb, a, b, c)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
def test_gemm_matches_numpy(dtype, ta, tb):
    rng = np.random.default_rng(0)
    m, k, n = 37, 53, 11
    a = rng.standard_normal((k, m) if ta else (m, k)).astype(dtype)
    b = rng.standard_normal((n, k) if tb else (k, n)).astype(dtype)
    c = np.full((m, n), np.nan, dtype=dtype)
    _call(ta, tb, a, b, c)
    ref = (a.T if ta else a).astype(np.float64) @ (b.T if tb else b).astype(np.float64)
    tol = 1e-12 if dtype == np.float64 else 2e-5
    np.testing.assert_allclose(c, ref, rtol=tol, atol=tol * np.abs(ref).max())


def test_gemm_row_slices_and_degenerate_shapes():
    rng = np.random.default_rng(1)
    big = rng.standard_normal((20, 30))
    a = big[3:12, 4:25]                      # leading dimension 30, not 21
    b = rng.standard_normal((21, 5))
    c = np.empty((9, 5))
    _call(False, False, a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-12, atol=1e-12)
    c0 = np.full((4, 3), 7.0)                # k = 0: the empty sum
    _call(False, False, np.empty((4, 0)), np.empty((0, 3)), c0)
    assert np.all(c0 == 0.0)
    _call(False, False, np.empty((0, 5)), np.ones((5, 3)), np.empty((0, 3)))


def test_gemm_result_does_not_depend_on_operand_alignment():
    """Strict CNR mode (MKL) / OpenBLAS: the same operands at other addresses give the same
    bits, which keeps serial and threaded kernels (different scratch) bitwise identical."""
    rng = np.random.default_rng(2)
    a0 = rng.standard_normal((256, 256))
    b0 = rng.standard_normal((40, 256))
    results = []
    for off in range(8):                      # 8-byte steps through a 64-byte cache line
        abuf = np.empty(a0.size + 8)
        bbuf = np.empty(b0.size + 8)
        a = abuf[off:off + a0.size].reshape(a0.shape)
        b = bbuf[off:off + b0.size].reshape(b0.shape)
        a[:] = a0
        b[:] = b0
        c = np.empty((256, 40))
        _call(False, True, a, b, c)
        results.append(c)
    for c in results[1:]:
        assert np.array_equal(c, results[0])


def test_info_names_the_backend():
    info = blas.info()
    assert info["blas_backend"] == blas.BACKEND in ("mkl", "numpy", "own")
    if blas.BACKEND == "mkl":
        assert "mkl_rt" in info["blas_library"]


@pytest.mark.skipif(backend.load_mkl()[0] is None, reason="MKL is not installed")
@pytest.mark.slow
def test_mkl_and_numpy_backends_agree_to_round_off():
    mkl = probe({"THERMONET_BLAS": "mkl"})
    ref = probe({"THERMONET_BLAS": "numpy"})
    assert (mkl["backend"], ref["backend"]) == ("mkl", "numpy")
    assert mkl["e"] == pytest.approx(ref["e"], rel=1e-12)
    g, gr = np.array(mkl["g"]), np.array(ref["g"])
    assert np.max(np.abs(g - gr)) <= 1e-11 * np.max(np.abs(gr))


_MKL_LAYOUTS = r"""
import json, numba, numpy as np
from thermonet.kernels.matmul import blas
assert blas.BACKEND == "mkl"

@numba.njit(cache=False)
def prod(ta, tb, a, b, c):
    blas.gemm(ta, tb, a, b, c)

@numba.njit(cache=False)
def acc(ta, tb, a, b, c, alpha):
    blas.gemm_acc(ta, tb, a, b, c, alpha)

rng = np.random.default_rng(4)
worst = 0.0
for dt in (np.float64, np.float32):
    for ta in (False, True):
        for tb in (False, True):
            a0 = rng.standard_normal((13, 9) if ta else (9, 13)).astype(dt)
            b0 = rng.standard_normal((7, 13) if tb else (13, 7)).astype(dt)
            big_a = np.zeros((a0.shape[0], a0.shape[1] + 5), dt)
            big_a[:, 2:2 + a0.shape[1]] = a0
            for a in (a0, big_a[:, 2:2 + a0.shape[1]]):     # C layout, then strided rows
                ref = (a.T if ta else a).astype(np.float64) @ (b0.T if tb else b0).astype(np.float64)
                c = np.full((9, 7), np.nan, dt)
                prod(ta, tb, a, b0, c)
                c2 = np.ones((9, 7), dt)
                acc(ta, tb, a, b0, c2, dt(-0.5))
                scale = np.abs(ref).max()
                worst = max(worst, np.abs(c - ref).max() / scale,
                            np.abs(c2 - (1.0 - 0.5 * ref)).max() / scale)
print(json.dumps({"worst": worst, "types": [str(s[2]) for s in blas._gemm_mkl.signatures]}))
"""


@pytest.mark.skipif(backend.load_mkl()[0] is None, reason="MKL is not installed")
@pytest.mark.slow
def test_mkl_products_on_contiguous_and_strided_operands():
    """The MKL backend's products, straight to MKL for C-contiguous operands and through the
    checked path (np.dot fallback for strided rows) otherwise, in both dtypes."""
    env = dict(os.environ, THERMONET_BLAS="mkl")
    out = subprocess.run(check=False, args=[sys.executable, "-c", _MKL_LAYOUTS], env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["worst"] < 1e-5                      # float32 rounding; float64 is ~1e-15
    assert any(t.endswith(", C)") for t in res["types"]) and any(t.endswith(", A)") for t in res["types"])


@pytest.mark.slow
def test_mkl_results_repeat_bit_for_bit_across_processes():
    a, b = probe({}), probe({})
    assert a["e"] == b["e"] and a["g"] == b["g"]


@pytest.mark.parametrize("env, expected", [
    ({"THERMONET_BLAS": "cuBLAS"}, "THERMONET_BLAS='cublas'; expected one of auto, mkl, numpy, own"),
    ({"THERMONET_BLAS": "mkl", "THERMONET_MKL_LIB": "/nonexistent/libmkl_rt.so"},
     "THERMONET_BLAS=mkl but could not load MKL"),
])
def test_bad_backend_requests_fail_in_one_line(env, expected):
    full = dict(os.environ)
    full.update(env)
    out = subprocess.run(check=False, args=[sys.executable, "-c", "import thermonet.kernels.matmul.blas"], env=full,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode != 0
    last = out.stderr.strip().splitlines()[-1]
    assert expected in last


def test_missing_mkl_leaves_numpy_and_own_to_measure_under_auto(tmp_path):
    env = dict(os.environ, THERMONET_BLAS="auto", THERMONET_MKL_LIB="/nonexistent/libmkl_rt.so",
               THERMONET_CACHE_DIR=str(tmp_path))
    code = ("import json; from thermonet.kernels.matmul import backend, calibration\n"
            "c = backend.choice()\n"
            "print(json.dumps([c['backend'], sorted(c['rates']), "
            "calibration.choose(c['rates'])]))")
    out = subprocess.run(check=False, args=[sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    chosen, names, rule = json.loads(out.stdout.strip().splitlines()[-1])
    assert names == ["numpy", "own"] and chosen == rule


def test_checkpoint_records_the_backend(tmp_path):
    from thermonet.io import checkpoint as ckpt

    ck = ckpt.Checkpoint(iteration=0, run_uuid="u", config_toml="", config_sources={},
                         plugins={}, rng_states=[], slots={"theta": np.zeros((1, 2))},
                         replica_k=np.zeros(1, dtype=np.int64), temperatures=np.ones(1),
                         counters={}, blas_backend=blas.BACKEND)   # the runner hands it in
    ckpt.write_checkpoint(tmp_path, ck)
    assert ckpt.read_checkpoint(tmp_path).blas_backend == blas.BACKEND


def _features_after_import(extra: dict[str, str]) -> str:
    # from an environment without the settings under test (scripts/test-avx2 sets both)
    env = {k: v for k, v in os.environ.items()
           if k not in ("NUMBA_CPU_FEATURES", "THERMONET_AVX512")}
    env.update(extra)
    code = ("import os, thermonet.kernels as k; k.configure(); "
            "print(os.environ.get('NUMBA_CPU_FEATURES', ''))")
    out = subprocess.run(check=False, args=[sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=300)
    return out.stdout.strip()


def test_512_bit_vectors_on_avx512_cpus_only_and_opt_out():
    import llvmlite.binding as llb

    has512 = bool(llb.get_host_cpu_features().get("avx512f"))
    feats = _features_after_import({})
    assert feats.endswith(",-prefer-256-bit") == has512
    assert _features_after_import({"THERMONET_AVX512": "0"}) == ""
    assert _features_after_import({"NUMBA_CPU_FEATURES": "+sse2"}) == "+sse2"


def test_importing_the_kernels_changes_no_environment_variable():
    env = {k: v for k, v in os.environ.items()
           if k not in ("NUMBA_CPU_FEATURES", "GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}
    code = ("import os; before = dict(os.environ); "
            "import thermonet.kernels.mlp, thermonet.kernels.leapfrog, thermonet.kernels.threads; "
            "print(sorted(set(os.environ.items()) ^ set(before.items())))")
    out = subprocess.run(check=True, args=[sys.executable, "-c", code], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.stdout.strip() == "[]"


def test_configure_sets_openmp_spinning_unless_the_user_did():
    def spin(extra):
        env = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}
        env.update(extra)
        code = ("import os, thermonet.kernels as k; k.configure(); k.configure(); "
                "print(os.environ.get('GOMP_SPINCOUNT', '-'))")
        return subprocess.run(check=True, args=[sys.executable, "-c", code], env=env,
                              capture_output=True, text=True, timeout=300).stdout.strip()

    from thermonet.kernels.environment import GOMP_SPINCOUNT_DEFAULT

    assert spin({}) == GOMP_SPINCOUNT_DEFAULT
    assert spin({"GOMP_SPINCOUNT": "7"}) == "7"
    assert spin({"OMP_WAIT_POLICY": "passive"}) == "-"
