"""HMC: leapfrog properties and statistical tests on exact targets.

Statistical assertions use fixed seeds and compare with exact values in units of the
estimator's own error bar (batch means over correlated chains): |estimate - exact| < 4 sigma.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import integrate

from thermonet.architectures.mlp import M3
from thermonet.errors import ConfigError
from thermonet.kernels import leapfrog as lf
from thermonet.kernels import momenta as mom
from thermonet.priors import BoxPrior
from thermonet.samplers.hmc import HMC
from thermonet.stats import batch_means
from thermonet.testsystems import DoubleWell, Flat, Gaussian

Z = 4.0  # tolerance in standard errors


def _chain(sampler, theta0, n, seed, burn=100, adapt=True):
    rng = np.random.default_rng(seed)
    st = sampler.init(theta0)
    if adapt:
        st = sampler.adapt(st, rng, factor=0.5)
        st = sampler.adapt(st, rng, factor=0.9)
    thetas, energies, infos = [], [], []
    for i in range(n + burn):
        st, info = sampler.step(st, rng)
        if i >= burn:
            thetas.append(st.theta.copy())
            energies.append(st.energy)
            infos.append(info)
    return np.array(thetas), np.array(energies), infos


def _close(samples, exact, z=Z):
    m, err = batch_means(samples)
    assert abs(m - exact) < z * err, f"{m} ± {err} vs exact {exact}"
    return m, err


# --- leapfrog -------------------------------------------------------------------------------

def test_leapfrog_is_time_reversible_on_mnist(d50, rng):
    arch = M3()
    pot = arch.potential(d50)
    theta0 = arch.initial_draw(rng)
    _, g0 = pot.energy_and_grad(theta0)
    p0 = rng.normal(size=arch.n_params)
    half = BoxPrior.for_architecture(arch).half_width
    inv_m = np.ones(arch.n_params)
    theta, p, g = theta0.copy(), p0.copy(), g0.copy()
    pot.trajectory(theta, p, g, inv_m, 0.01, 50, lf.WALL_NONE, half, 10.0)
    assert np.max(np.abs(theta - theta0)) > 1e-2          # it moved
    p = -p
    pot.trajectory(theta, p, g, inv_m, 0.01, 50, lf.WALL_NONE, half, 10.0)
    np.testing.assert_allclose(theta, theta0, rtol=0, atol=1e-11)
    np.testing.assert_allclose(-p, p0, rtol=0, atol=1e-9)


def test_reflecting_walls_are_reversible_and_keep_the_box(rng):
    arch = Gaussian(n=4, stiffness=0.01)
    pot = arch.potential()
    half = np.array([0.3, 0.5, 1.0, 2.0])
    theta0 = rng.uniform(-0.2, 0.2, 4)
    p0 = rng.normal(size=4) * 3
    _, g0 = pot.energy_and_grad(theta0)
    theta, p, g = theta0.copy(), p0.copy(), g0.copy()
    _, _, status, n_ref = pot.trajectory(theta, p, g, np.ones(4), 0.05, 200, lf.WALL_REFLECT,
                                         half, 10.0)
    assert status == lf.OK and n_ref > 10
    assert np.all(np.abs(theta) <= half)
    p = -p
    pot.trajectory(theta, p, g, np.ones(4), 0.05, 200, lf.WALL_REFLECT, half, 10.0)
    np.testing.assert_allclose(theta, theta0, atol=1e-12)
    np.testing.assert_allclose(-p, p0, atol=1e-12)


def test_leapfrog_energy_error_is_second_order(d50, rng):
    """Halving dt at fixed trajectory length quarters the energy error."""
    arch = M3()
    pot = arch.potential(d50)
    theta0 = arch.initial_draw(rng)
    e0, g0 = pot.energy_and_grad(theta0)
    p0 = rng.normal(size=arch.n_params)
    half = np.full(arch.n_params, np.inf)
    errors = []
    for dt, n in [(0.004, 25), (0.002, 50), (0.001, 100)]:
        theta, p, g = theta0.copy(), p0.copy(), g0.copy()
        e1, *_ = pot.trajectory(theta, p, g, np.ones(arch.n_params), dt, n, lf.WALL_NONE, half,
                                10.0)
        errors.append(abs(e1 + 0.5 * p @ p - e0 - 0.5 * p0 @ p0))
    for coarse, fine in itertools.pairwise(errors):
        assert 3.5 < coarse / fine < 4.5, errors


# --- HMC on exact targets --------------------------------------------------------------------

@pytest.mark.parametrize("temperature", [0.1, 1.0, 7.0])
def test_hmc_gaussian_energy_and_variances(temperature):
    """<E> = d T / 2 and var(w_i) = T / k_i; masses m_i = k_i exercise the mass option."""
    k = np.array([1.0, 3.0, 10.0, 30.0])
    arch = Gaussian(n=4, stiffness=k, centre=[1.0, -2.0, 0.0, 0.5])
    s = HMC(arch.potential(), temperature=temperature, masses=np.sqrt(k), n_leapfrog=10,
            step_size=0.1)
    thetas, energies, infos = _chain(s, arch.centre, 4000, seed=1)
    _close(energies, 4 * temperature / 2)
    for i in range(4):
        _close((thetas[:, i] - arch.centre[i]) ** 2, temperature / k[i])
    acc = np.mean([inf.is_accepted for inf in infos])
    assert 0.3 < acc < 1.0


@pytest.mark.parametrize("wall", ["endpoint", "reflect"])
def test_hmc_flat_box_gives_uniform_marginals(wall):
    arch = Flat(n=3, prior_scale=2.0)                       # box |w_i| < 1
    prior = BoxPrior.for_architecture(arch)
    s = HMC(arch.potential(), prior=prior, temperature=1.0, n_leapfrog=5, step_size=0.3,
            wall=wall)
    thetas, _, infos = _chain(s, np.zeros(3), 4000, seed=2, adapt=False)
    assert np.all(np.abs(thetas) < 1)
    for i in range(3):
        _close(thetas[:, i], 0.0)
        _close(thetas[:, i] ** 2, 1.0 / 3.0)                # E[w^2] of U(-1, 1)
        _close(np.abs(thetas[:, i]) < 0.5, 0.5)
    if wall == "endpoint":
        assert any(not inf.in_box for inf in infos)         # some proposals left the box
    else:
        assert all(inf.in_box for inf in infos) and sum(inf.n_reflections for inf in infos) > 0


def test_hmc_double_well_against_quadrature():
    arch = DoubleWell(n=1, height=1.0, prior_scale=6.0)     # box |w| < 3
    prior = BoxPrior.for_architecture(arch)
    temperature = 0.4
    s = HMC(arch.potential(), prior=prior, temperature=temperature, n_leapfrog=20,
            step_size=0.1)
    thetas, _, _ = _chain(s, np.array([1.0]), 6000, seed=3)
    w = thetas[:, 0]

    def expect(f):
        num = integrate.quad(lambda x: f(x) * math.exp(-(x * x - 1) ** 2 / temperature), -3, 3,
                             points=[-1, 0, 1])[0]
        den = integrate.quad(lambda x: math.exp(-(x * x - 1) ** 2 / temperature), -3, 3,
                             points=[-1, 0, 1])[0]
        return num / den

    _close(w**2, expect(lambda x: x * x))
    _close(w**4, expect(lambda x: x**4))
    _close(np.abs(w) < 0.5, expect(lambda x: float(abs(x) < 0.5)))
    _close(w > 0, 0.5)                                       # it crosses the barrier


def test_divergent_proposals_are_recorded_not_raised(d50, rng):
    arch = M3()
    prior = BoxPrior.for_architecture(arch)
    s = HMC(arch.potential(d50), prior=prior, temperature=1.0, n_leapfrog=20, step_size=50.0)
    st = s.init(arch.initial_draw(rng))
    for _ in range(3):
        new, info = s.step(st, rng)
        assert not info.is_accepted and info.is_divergent
        assert info.n_steps < 20                             # stopped by the runaway guard
        assert new is st


def test_nan_energy_is_a_rejected_proposal(rng):
    class NanBeyondOne(Gaussian):
        def potential(self, data=None, **options):
            base = super().potential()

            class P(type(base)):
                def energy_and_grad(self, theta, grad_out=None):
                    e, g = super().energy_and_grad(theta, grad_out)
                    return (float("nan") if abs(theta[0]) > 1 else e), g

            return P(base.k, base.mu)

    arch = NanBeyondOne(n=1, stiffness=0.1)
    s = HMC(arch.potential(), temperature=1.0, n_leapfrog=20, step_size=0.5)
    _, _, infos = _chain(s, np.array([0.0]), 300, seed=4, burn=0, adapt=False)
    div = [inf for inf in infos if inf.is_divergent]
    assert div and not any(inf.is_accepted for inf in div)
    assert any(inf.is_accepted for inf in infos)


def test_mixed_precision_accepts_on_float64_energies(d50, rng):
    arch = M3()
    pot = arch.potential(d50)
    s = HMC(pot, prior=BoxPrior.for_architecture(arch), temperature=1.0, n_leapfrog=10,
            step_size=0.02, precision="mixed")
    st = s.init(arch.initial_draw(rng))
    for _ in range(5):
        theta, e1, _, info, _ = s.propose(st, rng)
        assert e1 == pot.energy(theta)                      # float64, bit for bit
        st = s.step(st, rng)[0]
    assert st.energy == pot.energy(st.theta)


def test_step_size_adaptation_reaches_the_window():
    arch = Gaussian(n=20, stiffness=np.linspace(1, 50, 20))
    for method in ("original", "dual-averaging"):
        s = HMC(arch.potential(), temperature=1.0, n_leapfrog=10, step_size=1e-3,
                adapt_method=method, adapt_trajectories=20)
        rng = np.random.default_rng(5)
        st = s.init(np.zeros(20))
        st = s.adapt(st, rng, factor=0.5)
        st = s.adapt(st, rng, factor=0.9)
        n = 400
        acc = np.mean([s.step(st, rng)[1].is_accepted for _ in range(n)])
        # measured acceptance at the adapted dt (from a fixed state) vs the window, with the
        # binomial standard error of the measurement and of the adaptation's own estimate
        assert 0.6 - Z * 0.11 < acc < 0.7 + Z * 0.11, (method, st.step_size, acc)
        assert st.step_size > 1e-2                               # it grew from 1e-3


@pytest.mark.parametrize("bad,match", [
    ({"step_size": 0.0}, "step_size = 0.0"), ({"step_size": -1.0}, "expected dt > 0"),
    ({"accept_window": (0.7, 0.6)}, "0 < low < high < 1"),
    ({"accept_window": (0.0, 0.7)}, "0 < low < high < 1"),
    ({"wall": "bounce"}, "wall = 'bounce'"), ({"n_leapfrog": 0}, "n_leapfrog = 0"),
    ({"setp_size": 0.1}, "did you mean 'step_size'"),
])
def test_hmc_config_errors(bad, match):
    with pytest.raises(ConfigError, match=match):
        HMC(Gaussian(n=1).potential(), **bad)


def test_negative_temperature_is_rejected():
    with pytest.raises(ConfigError, match="temperature T = -1.0"):
        HMC(Gaussian(n=1).potential(), temperature=-1.0)


@pytest.mark.parametrize("masses", ["ones", "per-layer", "per-parameter"])
def test_compiled_trajectory_equals_the_generic_one_bitwise(d50, rng, masses):
    """The MLP's compiled trajectory and the generic Python one (same leapfrog arithmetic,
    gradients from energy_and_grad) agree bit for bit with the ``np.dot`` backend: the compiled
    kernel calls the current gradient kernel, not a stale cached one. With MKL the kicks
    inside the trajectory accumulate the gradient into ``p`` in the matrix product (one block
    of data, ``mlp.loss_and_kick``), which rounds differently: one step (no such kick) is still
    bitwise, seven steps agree to round-off. Per-layer masses take the compiled kernel's
    constant-run path, per-parameter masses (more than ``lf.MAX_RUNS`` runs) its array path."""
    from thermonet.api import Potential
    from thermonet.kernels.matmul import blas

    arch = M3()
    pot = arch.potential(d50)
    theta0 = arch.initial_draw(rng)
    _, g0 = pot.energy_and_grad(theta0)
    p0 = rng.normal(size=arch.n_params)
    half = BoxPrior.for_architecture(arch).half_width
    inv_m = {"ones": np.ones(arch.n_params),
             "per-layer": 1.0 / np.sqrt(arch.fan_in()) * 7.0,
             "per-parameter": rng.uniform(0.5, 2.0, arch.n_params)}[masses]
    n_runs = lf.runs(inv_m, half, lf.MAX_RUNS)[0].shape[0] - 1
    assert (n_runs > 0) == (masses != "per-parameter")
    for wall in (lf.WALL_NONE, lf.WALL_REFLECT):
        for n_steps in (1, 7):
            a = [theta0.copy(), p0.copy(), g0.copy()]
            b = [theta0.copy(), p0.copy(), g0.copy()]
            ra = pot.trajectory(a[0], a[1], a[2], inv_m, 0.01, n_steps, wall, half, 10.0)
            rb = Potential.trajectory(pot, b[0], b[1], b[2], inv_m, 0.01, n_steps, wall, half,
                                      10.0)
            assert ra[1:] == rb[1:] == (n_steps, lf.OK, ra[3])
            if blas.BACKEND == "numpy" or n_steps == 1:
                assert ra == rb
                for x, y in zip(a, b, strict=True):
                    assert np.array_equal(x, y)
            else:
                # each inner kick rounds once instead of twice (measured: the arrays differ by
                # at most 0.5 eps of their largest entry after 7 steps)
                eps = np.finfo(np.float64).eps
                assert ra[0] == pytest.approx(rb[0], rel=16 * eps)
                for x, y in zip(a, b, strict=True):
                    np.testing.assert_allclose(x, y, rtol=0, atol=16 * eps * np.abs(y).max())


def test_runs_split_masses_and_widths_into_constant_pieces(rng):
    """``runs`` finds the maximal constant runs of (inv_mass, half_width), and gives up (empty
    arrays) beyond ``max_runs``."""
    im = np.repeat([1.0, 2.0, 2.0, 3.0], [5, 3, 4, 2])
    hw = np.repeat([5.0, 5.0, 6.0, 6.0], [5, 3, 4, 2])
    bounds, im_r, hw_r = lf.runs(im, hw, 64)
    assert bounds.tolist() == [0, 5, 8, 12, 14]
    assert im_r.tolist() == [1.0, 2.0, 2.0, 3.0] and hw_r.tolist() == [5.0, 5.0, 6.0, 6.0]
    assert lf.runs(im, hw, 3)[0].shape == (0,)
    assert lf.runs(np.ones(7), np.ones(7), 1)[0].tolist() == [0, 7]


def test_kick_drift_on_runs_is_bitwise_the_array_pass(rng):
    """The constant-run pass does exactly the arithmetic of ``kick_drift_check``, including the
    runaway flag (checked on a case where it fires and one where it does not)."""
    n = 1000
    im = np.repeat([0.5, 2.0, 1.3], [600, 300, 100])
    hw = np.repeat([3.0, 0.7, 0.7], [600, 300, 100])
    bounds, im_r, hw_r = lf.runs(im, hw, 64)
    for runaway in (0.9, 50.0):
        theta = rng.uniform(-2.0, 2.0, n)
        p, g = rng.normal(size=n), rng.normal(size=n)
        a = [theta.copy(), p.copy()]
        b = [theta.copy(), p.copy()]
        fa = lf.kick_drift_check(a[0], a[1], g, im, 0.037, hw, runaway)
        fb = lf.kick_drift_check_runs(b[0], b[1], g, 0.037, bounds, im_r, hw_r, runaway)
        assert fa == fb == (runaway == 0.9)
        assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])


def test_compiled_momentum_draw_is_numpys_stream():
    """``draw_momenta`` gives the normals of ``rng.standard_normal(n)`` scaled, the kinetic
    energy of ``kinetic``, and leaves the generator where NumPy leaves it."""
    scale = np.random.default_rng(3).uniform(0.1, 3.0, 5000)
    inv_m = 1.0 / scale**2
    for seed in (0, 1, 2):
        ra, rb = np.random.default_rng(seed), np.random.default_rng(seed)
        pa = ra.standard_normal(scale.shape[0]) * scale
        pb = np.empty_like(pa)
        kb = mom.draw_momenta(rb, scale, inv_m, pb)
        assert np.array_equal(pa, pb)
        assert kb == lf.kinetic(pa, inv_m)
        assert ra.random() == rb.random()


@pytest.mark.parametrize("n", [1, 7, mom.NUMPY_DRAW_MAX, mom.NUMPY_DRAW_MAX + 1, 3000])
def test_momenta_by_either_route_are_the_compiled_draws_bits(n):
    """:func:`momenta` draws small vectors in NumPy and large ones in compiled code; either
    way the momenta, the kinetic energy and the generator's next state are
    :func:`draw_momenta`'s, bit for bit."""
    scale = np.random.default_rng(4).uniform(0.1, 3.0, n)
    inv_m = 1.0 / scale**2
    ra, rb = np.random.default_rng(n), np.random.default_rng(n)
    pa, pb = np.empty(n), np.full(n, np.nan)
    ka = mom.draw_momenta(ra, scale, inv_m, pa)
    kb = mom.momenta(rb, scale, inv_m, pb)
    assert np.array_equal(pa, pb) and ka == kb and type(kb) is float
    assert ra.random() == rb.random()
