"""Numba's cache must not keep a kernel that calls an edited kernel in another file, nor read
an index that an earlier layout of the kernel modules left behind."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import textwrap

import pytest


@pytest.mark.slow
def test_editing_a_callee_file_recompiles_its_callers(tmp_path):
    pkg = tmp_path / "kpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "callee.py").write_text(textwrap.dedent("""
        from thermonet.kernels.jit import kernel

        @kernel
        def value(x):
            return x + 1.0
    """))
    (pkg / "caller.py").write_text(textwrap.dedent("""
        from thermonet.kernels.jit import kernel
        from kpkg import callee

        @kernel
        def twice(x):
            return 2.0 * callee.value(x)
    """))
    # no .pyc: the edit below keeps the file's size and may keep its mtime's second, which
    # would let Python run the stale bytecode; what is tested is Numba's cache
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "NUMBA_CACHE_DIR": str(tmp_path / "cache"),
           "THERMONET_KERNEL_DEPS": str(pkg), "PYTHONDONTWRITEBYTECODE": "1"}
    code = "from kpkg import caller; print(caller.twice(1.0))"

    def run():
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        return float(out.stdout)

    assert run() == 4.0
    assert any((tmp_path / "cache").rglob("*.nbi"))          # it was cached
    assert run() == 4.0                                       # and reused
    (pkg / "callee.py").write_text((pkg / "callee.py").read_text().replace("x + 1.0", "x + 2.0"))
    assert run() == 6.0                                       # not the stale 4.0


def test_an_index_from_another_module_layout_is_never_read(tmp_path):
    """An index names its signatures' types by module path; one written before a module moved
    cannot be unpickled, and Numba raises on it instead of compiling afresh. A module added,
    moved or removed must therefore send the kernels to a cache of their own."""
    pkg = tmp_path / "kpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "k.py").write_text("from thermonet.kernels.jit import kernel\n\n"
                              "@kernel\ndef f(x):\n    return x * 3.0\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "NUMBA_CACHE_DIR": str(tmp_path / "cache"),
           "THERMONET_KERNEL_DEPS": str(pkg)}

    def run():
        out = subprocess.run([sys.executable, "-c", "from kpkg import k; print(k.f(2.0))"],
                             env=env, capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        return float(out.stdout)

    assert run() == 6.0
    indexes = list((tmp_path / "cache").rglob("k.f-*.nbi"))
    assert indexes
    for index in indexes:       # what a moved module leaves: a payload naming a missing module
        with open(index, "rb") as fh:
            version = pickle.load(fh)
        payload = b"ckpkg.gone_away\nT\n."                # pickle's GLOBAL opcode
        with pytest.raises(ModuleNotFoundError):
            pickle.loads(payload)
        index.write_bytes(pickle.dumps(version, protocol=-1) + payload)
    (pkg / "moved_here.py").write_text("")                # the layout changes
    assert run() == 6.0


_PRODUCT = """
import sys
import numpy as np
from thermonet.kernels.jit import kernel
from thermonet.kernels.matmul import blas

@kernel
def product(a, b, c):
    blas.gemm(False, False, a, b, c)

@kernel
def total(a, b, c):
    c[:] = 0.0
    for i in range(a.shape[0]):
        c[0, 0] += a[i, 0] + b[0, i]

kind = sys.argv[1]
dtype = np.dtype("float64" if kind == "none" else kind)
# small integers: every product and sum is exact in float32, so the result is exact
a = (np.arange(6 * 5).reshape(6, 5) % 7 - 3).astype(dtype)
b = (np.arange(5 * 9).reshape(5, 9) % 5 - 2).astype(dtype)
c = np.zeros((6, 9), dtype)
f = total if kind == "none" else product
f(a, b, c)
if kind != "none":
    assert np.array_equal(c, a.astype(np.int64) @ b.astype(np.int64)), c
print(sum(f.stats.cache_hits.values()), sum(f.stats.cache_misses.values()))
"""


@pytest.mark.slow
def test_the_own_products_are_compiled_only_for_a_kernel_that_calls_them(tmp_path):
    """A kernel without products compiles none, a float64 one no float32 products; a float32
    kernel compiled afresh, then loaded from the cache by a process that has not compiled
    them, finds them registered (an unregistered symbol crashes the process as the cached
    kernel is linked)."""
    (tmp_path / "kprod.py").write_text(_PRODUCT)
    cache = tmp_path / "cache"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path]),
           "NUMBA_CACHE_DIR": str(cache), "THERMONET_BLAS": "own",
           "THERMONET_KERNEL_DEPS": str(tmp_path)}

    def run(kind):
        out = subprocess.run([sys.executable, str(tmp_path / "kprod.py"), kind], env=env,
                             capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, out.stderr[-2000:]
        return tuple(int(v) for v in out.stdout.split())

    def cached(name):
        return any(cache.rglob(f"gemm.{name}-*.nbi"))

    assert run("none") == (0, 1)                    # compiled
    assert not cached("_c_product") and not cached("_c_product32")
    assert run("float64") == (0, 1)
    assert cached("_c_product") and not cached("_c_product32")
    assert run("float32") == (0, 1)                 # compiled, the float32 products with it
    assert cached("_c_product32")
    assert run("float32") == (1, 0)                 # loaded from the cache, and it runs
    assert run("float64") == (1, 0)


_BACKEND_KERNELS = """
import sys
import numpy as np
from thermonet.kernels.jit import kernel
from thermonet.kernels.matmul import backend, blas

@kernel
def plain(x):
    return x * 3.0

@kernel
def product(a, b, c):
    blas.gemm(False, False, a, b, c)

@kernel
def calls_product(a, b, c):
    product(a, b, c)
    return c[0, 0]

kind = sys.argv[1]
a = np.arange(12.0).reshape(3, 4)
b = np.arange(8.0).reshape(4, 2)
c = np.zeros((3, 2))
if kind == "plain":
    f = plain
    assert f(2.0) == 6.0
elif kind == "product":
    f = product
    f(a, b, c)
else:
    product(a, b, c)          # compiled or loaded before its caller is typed
    f = calls_product
    f(a, b, c)
if kind != "plain":
    assert np.array_equal(c, a @ b), c
print(int(backend.chosen()), sum(f.stats.cache_hits.values()), sum(f.stats.cache_misses.values()))
"""


@pytest.mark.slow
def test_only_kernels_that_call_a_product_depend_on_the_backend(tmp_path):
    """A kernel without products is cached once for every backend and never chooses one (which
    may measure); a kernel calling a product, directly or through a kernel compiled earlier,
    is compiled again under another backend instead of running the other backend's code."""
    (tmp_path / "kback.py").write_text(_BACKEND_KERNELS)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path]),
           "NUMBA_CACHE_DIR": str(tmp_path / "cache"), "THERMONET_KERNEL_DEPS": str(tmp_path)}

    def run(kind, blas):
        out = subprocess.run([sys.executable, str(tmp_path / "kback.py"), kind],
                             env={**env, "THERMONET_BLAS": blas}, capture_output=True,
                             text=True, timeout=600)
        assert out.returncode == 0, out.stderr[-2000:]
        return tuple(int(v) for v in out.stdout.split())

    # (backend chosen, cache hits, cache misses) of the kernel
    assert run("plain", "numpy") == (0, 0, 1)
    assert run("product", "numpy") == (1, 0, 1)
    assert run("caller", "numpy") == (1, 0, 1)
    assert run("plain", "own") == (0, 1, 0)         # the same entry, no backend read
    assert run("product", "numpy") == (1, 1, 0)
    assert run("product", "own") == (1, 0, 1)       # numpy's entry is not own's
    assert run("caller", "own") == (1, 0, 1)        # nor is its caller's
    assert run("caller", "own") == (1, 1, 0)


_REGRESSION_RUN = """
import numpy as np
from thermonet.architectures.regression import RegressionMLP
from thermonet.kernels.matmul import backend

rng = np.random.default_rng(3)
x = rng.normal(size=(40, 2))
y = rng.normal(size=(40, 2))
pot = RegressionMLP(2, [6], 2, hidden_activation="tanh", kernel="{kernel}").potential(x=x, y=y)
theta = 0.3 * rng.normal(size=pot.n_params)
e, g = pot.energy_and_grad(theta)
assert np.isfinite(e) and np.all(np.isfinite(g))
print(int(backend.chosen()))
"""


@pytest.mark.parametrize("kernel, chooses", [("shallow", 0), ("blocked", 1)])
def test_a_network_without_products_never_measures_the_backend(tmp_path, kernel, chooses):
    """The robot arm's shallow kernel calls no matrix product: evaluating it chooses no backend,
    so a new machine does not calibrate (``THERMONET_BLAS`` unset, empty calibration cache);
    the blocked kernel, which calls them, does."""
    (tmp_path / "reg.py").write_text(_REGRESSION_RUN.replace("{kernel}", kernel))
    env = {k: v for k, v in os.environ.items() if k != "THERMONET_BLAS"}
    env["THERMONET_CACHE_DIR"] = str(tmp_path / "calibration")
    if chooses:
        env["THERMONET_BLAS"] = "own"   # what is tested is that it is read, not a measurement
    out = subprocess.run([sys.executable, str(tmp_path / "reg.py")], env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert int(out.stdout) == chooses
    assert not (tmp_path / "calibration").exists()
