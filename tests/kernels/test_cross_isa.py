"""The same bits on every x86-64 CPU: one process each compiles thermonet's kernels for
AVX-512 (the host's own target), for AVX2 with FMA and for plain x86-64 (SSE2, no FMA
instructions: ``llvm.fma`` is then a library call), with the Numba cache off, and runs

* the own matrix products for every shape the MLPs use, and M(3)'s energy and gradient
  (float64 and float32) through the ``own`` backend (thermonet/kernels/matmul/gemm.py);
* the shallow regression kernel, whose vector code is the eight-lane type of
  thermonet/kernels/matmul/simd.py.

Each process is a cold compile of all of them (about 40 CPU s), so both tests share the
three.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from llvmlite import binding as llvm

_CHILD = r"""
import json
import numpy as np
from thermonet.architectures.mlp import M3
from thermonet.kernels import mlp_shallow as ms
from thermonet.kernels.matmul import calibration, gemm
from thermonet.kernels.mlp import HIDDEN_TANH
rng = np.random.default_rng(11)
out = {"products": []}
for ta, tb, m, n, k in calibration.products("own") + [(True, False, 7, 19, 5)]:
    a = rng.normal(size=(k, m) if ta else (m, k))
    b = rng.normal(size=(n, k) if tb else (k, n))
    c = np.empty((m, n))
    gemm.product(ta, tb, a, b, c)
    out["products"].append([v.hex() for v in c.ravel()[::7]])
x = rng.normal(size=(150, 256))
y = rng.integers(0, 10, 150)
pot = M3().potential(x=x, y=y)
th = rng.uniform(-0.06, 0.06, pot.n_params)
e, g = pot.energy_and_grad(th)
out["energy"] = float(e).hex()
out["grad"] = [float(v).hex() for v in np.asarray(g)]
pot32 = M3().potential(x=x, y=y, dtype=np.float32)
e32, g32 = pot32.energy_and_grad(th.astype(np.float32))
out["grad32"] = [float(v).hex() for v in np.asarray(g32)] + [float(e32).hex()]
out["tile"] = [gemm.MR, gemm.NG]
rng = np.random.default_rng(7)
out["shallow"] = {}
for widths, act, block in (([2, 16, 2], HIDDEN_TANH, 512), ([3, 7, 6], 0, 40)):
    w = np.array(widths, dtype=np.int64)
    xt = rng.normal(size=(widths[0], 203))
    yt = rng.normal(size=(widths[2], 203))
    th = rng.normal(size=widths[1] * (widths[0] + 1) + widths[2] * (widths[1] + 1))
    g = np.zeros(th.size)
    work = np.zeros(ms.work_size(w, block))
    s = ms.loss_and_grad(th, w, act | ms.FEATURE_MAJOR, xt, yt, block, work, g)
    e = ms.loss(th, w, act | ms.FEATURE_MAJOR, xt, yt, block, work)
    asm = "".join(ms.loss_and_grad.inspect_asm().values())
    out["shallow"][str(widths)] = [s.hex(), e.hex(), [v.hex() for v in g], "zmm" in asm,
                                   "ymm" in asm]
print(json.dumps(out))
"""


def _start(cpu_name: str | None, features: str | None) -> subprocess.Popen:
    env = dict(os.environ, THERMONET_NUMBA_CACHE="0", THERMONET_BLAS="own")
    for key, value in (("NUMBA_CPU_NAME", cpu_name), ("NUMBA_CPU_FEATURES", features)):
        env.pop(key, None)
        if value is not None:
            env[key] = value
    return subprocess.Popen([sys.executable, "-c", _CHILD], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _result(proc: subprocess.Popen) -> dict:
    out, err = proc.communicate(timeout=900)
    assert proc.returncode == 0, err[-2000:]
    return json.loads(out.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def builds() -> tuple[dict, dict, dict]:
    """The (native, AVX2, plain x86-64) processes' results."""
    host = llvm.get_host_cpu_features()
    if not (host.get("avx2") and host.get("fma")):
        pytest.skip("this CPU cannot run code compiled for AVX2 with FMA")
    children = [_start(None, None), _start("haswell", "-avx512f")]
    native, avx2 = (_result(p) for p in children)
    return native, avx2, _result(_start("generic", ""))


@pytest.mark.slow
def test_the_own_backend_gives_the_same_bits_for_avx512_avx2_and_plain_x86_64(builds):
    native, avx2, plain = builds
    for key in ("products", "energy", "grad", "grad32"):
        assert native[key] == avx2[key] == plain[key], key
    # the tiles differed where the vector registers did
    assert avx2["tile"] == plain["tile"] == [6, 1]
    has_512 = llvm.get_host_cpu_features().get("avx512f")
    assert native["tile"] == ([4, 5] if has_512 else [6, 1])


@pytest.mark.slow
def test_the_shallow_kernel_gives_the_same_bits_for_avx512_avx2_and_plain_x86_64(builds):
    native, avx2, plain = (b["shallow"] for b in builds)
    for key in native:
        assert native[key][:3] == avx2[key][:3] == plain[key][:3], key
        # each build used the vector width it was compiled for (the host's may lack AVX-512)
        assert not avx2[key][3] and avx2[key][4], key
        assert not plain[key][3] and not plain[key][4], key
        assert native[key][3] == bool(llvm.get_host_cpu_features().get("avx512f")), key
