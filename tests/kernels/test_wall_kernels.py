"""Trajectory kernels compiled per wall mode (``leapfrog.by_wall``).

Each compiled trajectory (the MLP's in float64 and mixed precision, the TI bridge's, the
regression network's) must give, for every wall mode, what the generic Python leapfrog
(:meth:`thermonet.api.Potential.trajectory`, the same arithmetic one step at a time) gives,
including the early stops: a runaway, a reflection fold turned into NaN, a non-finite energy.
And the per-mode kernels must really compile only their own mode's helpers, and be cached
(what a cold reflecting run compiles: ``test_cold_compile.py``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from tests.kernels.compiled_names import RECORD_COMPILED
from thermonet.api import Potential
from thermonet.architectures.mlp import MLP
from thermonet.architectures.regression import RegressionMLP
from thermonet.evidence.ti import BridgePotential, Reference
from thermonet.kernels import leapfrog as lf
from thermonet.kernels.matmul import blas

#: wall modes: the two named ones, and an unknown code (treated as WALL_NONE, as before)
WALLS = {"endpoint": lf.WALL_NONE, "reflect": lf.WALL_REFLECT, "unknown": 5}

#: (step, n_steps, runaway): an ordinary trajectory; steps long enough for runaways (endpoint)
#: and many reflections (reflect); steps so long that a coordinate needs more than
#: MAX_REFLECTIONS folds, so that it becomes NaN and the energy is not finite
SCENARIOS = {"ordinary": (0.01, 12, 10.0), "long": (0.08, 12, 1.5), "huge": (60.0, 3, 1.5)}


class _Float32Gradients(Potential):
    """The generic counterpart of the mixed-precision kernel: gradients of a float32
    potential at theta rounded to float32, widened to float64."""

    def __init__(self, pot32):
        self.pot32 = pot32
        self.n_params = pot32.n_params

    def energy(self, theta):
        return self.pot32.energy(theta.astype(np.float32))

    def energy_and_grad(self, theta, grad_out=None):
        e, g = self.pot32.energy_and_grad(theta.astype(np.float32))
        if grad_out is None:
            grad_out = np.empty(self.n_params)
        grad_out[:] = g
        return e, grad_out


def _case(kind):
    """(potential with a compiled trajectory, its generic counterpart, theta0, half widths,
    whether the kernel takes the kick-into-the-momenta path, precision)."""
    rng = np.random.default_rng(11)
    if kind == "regression":
        arch = RegressionMLP(2, [6], 2)
        pot = arch.potential(x=rng.uniform(-2, 2, (40, 2)), y=rng.normal(size=(40, 2)))
        pot.set_hyperparameters(rng.uniform(0.5, 3.0, arch.initial_hyper().size), 1.0)
        theta0 = 0.3 * rng.normal(size=arch.n_params)
        return pot, pot, theta0, np.full(arch.n_params, 0.6), False, "float64"
    arch = MLP(n_inputs=6, hidden=[5], n_outputs=3)
    n = 300 if kind == "mlp-blocks" else 40          # 3 blocks of 128 rows, or one
    x, y = rng.normal(size=(n, 6)), rng.integers(0, 3, n)
    pot = arch.potential(x=x, y=y)
    theta0 = 0.3 * rng.normal(size=arch.n_params)
    half = np.where(np.arange(arch.n_params) < 20, 0.4, 0.9)
    if kind == "mlp-mixed":
        generic = _Float32Gradients(arch.potential(x=x, y=y, dtype=np.float32))
        return pot, generic, theta0, half, False, "float32"
    if kind == "bridge":
        w0 = theta0 + 0.1 * rng.normal(size=arch.n_params)
        ref = Reference(w0, rng.uniform(0.5, 3.0, arch.n_params),
                        rng.random(arch.n_params) < 0.2, pot.energy(w0))
        bridge = BridgePotential(pot, ref, 0.37)
        return bridge, bridge, theta0, half, False, "float64"
    return pot, pot, theta0, half, kind == "mlp", "float64"


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
@pytest.mark.parametrize("wall", sorted(WALLS))
@pytest.mark.parametrize("kind", ["mlp", "mlp-blocks", "mlp-mixed", "bridge", "regression"])
def test_each_wall_kernel_equals_the_generic_leapfrog(kind, wall, scenario):
    pot, generic, theta0, half, direct, precision = _case(kind)
    step, n_steps, runaway = SCENARIOS[scenario]
    n = theta0.shape[0]
    inv_m = np.where(np.arange(n) % 7 == 0, 2.0, 1.0)
    p0 = np.random.default_rng(12).normal(size=n)
    _, g0 = generic.energy_and_grad(theta0)
    a = [theta0.copy(), p0.copy(), g0.copy()]
    b = [theta0.copy(), p0.copy(), g0.copy()]
    ra = pot.trajectory(*a, inv_m, step, n_steps, WALLS[wall], half, runaway,
                        precision=precision)
    rb = Potential.trajectory(generic, *b, inv_m, step, n_steps, WALLS[wall], half, runaway)
    status = rb[2]
    if wall == "reflect":
        assert status != lf.RUNAWAY and (scenario == "huge") == (status == lf.NON_FINITE)
        assert scenario == "ordinary" or rb[3] > 0
    elif scenario != "ordinary":
        assert status == lf.RUNAWAY
    if direct and blas.BACKEND != "numpy":
        # with MKL the kicks inside the one-block kernel accumulate the gradient into p in
        # the matrix product, which rounds differently (test_samplers.py); equal up to that
        assert ra[1:] == rb[1:]
        np.testing.assert_allclose(a[0], b[0], rtol=1e-12, atol=1e-12)
        return
    assert ra[1:] == rb[1:]
    assert ra[0] == rb[0] or (np.isnan(ra[0]) and np.isnan(rb[0]))
    np.testing.assert_array_equal(a[0], b[0])
    # after an early stop the one-block kernel has already kicked p with the last gradient
    # inside the gradient kernel and keeps the previous gradient (documented in
    # leapfrog.mlp_trajectory); everything else agrees array for array
    if not direct or status == lf.OK:
        np.testing.assert_array_equal(a[1], b[1])
        np.testing.assert_array_equal(a[2], b[2])


@pytest.mark.slow
def test_by_wall_compiles_only_each_modes_branches_and_caches_them(tmp_path):
    """A kernel made by ``by_wall`` compiles the callees of its own wall mode only (Numba
    prunes the other mode's branches on the closure's constant), and each mode's kernel is
    cached in a file of its own: a second process compiles nothing."""
    pkg = tmp_path / "wpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "walls.py").write_text(textwrap.dedent("""
        from thermonet.kernels import leapfrog as lf
        from thermonet.kernels.jit import kernel

        @kernel
        def fold(x):
            return -x

        @kernel
        def escaped(x):
            return x > 1.0

        def _make(reflect):
            def move(x):
                if reflect:
                    return fold(x), False
                return x, escaped(x)
            return move

        MOVE = lf.by_wall(_make)
    """))
    code = RECORD_COMPILED + textwrap.dedent("""
        from thermonet.kernels import leapfrog as lf
        from wpkg import walls
        for wall, x in ((1, 2.0), (0, 2.0), (5, 0.5)):
            print(lf.for_wall(walls.MOVE, wall)(x), sorted(compiled))
            compiled.clear()
    """)
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "NUMBA_CACHE_DIR": str(tmp_path / "c")}

    def run():
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()

    # the reflecting kernel compiles fold only, the end-point one escaped only; the unknown
    # code runs the end-point kernel, already compiled
    assert run().splitlines() == ["(-2.0, False) ['fold', 'move_reflect']",
                                  "(2.0, True) ['escaped', 'move_endpoint']",
                                  "(0.5, False) []"]
    assert run().splitlines() == ["(-2.0, False) []", "(2.0, True) []", "(0.5, False) []"]
    names = sorted(p.name.split("-")[0] for p in (tmp_path / "c").rglob("walls.*.nbi"))
    assert names == ["walls.escaped", "walls.fold", "walls.move_endpoint", "walls.move_reflect"]
