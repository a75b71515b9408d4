"""The JAX engine (``[run] engine = "jax"``): its energies, gradients and trajectories against
the compiled kernels, the batching of the slots' requests, the stationary distribution of its
on-device ladder iterations, and runs that resume bit for bit."""

from __future__ import annotations

import math
import threading

import numpy as np
import pytest

jax = pytest.importorskip("jax")

from thermonet import accel  # noqa: E402
from thermonet import config as cfgmod  # noqa: E402
from thermonet.accel.batcher import Batcher, BatchingExecutor  # noqa: E402
from thermonet.accel.jax_network import BatchedNetwork, reflect_into_box  # noqa: E402
from thermonet.api import NetworkSpec, Potential  # noqa: E402
from thermonet.architectures.mlp import MLP  # noqa: E402
from thermonet.architectures.regression import RegressionMLP  # noqa: E402
from thermonet.errors import ConfigError  # noqa: E402
from thermonet.kernels import leapfrog as lf  # noqa: E402
from thermonet.priors import BoxPrior  # noqa: E402
from thermonet.samplers.hmc import HMC, HMCConfig  # noqa: E402
from thermonet.tempering import Ladder, ReplicaExchange, make_scheme  # noqa: E402
from thermonet.tempering.device import DeviceReplicaExchange  # noqa: E402

EPS = np.finfo(np.float64).eps


def _classifier(hidden, output="linear", hidden_act="logistic", n=37, n_in=9, n_out=4, seed=0):
    rng = np.random.default_rng(seed)
    arch = MLP(n_in, hidden, n_out, output, hidden_activation=hidden_act)
    pot = arch.potential(x=rng.random((n, n_in)), y=rng.integers(0, n_out, n))
    return arch, pot


def _regression(seed=0):
    rng = np.random.default_rng(seed)
    arch = RegressionMLP(n_inputs=3, hidden=[5], n_outputs=2, hidden_activation="tanh")
    pot = arch.potential(x=rng.standard_normal((23, 3)), y=rng.standard_normal((23, 2)))
    hyper = np.exp(rng.standard_normal(arch.hyper_model(pot.n_residuals).n_hyper))
    pot.set_hyperparameters(hyper, 1.7)
    return arch, pot


POTENTIALS = {
    "logistic-linear": lambda: _classifier((6,)),
    "deep-logistic-output": lambda: _classifier((5, 4, 3), output="logistic"),
    "tanh": lambda: _classifier((7, 3), hidden_act="tanh"),
    "regression": _regression,
}


def _terms(pot, k):
    tau, prec, const = pot.network_spec().terms()
    return (np.full(k, tau), np.tile(np.asarray(prec, dtype=np.float64), (k, 1)),
            np.full(k, const))


def _thetas(pot, k, scale, seed=1):
    return np.random.default_rng(seed).uniform(-scale, scale, (k, pot.n_params))


# --- the network against the compiled kernels -------------------------------------------------

@pytest.mark.parametrize("name", sorted(POTENTIALS))
def test_energy_and_gradient_equal_the_compiled_kernels(name):
    _, pot = POTENTIALS[name]()
    theta = _thetas(pot, 3, 1.5)
    net = BatchedNetwork(pot.network_spec())
    e, g = net.energy_and_grad(theta, *_terms(pot, 3))
    e_only = net.energy(theta, *_terms(pot, 3))
    for k in range(3):
        e0, g0 = pot.energy_and_grad(theta[k].copy())
        # both sum O(n_data * width) float64 terms in different orders: each differs from the
        # exact sum by at most ~ n_terms * eps * (sum of |terms|) <= 1e-13 relative here; 1e-11
        # leaves a margin that no vector width or summation order uses up
        assert abs(e[k] - e0) <= 1e-11 * abs(e0)
        assert e_only[k] == pytest.approx(e[k], rel=1e-14)
        assert np.max(np.abs(g[k] - g0)) <= 1e-11 * np.max(np.abs(g0))


def test_float32_gradients_agree_to_float32_rounding():
    _, pot = _classifier((6, 5))
    theta = _thetas(pot, 2, 1.0)
    e64, g64 = BatchedNetwork(pot.network_spec()).energy_and_grad(theta, *_terms(pot, 2))
    e32, g32 = BatchedNetwork(pot.network_spec(), "float32").energy_and_grad(
        theta, *_terms(pot, 2))
    # float32 passes: relative rounding ~ depth * eps32 (6e-8) times a conditioning of O(10)
    assert np.allclose(e32, e64, rtol=1e-5)
    assert np.max(np.abs(g32 - g64)) <= 1e-4 * np.max(np.abs(g64))
    assert g32.dtype == np.float64


def _numba_trajectory(pot, theta, p, grad, inv_mass, step, n_steps, wall, hw, runaway):
    th, pp, gg = theta.copy(), p.copy(), grad.copy()
    e, n, status, n_ref = pot.trajectory(th, pp, gg, inv_mass, step, n_steps, wall, hw, runaway)
    return th, pp, gg, e, n, status, n_ref


@pytest.fixture(scope="module")
def small_network():
    """One classifier and its batched network, compiled once for the trajectory cases."""
    arch, pot = _classifier((6,), n=29)
    return arch, pot, BatchedNetwork(pot.network_spec())


@pytest.mark.parametrize("wall", [lf.WALL_NONE, lf.WALL_REFLECT])
@pytest.mark.parametrize("case", ["inside", "walls", "runaway", "nan"])
@pytest.mark.slow
def test_batched_trajectories_equal_the_compiled_kernel_row_by_row(wall, case, small_network):
    """Every row of one batched call ends where the compiled trajectory kernel ends from the
    same start (same status, step count and reflections), and where the same row alone ends."""
    arch, pot, net = small_network
    k = 4
    hw = BoxPrior.for_architecture(arch).half_width
    if case in ("walls", "runaway"):
        hw = hw * 0.02            # a narrow box: reflections, or end points outside it
    theta = _thetas(pot, k, 0.5) * np.minimum(hw, 1.0)
    if case == "nan":
        theta[1, 3] = np.nan
    rng = np.random.default_rng(2)
    p = rng.standard_normal((k, pot.n_params)) * 3.0
    _, grad = net.energy_and_grad(np.nan_to_num(theta), *_terms(pot, k))
    inv_mass = rng.uniform(0.5, 2.0, (k, pot.n_params))
    step = np.array([0.01, 0.02, 0.005, 0.015])
    n_steps = np.array([7, 3, 12, 1])
    runaway = np.full(k, 1.2 if case == "runaway" else 10.0)
    hw_k = np.tile(hw, (k, 1))
    out = net.trajectories(theta, p, grad, inv_mass, step, n_steps, wall == lf.WALL_REFLECT,
                           hw_k, runaway, *_terms(pot, k))
    statuses = set()
    for r in range(k):
        ref = _numba_trajectory(pot, theta[r], p[r], grad[r], inv_mass[r], step[r],
                                int(n_steps[r]), wall, hw, runaway[r])
        one = net.trajectories(theta[r:r + 1], p[r:r + 1], grad[r:r + 1], inv_mass[r:r + 1],
                               step[r:r + 1], n_steps[r:r + 1], wall == lf.WALL_REFLECT,
                               hw_k[r:r + 1], runaway[r:r + 1],
                               *(t[r:r + 1] for t in _terms(pot, k)))
        assert (int(out[4][r]), int(out[5][r]), int(out[6][r])) == ref[4:7]
        statuses.add(int(out[5][r]))
        if ref[5] != lf.OK:
            continue                  # an early stop's end point is rejected either way
        # a few steps of dynamics amplify rounding (~1e-16) by at most a few orders
        for a, b in zip(out[:3], ref[:3], strict=True):
            assert np.allclose(a[r], b, rtol=1e-9, atol=1e-12)
        assert out[3][r] == pytest.approx(ref[3], rel=1e-11)
        for a, b in zip(out, one, strict=True):
            assert np.allclose(a[r], b[0], rtol=1e-13, atol=1e-15, equal_nan=True)
    expected = {"inside": {lf.OK}, "walls": {lf.OK} if wall == lf.WALL_REFLECT else None,
                "runaway": None,
                "nan": {lf.NON_FINITE if wall == lf.WALL_REFLECT else lf.RUNAWAY, lf.OK}}[case]
    if case == "runaway" and wall == lf.WALL_NONE:
        assert lf.RUNAWAY in statuses
    if expected is not None:
        assert statuses == expected


def test_reflection_folds_like_the_compiled_drift():
    rng = np.random.default_rng(3)
    n = 5000
    a = rng.uniform(0.1, 2.0, n)
    theta0 = rng.uniform(-1, 1, n) * a
    p = rng.standard_normal(n) * rng.choice([0.1, 3.0, 30.0], n)
    step = 0.7
    th_ref, p_ref = theta0.copy(), p.copy()
    n_ref = lf.drift_reflect(th_ref, p_ref, np.ones(n), step, a)
    moved = theta0 + step * p
    th, pp, n_fold = (np.asarray(v) for v in reflect_into_box(moved, p, a))
    # the compiled drift folds one wall at a time, rounding once per fold; the closed form
    # rounds a few times: both within (folds + 1) * 4 eps * (|t| + a) of the exact fold
    folds = np.ceil(np.maximum(np.abs(moved) - a, 0) / (2 * a)) + 1
    tol = (folds + 1) * 4 * EPS * (np.abs(moved) + a)
    assert np.array_equal(np.isnan(th), np.isnan(th_ref))
    assert np.isnan(th_ref).any()          # some coordinates needed more than 64 folds
    ok = ~np.isnan(th_ref)
    assert np.all(np.abs(th[ok] - th_ref[ok]) <= tol[ok])
    assert np.array_equal(np.sign(pp[ok]), np.sign(p_ref[ok]))
    assert int(n_fold) == n_ref
    assert np.all(np.abs(th[ok]) <= a[ok])


# --- batching -----------------------------------------------------------------------------------

def test_the_batcher_runs_the_slots_requests_together_and_keeps_rows_apart():
    batcher = Batcher(5)
    executor = BatchingExecutor(batcher)
    seen: list[list[int]] = []

    def double(rows):
        seen.append([r for r, _ in rows])
        return [2 * r for r, _ in rows]

    def slot(k):
        out = []
        for i in range(k + 1):        # slot k makes k + 1 requests
            out.append(batcher.call("double", (10 * k + i, threading.get_ident()), double))
        return out

    results = executor.map(slot, range(5))
    assert results == [[2 * (10 * k + i) for i in range(k + 1)] for k in range(5)]
    # round r holds the r-th request of every slot that still has one, padded to 5 rows
    assert [row[:5 - r] for r, row in enumerate(seen)] == [
        [10 * k + r for k in range(r, 5)] for r in range(5)]
    assert all(len(rows) == 5 for rows in seen)
    assert batcher.call("double", (7, 0), double) == 14          # outside a map: at once
    executor.close()


def test_a_failing_batched_call_raises_in_every_waiting_slot():
    batcher = Batcher(3)
    executor = BatchingExecutor(batcher)

    def boom(rows):
        raise ValueError("planted")

    with pytest.raises(ValueError, match="planted"):
        executor.map(lambda k: batcher.call("x", (k,), boom), range(3))
    executor.close()


# --- the stationary distribution ----------------------------------------------------------------

class _LinearGaussian(Potential):
    """``E(w) = |X w + b - y|^2 / 2 + sum prec w^2 / 2``: a linear network whose posterior at
    temperature T is a product of independent Gaussians (orthogonal, centred columns)."""

    def __init__(self) -> None:
        rng = np.random.default_rng(4)
        a = rng.standard_normal((12, 4))
        q, _ = np.linalg.qr(a - a.mean(axis=0))     # centred (the bias decouples), orthogonal
        self.x = q * np.array([3.0, 2.0, 1.0, 0.5])
        self.y = rng.standard_normal((12, 1))
        self.n_params = 5              # 4 weights, then the bias
        self.prec = np.array([0.5, 1.0, 2.0, 0.1, 0.3])

    def network_spec(self):
        return NetworkSpec((4, 1), "logistic", "linear", "half_sse", self.x, self.y,
                           lambda: (1.0, self.prec, 0.0))

    def _parts(self, theta):
        r = self.x @ theta[:4] + theta[4] - self.y[:, 0]
        return r, 0.5 * r @ r + 0.5 * np.sum(self.prec * theta * theta)

    def energy(self, theta):
        return float(self._parts(np.asarray(theta))[1])

    def energy_and_grad(self, theta, grad_out=None):
        theta = np.asarray(theta)
        r, e = self._parts(theta)
        g = np.concatenate([self.x.T @ r, [r.sum()]]) + self.prec * theta
        if grad_out is not None:
            grad_out[:] = g
            g = grad_out
        return float(e), g

    def exact(self):
        """Mean and curvature of each coordinate (the Hessian is diagonal)."""
        xtx = np.diag(self.x.T @ self.x)
        h = np.concatenate([xtx, [self.x.shape[0]]]) + self.prec
        b = np.concatenate([self.x.T @ self.y[:, 0], [self.y.sum()]])
        return b / h, h


class _Box:
    def __init__(self, half_width):
        self.half_width = half_width
        self.n_params = half_width.shape[0]

    def sample(self, rng):
        return rng.uniform(-self.half_width, self.half_width)


def _truncated_moments(mu, var, a):
    from scipy.stats import truncnorm

    sd = np.sqrt(var)
    d = truncnorm((-a - mu) / sd, (a - mu) / sd, loc=mu, scale=sd)
    return d.mean(), d.var()


@pytest.mark.slow
@pytest.mark.parametrize("scheme,precision,band", [("deo", "float64", ()),
                                                   ("random-pairs", "float64", (2.0, 5.0)),
                                                   ("even-odd", "mixed", ())])
def test_the_device_ladder_samples_the_exact_tempered_gaussian(scheme, precision, band):
    """Each rung's mean and variance of every coordinate against the exact truncated
    Gaussian (the box cuts the hot rungs), from the on-device iterations; z-scores from
    batch means (fixed seed). ``band``: the rung at T = 3 makes 4 transitions per iteration,
    the others 2 (the device then runs the extra ones on that row alone)."""
    target = _LinearGaussian()
    half_width = np.full(5, 3.0)
    temps = np.array([0.3, 1.0, 3.0, 9.0, np.inf])
    potential, executor = accel.jax_engine_parts(target, len(temps))
    config = HMCConfig(n_leapfrog=8, step_size=0.25, wall="reflect", step_size_jitter=0.3,
                       n_leapfrog_jitter=0.5, precision=precision)
    engine = DeviceReplicaExchange(HMC, potential, Ladder(temps), prior=_Box(half_width),
                                   sampler_config=config, n_trajectories=2, band=band,
                                   band_trajectories=4 if band else 0,
                                   swap=make_scheme(scheme), executor=executor)
    assert engine.on_device
    streams = engine.make_streams(11)
    state = engine.init(np.zeros(5))
    corrected = [s.step_size for s in state.slots]
    for k, s in enumerate(engine.samplers[:-1]):
        corrected[k] = 0.5 * math.sqrt(temps[k])           # about 0.7 acceptance
    state = state._replace(slots=tuple(s._replace(step_size=dt) for s, dt in
                                       zip(state.slots, corrected, strict=True)))
    n_iter, n_batch = 6000, 30
    draws = np.empty((n_iter, len(temps), 5))
    for i in range(n_iter):
        state, info = engine.step(state, streams, iteration=i + 1)
        draws[i] = np.stack([s.theta for s in state.slots])
        assert np.all(info.n_accepted_k <= engine.n_trajectories_k)
    assert list(engine.n_trajectories_k) == ([2, 2, 4, 2, 2] if band else [2] * 5)
    mu, h = target.exact()
    draws = draws[600:]
    for k, t in enumerate(temps[:-1]):
        m_exact, v_exact = _truncated_moments(mu, t / h, half_width)
        batches = draws[:, k].reshape(n_batch, -1, 5)
        for stat, exact in ((batches.mean(axis=1), m_exact),
                            (((batches - m_exact) ** 2).mean(axis=1), v_exact)):
            err = stat.std(axis=0, ddof=1) / math.sqrt(n_batch)
            z = (stat.mean(axis=0) - exact) / err
            assert np.all(np.abs(z) < 4.5), (t, z)
    # the prior rung draws uniformly from the box
    assert abs(draws[:, -1].var(axis=0) / (half_width ** 2 / 3) - 1).max() < 0.1


@pytest.mark.slow
def test_the_batched_slot_by_slot_path_samples_the_exact_gaussian():
    """The warm-up's path (each slot's sampler in a thread, its trajectories batched) at one
    temperature, against the exact Gaussian."""
    target = _LinearGaussian()
    potential, executor = accel.jax_engine_parts(target, 2)
    config = HMCConfig(n_leapfrog=8, step_size=0.45, wall="reflect", step_size_jitter=0.3)
    engine = ReplicaExchange(HMC, potential, Ladder(np.array([1.0, 2.0])),
                             prior=_Box(np.full(5, 50.0)), sampler_config=config,
                             n_trajectories=1, executor=executor)
    streams = engine.make_streams(3)
    state = engine.init(np.zeros(5))
    draws = []
    for i in range(4000):
        state, _ = engine.step(state, streams, iteration=i + 1)
        draws.append(state.slots[0].theta)
    mu, h = target.exact()
    d = np.array(draws[300:]).reshape(20, -1, 5)
    for stat, exact in ((d.mean(axis=1), mu), (((d - mu) ** 2).mean(axis=1), 1.0 / h)):
        z = (stat.mean(axis=0) - exact) / (stat.std(axis=0, ddof=1) / math.sqrt(20))
        assert np.all(np.abs(z) < 4.5), z
    assert executor.batcher.n_calls > 0


# --- runs ---------------------------------------------------------------------------------------

RUN = """
[run]
seed = 3
n_iterations = 8
checkpoint_every = 3
sample_every = 2
engine = "jax"
[data]
name = "D50"
[architecture]
name = "mlp"
hidden = [4]
[init]
minimise = false
burn_in = [2]
[sampler]
name = "hmc"
n_leapfrog = 4
wall = "reflect"
step_size_jitter = 0.2
adapt_method = "chain"
warmup_transitions = 6
[ladder]
n_temperatures = 4
t_min = 0.5
t_max = 20.0
prior_rung = true
swap_scheme = "deo"
adapt_rounds = 1
adapt_round_length = 2
n_trajectories = 2
retune_iterations = 2
"""


@pytest.mark.slow
def test_a_jax_run_resumes_bit_for_bit(tmp_path):
    from thermonet.io import checkpoint as ckpt
    from thermonet.io import trace as iotrace
    from thermonet.runner import Run, detach_log

    p = tmp_path / "c.toml"
    p.write_text(RUN)
    a, b = tmp_path / "a", tmp_path / "b"
    Run.create(cfgmod.load(p), a).run(quiet=True)
    detach_log()
    Run.create(cfgmod.load(p, {"run.n_iterations": 4}), b).run(quiet=True)
    detach_log()
    Run.open(b, n_iterations=8).run(quiet=True)
    detach_log()
    ca, cb = ckpt.read_checkpoint(a), ckpt.read_checkpoint(b)
    assert ca.iteration == cb.iteration == 8
    assert ca.rng_states == cb.rng_states
    for key in ca.slots:
        assert np.array_equal(ca.slots[key], cb.slots[key]), key
    ta, tb = iotrace.read_trace(a, samples=True), iotrace.read_trace(b, samples=True)
    for key in ta:
        assert np.array_equal(ta[key], tb[key]), key
    assert ta["energy_k"].shape == (8, 5)
    # the stored energies are those of the stored configurations
    arch = MLP(256, (4,), 10)
    from thermonet.data import load_configured

    split = load_configured({"name": "D50", "test": "auto"}, 3)
    pot = arch.potential(split.train)
    last = ta["samples_theta"][-1]
    assert np.allclose([pot.energy(t) for t in last], ta["energy_k"][-1], rtol=1e-11)


def test_engine_values_are_checked(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text(RUN.replace('engine = "jax"', 'engine = "cuda"'))
    with pytest.raises(ConfigError, match="run.engine = 'cuda' is out of range"):
        cfgmod.load(p)


def test_the_jax_engine_refuses_a_potential_it_cannot_evaluate_in_one_line():
    from thermonet.testsystems import Gaussian

    with pytest.raises(ConfigError, match="has no network_spec") as err:
        accel.jax_engine_parts(Gaussian().potential(), 2)
    assert "\n" not in str(err.value) and "engine = 'numba'" in str(err.value)


def test_the_jax_engine_refuses_mpi_in_one_line(tmp_path):
    from thermonet.runner import components

    p = tmp_path / "c.toml"
    p.write_text(RUN)
    cfg = cfgmod.load(p, {"run.executor": "mpi"})
    with pytest.raises(ConfigError, match="does not run under MPI"):
        components.build(cfg)


def test_a_jax_run_without_a_gpu_says_so_in_one_line(tmp_path, caplog):
    import logging

    from thermonet.runner import components

    if jax.default_backend() != "cpu":
        pytest.skip("JAX has a GPU here")
    p = tmp_path / "c.toml"
    p.write_text(RUN)
    with caplog.at_level(logging.INFO):
        built = components.build(cfgmod.load(p))
    lines = [r.getMessage() for r in caplog.records if "JAX" in r.getMessage()]
    assert len(lines) == 1 and "no GPU" in lines[0] and "engine = 'numba'" in lines[0]
    assert built.engine.on_device
