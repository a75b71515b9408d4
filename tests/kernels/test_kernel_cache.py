"""Numba's cache must not keep a kernel that calls an edited kernel in another file, nor read
an index that an earlier layout of the kernel modules left behind."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import textwrap

import pytest


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
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "NUMBA_CACHE_DIR": str(tmp_path / "cache"),
           "THERMONET_KERNEL_DEPS": str(pkg)}
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
