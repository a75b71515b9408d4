"""The compiled trajectory of Neal (1993)'s scale-factor parameterisation
(kernels/mlp_regression_scale) against the Potential default: the same leapfrog driven from
Python, one NumPy chain rule around the direct network's gradient per step. End states,
energies, statuses and whole sampler transitions (accept decisions included) must agree."""

from __future__ import annotations

import copy
import math
import types

import numpy as np
import pytest

from thermonet.api import Potential
from thermonet.architectures.regression import RegressionMLP
from thermonet.kernels import leapfrog as lf
from thermonet.samplers.hmc_gibbs import GibbsHMC

CASES = [  # (hidden activation, noise_std, ard_levels or None)
    ("tanh", None, None), ("logistic", None, None), ("tanh", 0.3, None),
    ("logistic", 0.3, 3), ("tanh", None, 3), ("tanh", None, 2),
]


def problem(rng, act, noise_std, ard_levels, t=1.7):
    ard = {} if ard_levels is None else {"ard": True, "ard_levels": ard_levels}
    arch = RegressionMLP(3, [6], 2, hidden_activation=act, noise_std=noise_std,
                         parameterisation="scale", **ard)
    pot = arch.potential(x=rng.uniform(-2, 2, (40, 3)), y=rng.normal(size=(40, 2)))
    pot.set_hyperparameters(rng.uniform(0.5, 5.0, arch.initial_hyper().size), t)
    q0 = 0.5 * rng.normal(size=arch.n_params)
    q0[-len(pot.group_index):] = rng.uniform(-1.0, 1.0, len(pot.group_index))
    return arch, pot, q0


def both(pot, q0, p0, inv_m, step, n_steps, wall, hw, runaway):
    """(result, q, p, grad) of the compiled trajectory and of the Python-loop default."""
    _, g0 = pot.energy_and_grad(q0)
    out = []
    for run in (pot.trajectory, lambda *a: Potential.trajectory(pot, *a)):
        q, p, g = q0.copy(), p0.copy(), g0.copy()
        res = run(q, p, g, inv_m, step, n_steps, wall, hw, runaway)
        out.append((res, q, p, g))
    return out


@pytest.mark.parametrize("act,noise_std,ard_levels", CASES)
@pytest.mark.slow
def test_compiled_trajectory_equals_the_python_loop(rng, act, noise_std, ard_levels):
    arch, pot, q0 = problem(rng, act, noise_std, ard_levels)
    n = arch.n_params
    p0 = rng.normal(size=n)
    inv_m = rng.uniform(0.5, 1.5, n)
    (r1, q1, p1, g1), (r2, q2, p2, g2) = both(pot, q0, p0, inv_m, 0.01, 40, lf.WALL_NONE,
                                              np.full(n, 1e8), 10.0)
    assert r1[1:] == r2[1:] == (40, lf.OK, 0)
    assert r1[0] == pytest.approx(r2[0], rel=1e-12)
    np.testing.assert_allclose(q1, q2, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(p1, p2, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(g1, g2, rtol=1e-12, atol=1e-12)
    # the end point's energy and gradient are those of the NumPy potential there
    e, g = pot.energy_and_grad(q1)
    assert r1[0] == pytest.approx(e, rel=1e-12)
    np.testing.assert_allclose(g1, g, rtol=1e-11, atol=1e-12)
    # and it moved: a trajectory that did nothing would pass the comparisons above
    assert np.max(np.abs(q1 - q0)) > 0.05


def test_reflecting_walls_equal_the_python_loop(rng):
    arch, pot, q0 = problem(rng, "tanh", None, 3)
    n = arch.n_params
    hw = np.full(n, 1.2)
    q0 = np.clip(q0, -1.0, 1.0)
    p0 = 2.0 * rng.normal(size=n)
    (r1, q1, p1, _), (r2, q2, p2, _) = both(pot, q0, p0, np.ones(n), 0.02, 30,
                                            lf.WALL_REFLECT, hw, 10.0)
    assert r1[1:3] == r2[1:3] == (30, lf.OK)
    assert r1[3] == r2[3] > 0                   # the same number of reflections, some
    assert r1[0] == pytest.approx(r2[0], rel=1e-12)
    np.testing.assert_allclose(q1, q2, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(p1, p2, rtol=1e-12, atol=1e-12)
    assert np.all(np.abs(q1) <= 1.2)


@pytest.mark.parametrize("what", ["u overflows", "u underflows", "nan weight",
                                  "diverges", "runaway"])
def test_early_stops_give_the_same_status(rng, what):
    """Overflow or NaN mid-trajectory ends it as NON_FINITE (the direct kernel's code), a
    runaway as RUNAWAY, at the same step as the Python loop."""
    arch, pot, q0 = problem(rng, "tanh", None, None)
    n = arch.n_params
    p0 = rng.normal(size=n)
    hw, runaway, step, n_steps = np.full(n, 1e8), 10.0, 0.01, 20
    want, wall = lf.NON_FINITE, lf.WALL_NONE
    if what == "u overflows":
        p0[-1] = 8e4                             # u reaches ~800 after the first drift
    elif what == "u underflows":
        p0[-1] = -8e4
    elif what == "nan weight":
        # without walls the drift's runaway test catches a NaN coordinate first (RUNAWAY);
        # with reflection it reaches the energy
        p0[3], wall = math.nan, lf.WALL_REFLECT
    elif what == "diverges":
        step, n_steps = 0.5, 200                 # unstable: overflows after a few steps
    else:                                        # a few steps of 0.06 reach the limit
        p0, step = 3.0 * np.sign(p0), 0.02
        hw, runaway, want = np.full(n, np.max(np.abs(q0)) + 0.3), 1.0, lf.RUNAWAY
    (r1, q1, p1, _), (r2, q2, p2, _) = both(pot, q0, p0, np.ones(n), step, n_steps,
                                            wall, hw, runaway)
    assert r1[2] == r2[2] == want
    assert r1[1] == r2[1] < n_steps
    if what in ("diverges", "runaway"):
        assert r1[1] > 2                         # stopped mid-trajectory
    if want == lf.NON_FINITE:
        assert not math.isfinite(r1[0]) and not math.isfinite(r2[0])
    else:
        np.testing.assert_allclose(q1, q2, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("ard_levels,noise_std", [(None, None), (3, None), (3, 0.3)])
def test_sampler_transitions_equal_with_the_python_loop(ard_levels, noise_std):
    """hmc-gibbs with persistence, transition by transition from the same state and the same
    random stream: the compiled and the Python-loop trajectory give the same proposal, the
    same accept decision and the same next state (hyperparameters included)."""
    kw = {} if ard_levels is None else {"ard": True, "ard_levels": ard_levels}
    arch = RegressionMLP(2, [4], 1, noise_std=noise_std, parameterisation="scale", **kw)
    rng0 = np.random.default_rng(11)
    x = rng0.uniform(-2, 2, (25, 2))
    y = np.sin(x[:, :1]) + 0.1 * rng0.normal(size=(25, 1))

    def sampler():
        return GibbsHMC(arch.potential(x=x, y=y), step_size=0.03, n_leapfrog=20,
                        persistence=0.8, step_size_jitter=0.3)

    compiled, python = sampler(), sampler()
    python.potential.trajectory = types.MethodType(Potential.trajectory, python.potential)
    rng = np.random.default_rng(5)
    state = compiled.init(arch.initial_draw(rng))
    accepted = []
    for _ in range(40):
        rng_py = copy.deepcopy(rng)
        new, info = compiled.step(state, rng)
        new_py, info_py = python.step(state, rng_py)
        assert info.is_accepted == info_py.is_accepted
        assert info.energy_after == pytest.approx(info_py.energy_after, rel=1e-11, abs=1e-11)
        for a, b in ((new.theta, new_py.theta), (new.momentum, new_py.momentum),
                     (new.grad, new_py.grad), (new.hyper, new_py.hyper)):
            np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-12)
        accepted.append(info.is_accepted)
        state = new
    assert 0 < sum(accepted) < len(accepted)    # both decisions occur
    if ard_levels == 3:                          # the top level's mean moved
        assert state.hyper[-1] != arch.initial_hyper()[-1]
