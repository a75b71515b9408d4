"""Equilibrium diagnostics: the per-rung renewal of the energy by local moves, passages per
gradient, the strengthened verdict, the end-corrected integration over beta and the
between-run consistency of log Z."""

from __future__ import annotations

import math

import numpy as np
import pytest

from thermonet.analysis.consistency import consistency
from thermonet.analysis.free_energy import free_energies
from thermonet.analysis.local_exploration import (
    gradients_per_iteration,
    lag1_pairs,
    local_exploration,
)
from thermonet.analysis.mixing import MIN_RESTARTS, assess, replica_passages, verdict
from thermonet.errors import ConfigError


def ar1(phi: float, n: int, seed: int) -> np.ndarray:
    """A stationary AR(1) series of unit variance."""
    rng = np.random.default_rng(seed)
    x = np.empty(n)
    x[0] = rng.normal()
    eps = rng.normal(size=n) * math.sqrt(1 - phi * phi)
    for i in range(1, n):
        x[i] = phi * x[i - 1] + eps[i]
    return x


# --- the per-rung measurement ------------------------------------------------------------------

@pytest.mark.parametrize("phi", [0.0, 0.43, 0.8])
def test_lag1_autocorrelation_of_an_ar1_rung_within_its_error_bar(phi):
    """One rung, one replica: the energy is an AR(1) series, so the lag-1 autocorrelation is
    phi, its error Bartlett's sqrt((1 - phi^2) / n), and tau_int = (1 + phi) / (1 - phi)."""
    n = 20_000
    x = 40.0 + 3.0 * ar1(phi, n, seed=7)
    le = local_exploration(x[:, None], np.zeros((n, 1), np.int64), restarts=0, round_trips=0,
                           gradients=1e6)
    assert abs(le.rho1[0] - phi) < 3 * le.rho1_err[0]
    assert le.rho1_err[0] == pytest.approx(math.sqrt((1 - phi ** 2) / n), rel=0.15)
    assert le.efficiency[0] == pytest.approx(min(1.0, (1 - le.rho1[0]) / (1 + le.rho1[0])))
    tau = (1 + phi) / (1 - phi)
    assert le.tau[0] == pytest.approx(tau, rel=0.15)


def test_lag1_pairs_follow_the_replicas_through_swaps():
    """Two slots, replicas swapping every other iteration. Moves first (deo): the moves at
    slot k in iteration t+1 act on the replica that sat at k after t, and its new energy is
    read at the slot it holds after t+1. Swaps first (even-odd): the replica at k after t+1
    brought the energy it had after t."""
    e = np.array([[1.0, 10.0], [2.0, 20.0], [30.0, 3.0], [4.0, 40.0]])
    r = np.array([[0, 1], [0, 1], [1, 0], [1, 0]])
    rung, before, after = lag1_pairs(e, r)
    # t=0 -> 1: no swap: (slot 0: 1 -> 2), (slot 1: 10 -> 20)
    # t=1 -> 2: swap: replica 0 from slot 0 ends at slot 1 with 3; replica 1 ends at 0 with 30
    # t=2 -> 3: no swap: replica 1 at slot 0: 30 -> 4; replica 0 at slot 1: 3 -> 40
    assert rung.tolist() == [0, 1, 0, 1, 0, 1]
    assert before.tolist() == [1, 10, 2, 20, 30, 3]
    assert after.tolist() == [2, 20, 3, 30, 4, 40]
    rung, before, after = lag1_pairs(e, r, swaps_first=True)
    # t+1 = 2: replica 1 sits at slot 0 (it had 20 at slot 1), replica 0 at slot 1 (had 2)
    assert before.tolist() == [1, 10, 20, 2, 30, 3]
    assert after.tolist() == [2, 20, 30, 3, 4, 40]


def test_passages_per_million_gradients_on_a_hand_made_index_process():
    """Three slots, the last the prior rung (no gradients). Replica 0 goes cold -> hot -> cold
    twice (2 restarts, 2 round trips); replica 1 once after its first cold visit (1, 1);
    replica 2 starts hot and reaches the cold end once (a restart, no round trip: a trip
    starts at the cold end). L = 10 steps, 2 trajectories at each of the 2 sampled rungs: 40
    gradients per iteration, 400 in all."""
    path = [[0, 1, 2], [1, 0, 2], [1, 2, 0], [2, 1, 0], [2, 0, 1], [0, 2, 1],
            [1, 2, 0], [2, 1, 0], [2, 0, 1], [0, 2, 1]]
    r = np.array(path)
    p = replica_passages(r)
    assert p.restarts.tolist() == [2, 1, 1] and p.round_trips.tolist() == [2, 1, 0]
    g = gradients_per_iteration({"n_leapfrog": 10}, 2, [1.0, 2.0, math.inf])
    assert g == 40.0
    # with n_leapfrog_jitter = 0.5 a trajectory runs 5..10 steps: 7.5 on average
    assert gradients_per_iteration({"n_leapfrog": 10, "n_leapfrog_jitter": 0.5}, [2, 2, 9],
                                   [1.0, 2.0, math.inf]) == 30.0
    assert math.isnan(gradients_per_iteration({"step_size": 0.1}, 1, [1.0]))
    e = np.random.default_rng(0).normal(size=r.shape)
    le = local_exploration(e, r, restarts=int(p.restarts.sum()),
                           round_trips=int(p.round_trips.sum()), gradients=len(r) * g)
    assert le.restarts_per_mgrad == pytest.approx(4 / 400 * 1e6)
    assert le.round_trips_per_mgrad == pytest.approx(3 / 400 * 1e6)


# --- the verdict --------------------------------------------------------------------------------

def _trace(replica: np.ndarray, energy: np.ndarray, accepted: np.ndarray) -> dict:
    n, k = replica.shape
    return {"iteration": np.arange(1, n + 1), "replica_k": replica, "energy_k": energy,
            "n_accepted_k": accepted, "swap_attempted_k": np.ones((n, k - 1), np.int64),
            "swap_accepted_k": np.ones((n, k - 1), np.int64)}


def _travelling(n: int) -> np.ndarray:
    """Two slots whose replicas swap every iteration: a restart per iteration."""
    return np.array([[0, 1], [1, 0]] * (n // 2))


def test_the_verdict_refuses_a_run_whose_passages_all_fall_in_the_discard():
    n, start = 2000, 1000
    replica = _travelling(n)
    replica[start - 1:] = replica[start - 1]          # frozen in place from the discard on
    rng = np.random.default_rng(3)
    energy = rng.normal(size=(n, 2)) + [0.0, 5.0]
    accepted = np.ones((n, 2), np.int64)
    assert replica_passages(replica).restarts.sum() > 10 * MIN_RESTARTS   # whole trace
    m = assess(_trace(replica, energy, accepted), [1.0, 2.0], n_trajectories=2, start=start)
    assert m.passages.restarts.sum() == 0
    assert not m.verdict.mixed and m.verdict.reasons == ["0 restarts"]
    # the same trace counted over its production part with passages there: mixed
    moving = assess(_trace(_travelling(n), energy, accepted), [1.0, 2.0], n_trajectories=2,
                    start=start)
    assert moving.verdict.mixed, moving.verdict


def test_the_verdict_refuses_a_run_with_a_stuck_rung():
    """Rung 1's local moves are stuck: its energy drifts (a random walk, nothing renews it)
    and it accepts almost nothing. Passages alone would pass."""
    n = 2000
    rng = np.random.default_rng(5)
    energy = rng.normal(size=(n, 3)) + [0.0, 5.0, 10.0]
    energy[:, 1] = 5.0 + np.cumsum(rng.normal(size=n)) * 0.1
    accepted = np.ones((n, 3), np.int64)
    accepted[:, 1] = (np.arange(n) % 50 == 0)          # 1 in 100 trajectories: < 0.05
    replica = np.array([[0, 1, 2], [1, 0, 2], [1, 2, 0], [2, 1, 0], [2, 0, 1], [0, 2, 1]]
                       * (n // 6 + 1))[:n]
    m = assess(_trace(replica, energy, accepted), [1.0, 2.0, 4.0], n_trajectories=2, start=400)
    assert m.passages.restarts.sum() >= MIN_RESTARTS
    assert not m.verdict.mixed
    assert "rung 1 accepts 0.01" in m.verdict.reasons
    assert any(r.startswith("split R-hat") for r in m.verdict.reasons)
    assert any(r.startswith("bulk ESS") for r in m.verdict.reasons)


def test_the_restart_minimum_is_read_from_the_run_config(tmp_path):
    from thermonet import config as cfgmod

    path = tmp_path / "c.toml"
    path.write_text('[run]\nmin_restarts = 40\nmin_ess = 50\n[data]\nname = "none"\n'
                    '[architecture]\nname = "gaussian"\n')
    cfg = cfgmod.load(path)
    assert cfg["run"]["min_restarts"] == 40 and cfg["run"]["min_ess"] == 50
    path.write_text('[run]\nmin_restarts = -1\n[data]\nname = "none"\n'
                    '[architecture]\nname = "gaussian"\n')
    with pytest.raises(ConfigError, match="min_restarts"):
        cfgmod.load(path)
    assert not verdict([1.0, 2.0], restarts=39, round_trips=3, min_restarts=40).mixed


# --- integration over beta with the end correction ----------------------------------------------

def test_end_corrected_integration_over_beta_on_gaussians():
    """E = |w|^2 / 2 in D dimensions under a N(0, s0^2) prior: log Z(beta) = -D/2 log(1 +
    beta s0^2), and the rung's energies are exact draws. The end-corrected rule beats the
    trapezoid by far, and its quadrature error estimate bounds its true error."""
    d, s0 = 10, 10.0
    beta = np.r_[np.geomspace(1.0, 1e-3, 12), 0.0]
    rng = np.random.default_rng(0)
    n = 40_000
    e = np.empty((n, beta.size))
    for j, b in enumerate(beta):
        w = rng.normal(scale=s0 / math.sqrt(1 + b * s0 ** 2), size=(n, d))
        e[:, j] = 0.5 * (w ** 2).sum(axis=1)
    fe = free_energies(beta, e)
    exact = -d / 2 * np.log1p(beta * s0 ** 2)
    stat = fe.log_z_ti_err_k[0]
    err_plain = abs(fe.log_z_ti_k[0] - exact[0])
    err_corr = abs(fe.log_z_tic_k[0] - exact[0])
    assert err_plain > 20 * stat                   # the trapezoid's bias is far outside noise
    assert err_corr < err_plain / 5
    assert err_corr <= fe.log_z_ti_quad_k[0] + 3 * stat
    assert err_plain <= 1.2 * fe.log_z_ti_quad_k[0]
    # every rung: the bound holds along the ladder
    tail = np.abs(fe.log_z_tic_k - exact) <= fe.log_z_ti_quad_k + 3 * fe.log_z_ti_err_k + 1e-12
    assert tail.all()


# --- between-run consistency --------------------------------------------------------------------

def test_t_interval_and_chi2_on_known_numbers():
    """Four runs 1, 2, 3, 4: mean 2.5, sd sqrt(5/3), t_{3, 0.975} = 3.182446305284263
    (tables), so the half-width is 3.1824463 * 1.2909944 / 2."""
    c = consistency([1.0, 2.0, 3.0, 4.0], [1.0, 1.0, 1.0, 1.0])
    half = 3.182446305284263 * math.sqrt(5 / 3) / 2
    assert c.mean == 2.5 and c.sd == pytest.approx(math.sqrt(5 / 3))
    assert (c.low, c.high) == pytest.approx((2.5 - half, 2.5 + half), rel=1e-9)
    # chi2 = sum (x - 2.5)^2 = 5 on 3 dof: P(chi2_3 > 5) = 0.17179714429673354
    assert c.chi2 == pytest.approx(5.0) and c.p_value == pytest.approx(0.17179714429673354)
    assert c.agree
    # the same spread with error bars 2.8x too small: chi2 = 5 * 2.8^2 = 39.2, refused
    tight = consistency([1.0, 2.0, 3.0, 4.0], [1 / 2.8] * 4)
    assert not tight.agree and tight.error_scale == pytest.approx(2.8 * math.sqrt(5 / 3))
    assert "do NOT agree" in tight.describe()
    with pytest.raises(ConfigError, match="two or more"):
        consistency([1.0], [0.1])
    with pytest.raises(ConfigError, match="positive finite"):
        consistency([1.0, 2.0], [0.1, 0.0])


def test_t_interval_matches_scipy():
    from scipy import stats

    x = np.array([-98.94, -98.81, -98.87, -99.02, -98.90, -98.77])
    c = consistency(x, np.full(6, 0.1))
    lo, hi = stats.t.interval(0.95, 5, loc=x.mean(), scale=stats.sem(x))
    assert (c.low, c.high) == pytest.approx((lo, hi), rel=1e-12)


# --- the figure ---------------------------------------------------------------------------------

def test_plot_exploration_draws_each_rungs_autocorrelation(tmp_path):
    """A synthetic run: two slots swapping every iteration; the figure's points are the
    measurement's rho1, the title the gradients' line (unknown for this sampler)."""
    from thermonet.io import checkpoint as ckpt
    from thermonet.io import trace as iotrace
    from thermonet.plotting import plot

    n, k = 200, 2
    replica = _travelling(n)
    energy = np.stack([ar1(0.5, n, 1), ar1(0.5, n, 2) + 3.0], axis=1)
    rows = {"iteration": list(range(1, n + 1)), "energy_k": list(energy),
            "n_accepted_k": [np.ones(k, int)] * n, "n_divergent_k": [np.zeros(k, int)] * n,
            "step_size_k": [np.full(k, 0.1)] * n, "swap_attempted_k": [np.ones(1, int)] * n,
            "swap_accepted_k": [np.ones(1, int)] * n, "replica_k": list(replica)}
    iotrace.write_segment(tmp_path, "u0", rows, [])
    toml = ('[run]\nn_iterations = 200\ndiscard = 0.0\n[data]\nname = "none"\n'
            '[architecture]\nname = "gaussian"\n[ladder]\nn_trajectories = 1\n'
            'swap_scheme = "deo"\n')
    ckpt.write_checkpoint(tmp_path, ckpt.Checkpoint(
        iteration=n, run_uuid="u0", config_toml=toml, config_sources={}, plugins={},
        rng_states=[], slots={"step_size": np.full(k, 0.1)}, replica_k=replica[-1],
        temperatures=np.array([1.0, 2.0]), counters={"elapsed_s": 1.0}))
    fig = plot("exploration", tmp_path, tmp_path / "x.png")
    assert (tmp_path / "x.png").read_bytes()[:4] == b"\x89PNG"
    le = local_exploration(energy, replica, restarts=0, round_trips=0, gradients=math.nan)
    ax = fig.axes[0]
    points = ax.lines[0].get_ydata()
    assert np.allclose(points, le.rho1)
    assert "gradients unknown" in fig.axes[0].get_title()


def _evidence_run(d, seed: int, shift: float) -> None:
    """A synthetic run on [1, 2, inf] whose energies are N(mean_k + shift, 1) draws."""
    from thermonet.io import checkpoint as ckpt
    from thermonet.io import trace as iotrace

    n, k = 400, 3
    rng = np.random.default_rng(seed)
    energy = rng.normal(size=(n, k)) + np.array([1.0, 2.0, 4.0]) + shift
    replica = np.array([[0, 1, 2], [1, 0, 2], [1, 2, 0], [2, 1, 0], [2, 0, 1], [0, 2, 1]]
                       * (n // 6 + 1))[:n]
    rows = {"iteration": list(range(1, n + 1)), "energy_k": list(energy),
            "n_accepted_k": [np.ones(k, int)] * n, "n_divergent_k": [np.zeros(k, int)] * n,
            "step_size_k": [np.full(k, 0.1)] * n, "swap_attempted_k": [np.ones(2, int)] * n,
            "swap_accepted_k": [np.ones(2, int)] * n, "replica_k": list(replica)}
    d.mkdir()
    iotrace.write_segment(d, f"u{seed}", rows, [])
    toml = (f'[run]\nseed = {seed}\nn_iterations = {n}\nmin_ess = 0\n[data]\nname = "none"\n'
            '[architecture]\nname = "gaussian"\n[ladder]\nn_trajectories = 1\n'
            'prior_rung = true\nswap_scheme = "deo"\n')
    ckpt.write_checkpoint(d, ckpt.Checkpoint(
        iteration=n, run_uuid=f"u{seed}", config_toml=toml, config_sources={}, plugins={},
        rng_states=[], slots={"step_size": np.full(k, 0.1)}, replica_k=replica[-1],
        temperatures=np.array([1.0, 2.0, np.inf]), counters={"elapsed_s": 1.0}))


def test_compare_refuses_runs_whose_log_evidence_scatter_beyond_their_error_bars(tmp_path):
    """Runs of one distribution agree on log Z within their error bars; a third whose
    energies sit 1 higher everywhere gives a log Z about 1 lower (d log Z / d beta = -<E>),
    tens of its error bars away: compare says they do not agree, and not mixed."""
    from thermonet.analysis.compare import compare_runs
    from thermonet.analysis.model_evidence import run_log_evidence

    for seed, shift in ((1, 0.0), (2, 0.0), (3, 0.0), (4, 1.0)):
        _evidence_run(tmp_path / f"r{seed}", seed, shift)
    same = compare_runs([tmp_path / f"r{s}" for s in (1, 2, 3)])
    ev = same["log_evidence"]
    each = [run_log_evidence(tmp_path / f"r{s}") for s in (1, 2, 3)]
    assert ev["runs"] == [e.log_z_ss for e in each]
    assert ev["agree"], ev["text"]
    assert not any("disagree" in r for r in same["verdict"]["reasons"])
    odd = compare_runs([tmp_path / f"r{s}" for s in (1, 2, 4)])
    assert odd["log_evidence"]["agree"] is False
    assert odd["log_evidence"]["error_scale"] > 3
    assert not odd["verdict"]["mixed"]
    assert any(r.startswith("log Z of the runs disagree") for r in odd["verdict"]["reasons"])
