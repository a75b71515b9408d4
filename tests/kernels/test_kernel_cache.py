"""Numba's cache must not keep a kernel that calls an edited kernel in another file."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap


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
