"""Analysis of runs: error bars on AR(1) series with known answers, heat capacity, round trips,
swap acceptance, the stopping rule, the Bayesian predictive against NumPy, and `thermonet
analyse` end to end on a small real run."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from types import SimpleNamespace

import h5py
import numpy as np
import pytest
from click.testing import CliRunner

from tests import reference as ref
from thermonet.analysis import (
    PAIR_COLUMNS,
    TABLE_COLUMNS,
    analyse,
    evaluate_samples,
    heat_capacity,
    read_analysis,
    round_trips,
    round_trips_per_replica,
    series_stats,
    stopping_rule,
    summarise,
    swap_table,
)
from thermonet.cli import main
from thermonet.errors import CheckpointError, ConfigError
from thermonet.io import checkpoint as ckpt
from thermonet.io import trace as iotrace


def ar1(rng: np.random.Generator, n: int, mean: float, var: float, phi: float) -> np.ndarray:
    """Stationary Gaussian AR(1): x_t = mean + phi (x_{t-1} - mean) + eps, Var(x) = var."""
    s = math.sqrt(var * (1 - phi * phi))
    eps = rng.normal(0.0, s, n)
    x = np.empty(n)
    x[0] = rng.normal(0.0, math.sqrt(var))
    for t in range(1, n):
        x[t] = phi * x[t - 1] + eps[t]
    return x + mean


def ar1_se(var: float, phi: float, n: int) -> float:
    """Analytic standard error of the mean: sqrt(sigma^2 (1 + phi) / (n (1 - phi)))."""
    return math.sqrt(var * (1 + phi) / (n * (1 - phi)))


# --- error bars and heat capacity on AR(1) series ----------------------------------------------

@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("phi", [0.0, 0.5, 0.9])
def test_series_stats_ar1(seed, phi):
    n, mean, var = 40_000, 3.0, 2.0
    x = ar1(np.random.default_rng(seed), n, mean, var, phi)
    m, err, tau = series_stats(x)
    assert abs(m - mean) < 4 * err
    assert err == pytest.approx(ar1_se(var, phi, n), rel=0.2)
    assert tau == pytest.approx((1 + phi) / (1 - phi), rel=0.2)


def test_series_stats_error_bar_is_calibrated():
    # over many independent short AR(1) chains the reported errors match the spread of means
    phi, var, n = 0.8, 1.0, 4000
    rng = np.random.default_rng(7)
    means, errs = [], []
    for _ in range(60):
        m, e, _ = series_stats(ar1(rng, n, 0.0, var, phi))
        means.append(m)
        errs.append(e)
    spread = np.std(means, ddof=1)
    # the std of 60 values has a relative uncertainty of ~1/sqrt(2*59) = 9%
    assert np.mean(errs) == pytest.approx(spread, rel=0.3)
    assert np.mean(errs) == pytest.approx(ar1_se(var, phi, n), rel=0.15)


def test_series_stats_degenerate():
    assert all(math.isnan(v) for v in series_stats([]))
    m, e, t = series_stats([2.5])
    assert m == 2.5 and math.isnan(e) and math.isnan(t)
    m, e, t = series_stats(np.full(100, 4.0))
    assert m == 4.0 and e == 0.0 and t == 1.0


@pytest.mark.parametrize("seed", [11, 12])
def test_heat_capacity_ar1(seed):
    n, var, phi, temp = 40_000, 3.0, 0.7, 1.7
    e = ar1(np.random.default_rng(seed), n, -5.0, var, phi)
    c, err = heat_capacity(e, temp)
    assert c == pytest.approx(np.var(e, ddof=1) / temp**2, rel=1e-12)
    assert abs(c - var / temp**2) < 4 * err
    # Var of the sample variance of a Gaussian AR(1): 2 sigma^4 (1 + phi^2) / (n (1 - phi^2))
    exact = math.sqrt(2 * var**2 * (1 + phi**2) / (n * (1 - phi**2))) / temp**2
    assert err == pytest.approx(exact, rel=0.25)


def test_heat_capacity_of_chains_is_pooled_with_each_chains_own_error_bar():
    """Four planted AR(1) chains of one temperature: C from the pooled variance about the
    pooled mean, its error from each chain's own autocorrelation-aware error of its squared
    deviations (no autocorrelation across a chain's end and the next one's start), combined
    as the error of the mean of the chains' means; computed here independently."""
    n, n_c, var, phi, temp = 3000, 4, 3.0, 0.9, 1.7
    rng = np.random.default_rng(21)
    e = np.stack([ar1(rng, n, -5.0 + 0.3 * j, var, phi) for j in range(n_c)], axis=1)
    c, err = heat_capacity(e, temp)
    want_c, want_err, p = ref.heat_capacity_of_chains(e, temp)
    assert p > 0.05                                    # the chains agree: no scale factor
    assert c == pytest.approx(np.var(e.ravel(), ddof=1) / temp**2, rel=1e-12)
    assert c == pytest.approx(want_c, rel=1e-12)
    assert err == pytest.approx(want_err, rel=1e-9)
    # the chains joined end to end measure a spurious autocorrelation at the joins
    joined = heat_capacity(np.concatenate([e[:, j] for j in range(n_c)]), temp)
    assert joined[0] == pytest.approx(c, rel=1e-12)
    assert abs(joined[1] / err - 1) > 5e-3
    # the chains' order does not matter; one column is the single-series estimate
    assert heat_capacity(e[:, ::-1], temp)[1] == pytest.approx(err, rel=1e-12)
    assert heat_capacity(e[:, :1], temp) == heat_capacity(e[:, 0], temp)


def test_a_stuck_chain_widens_the_heat_capacity_error_to_the_spread_between_chains():
    """One of four chains planted at a wider energy distribution (a chain stuck elsewhere):
    the chains' means of (E - <E>)^2 disagree far beyond their errors, and the error bar
    grows by sqrt(chi2 / (C - 1)) to cover the spread between them."""
    n, n_c, phi, temp = 2000, 4, 0.5, 1.0
    rng = np.random.default_rng(23)
    e = np.stack([ar1(rng, n, 0.0, 9.0 if j == 2 else 1.0, phi) for j in range(n_c)], axis=1)
    c, err = heat_capacity(e, temp)
    want_c, want_err, p = ref.heat_capacity_of_chains(e, temp)
    assert p < 1e-6
    assert (c, err) == (pytest.approx(want_c, rel=1e-12), pytest.approx(want_err, rel=1e-9))
    d = (e - e.mean()) ** 2
    between = np.std(d.mean(axis=0), ddof=1) / math.sqrt(n_c)          # about 2
    assert err > 0.5 * between > 10 * heat_capacity(e[:, :2], temp)[1]


def test_heat_capacity_error_of_chains_matches_the_ar1_variance():
    # Var of the sample variance of N Gaussian AR(1) draws: 2 sigma^4 (1 + phi^2) / (N (1 - phi^2))
    n, n_c, var, phi, temp = 10_000, 4, 2.0, 0.6, 0.8
    rng = np.random.default_rng(22)
    e = np.stack([ar1(rng, n, 1.0, var, phi) for _ in range(n_c)], axis=1)
    c, err = heat_capacity(e, temp)
    exact = math.sqrt(2 * var**2 * (1 + phi**2) / (n * n_c * (1 - phi**2))) / temp**2
    # the error bar is itself an estimate: through tau_int (Sokal's window M ~ 10 here) its
    # relative uncertainty is about sqrt(2 (2M + 1) / n) / 2 ~ 0.03 per chain; 0.25 is a bound
    # several times that, as in test_heat_capacity_ar1
    assert err == pytest.approx(exact, rel=0.25)
    assert abs(c - var / temp**2) < 4 * err


# --- round trips and swaps ---------------------------------------------------------------------

def replicas_from_positions(pos_tr: list[list[int]]) -> np.ndarray:
    """replica_k (which replica at each slot) from the slot of each replica."""
    pos = np.asarray(pos_tr)
    out = np.empty_like(pos)
    for t in range(pos.shape[0]):
        out[t, pos[t]] = np.arange(pos.shape[1])
    return out


def test_round_trips_two_slots():
    # replica 0 positions 0,1,0,1,1,0: two trips; replica 1: 1,0,1,0,0,1: starts at the top,
    # so its first trip starts at t=1 and ends at t=3 (one trip)
    r = replicas_from_positions([[0, 1], [1, 0], [0, 1], [1, 0], [1, 0], [0, 1]])
    assert round_trips_per_replica(r).tolist() == [2, 1]
    assert round_trips(r) == 3


def test_round_trips_three_slots():
    # replica 0: 0,1,2,1,0 (one trip); replica 1 never reaches the top; replica 2 never the
    # bottom; then replica 1 goes 0 -> 2 and replica 0 2 -> 0 without having been at the top
    pos = [[0, 1, 2], [1, 0, 2], [2, 0, 1], [1, 0, 2], [0, 1, 2],
           [1, 0, 2], [1, 2, 0], [0, 2, 1], [2, 0, 1]]
    r = replicas_from_positions(pos)
    # replica 0: 0,1,2,1,0,1,1,0,2 -> 1 trip; replica 1: 1,0,0,0,1,0,2,2,0 -> 1 trip (0..2..0);
    # replica 2: 2,2,1,2,2,2,0,1,1 -> 0 trips (its first bottom visit is at t=6)
    assert round_trips_per_replica(r).tolist() == [1, 1, 0]
    assert round_trips(r) == 2
    assert round_trips(r[:5]) == 1
    assert round_trips(np.zeros((0, 3), dtype=int)) == 0
    assert round_trips(np.zeros((5, 1), dtype=int)) == 0


def test_swap_table():
    temps = [0.5, 1.0, 2.0, 4.0]
    att = np.array([[1, 0, 2], [1, 1, 0], [0, 1, 0], [2, 0, 0]])
    acc = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 0], [1, 0, 0]])
    t = swap_table(temps, att, acc)
    assert t["t_low"].tolist() == [0.5, 1.0, 2.0]
    assert t["t_high"].tolist() == [1.0, 2.0, 4.0]
    assert t["swap_attempts"].tolist() == [4, 2, 2]
    assert t["swap_accepted"].tolist() == [2, 1, 0]
    assert t["swap_acceptance"].tolist() == [0.5, 0.5, 0.0]
    t = swap_table(temps, np.zeros((3, 3), int), np.zeros((3, 3), int))
    assert np.all(np.isnan(t["swap_acceptance"]))
    t = swap_table([1.0], np.zeros((5, 0), int), np.zeros((5, 0), int))
    assert all(v.shape == (0,) for v in t.values())


# --- the stopping rule -------------------------------------------------------------------------

def test_stopping_rule_hand_made_curve():
    temps = np.arange(1.0, 9.0)
    v = np.array([0.7, 0.6, 0.47, 0.45, 0.5, 0.6, 0.8, 0.9])
    # no error bars: any rise stops cooling; 0.47 at T=3 is above 0.45 at T=4
    r = stopping_rule(temps, v, n_sigma=0.0, patience=1)
    assert (r["temperature"], r["value"], r["index"], r["stopped_at"]) == (4.0, 0.45, 3.0, 3.0)
    # with error bars of 0.02 and 2 sigma (0.057), 0.47 is noise; 0.6 at T=2 is a rise
    r = stopping_rule(temps, v, np.full(8, 0.02), n_sigma=2.0, patience=1)
    assert (r["temperature"], r["stopped_at"]) == (4.0, 2.0)
    # three rises in a row below the minimum at T = 4 (T = 3, 2, 1), then the end of the
    # ladder: patience 2 and 3 stop at the first of them, patience 4 never stops
    for patience in (2, 3):
        r = stopping_rule(temps, v, n_sigma=0.0, patience=patience)
        assert (r["temperature"], r["stopped_at"]) == (4.0, 3.0)
    r = stopping_rule(temps, v, n_sigma=0.0, patience=4)
    assert r["temperature"] == 4.0 and math.isnan(r["stopped_at"])


def test_stopping_rule_patience_ignores_an_isolated_fluctuation():
    # hot to cold: a plateau with one high point at T = 8, then a real minimum and a rise
    temps = np.arange(1.0, 11.0)
    v = np.array([0.60, 0.55, 0.50, 0.30, 0.20, 0.45, 0.50, 0.80, 0.50, 0.50])
    r1 = stopping_rule(temps, v, n_sigma=0.0, patience=1)
    assert r1["stopped_at"] == 8.0 and r1["temperature"] == 10.0     # fooled by the spike
    r3 = stopping_rule(temps, v, n_sigma=0.0, patience=3)
    # the spike is followed by 0.50 (not above the running minimum 0.50): the count restarts;
    # the real rise below T = 5 (0.30, 0.50, 0.55) stops it, first detected at T = 4
    assert r3["temperature"] == 5.0 and r3["stopped_at"] == 4.0
    with pytest.raises(ConfigError):
        stopping_rule(temps, v, patience=0)


def test_stopping_rule_is_not_the_global_minimum():
    temps = np.array([0.1, 0.3, 1.0, 3.0, 10.0])
    v = np.array([0.1, 0.3, 0.5, 0.4, 0.9])
    r = stopping_rule(temps, v, patience=1)
    assert r["temperature"] == 3.0 and r["stopped_at"] == 1.0


def test_stopping_rule_monotone_and_nan():
    temps = np.array([0.1, 0.3, 1.0, 3.0])
    r = stopping_rule(temps, np.array([0.1, 0.2, np.nan, 0.4]))
    assert r["temperature"] == 0.1 and math.isnan(r["stopped_at"])
    r = stopping_rule(temps, np.full(4, np.nan))
    assert math.isnan(r["temperature"]) and math.isnan(r["index"])


# --- the Bayesian predictive against NumPy -------------------------------------------------------

def test_predictive_is_the_average_of_softmaxes():
    from thermonet.evaluation import classification_error
    from thermonet.registry import get_architecture

    arch = get_architecture("mlp", n_inputs=4, hidden=[3], n_outputs=3)
    rng = np.random.default_rng(5)
    widths = [4, 3, 3]
    train = SimpleNamespace(x=rng.normal(size=(7, 4)), y=rng.integers(0, 3, 7))
    test = SimpleNamespace(x=rng.normal(size=(40, 4)), y=rng.integers(0, 3, 40))
    theta = 3.0 * rng.normal(size=(6, arch.n_params))
    ev = evaluate_samples(arch, theta, train=train, test=test)

    z = np.stack([ref.logits(th, widths, test.x) for th in theta])       # (S, N, C)
    p = np.exp(z - z.max(axis=2, keepdims=True))
    p /= p.sum(axis=2, keepdims=True)
    pbar = p.mean(axis=0)
    rows = np.arange(40)
    assert ev.predictive_test_energy == pytest.approx(-np.sum(np.log(pbar[rows, test.y])),
                                                      rel=1e-12)
    assert ev.predictive_test_error == np.mean(pbar.argmax(axis=1) != test.y)
    # not the softmax of the averaged logits
    zbar = z.mean(axis=0)
    q = np.exp(zbar - zbar.max(axis=1, keepdims=True))
    q /= q.sum(axis=1, keepdims=True)
    assert abs(-np.sum(np.log(q[rows, test.y])) - ev.predictive_test_energy) > 1.0
    # per-sample numbers: energies as the NumPy reference, errors as tn.evaluate's
    for s, th in enumerate(theta):
        assert ev.test_energy[s] == pytest.approx(ref.energy(th, widths, test.x, test.y),
                                                  rel=1e-12)
        assert ev.test_error[s] == classification_error(arch, th, test.x, test.y)
        assert ev.train_error[s] == classification_error(arch, th, train.x, train.y)
    # threads change nothing
    ev2 = evaluate_samples(arch, theta, train=train, test=test, workers=3)
    for a, b in zip(ev, ev2, strict=True):
        assert np.array_equal(a, b)


def test_predictive_of_one_sample_is_that_sample():
    from thermonet.registry import get_architecture

    arch = get_architecture("mlp", n_inputs=4, hidden=[3], n_outputs=3)
    rng = np.random.default_rng(6)
    test = SimpleNamespace(x=rng.normal(size=(30, 4)), y=rng.integers(0, 3, 30))
    theta = rng.normal(size=(1, arch.n_params))
    ev = evaluate_samples(arch, theta, test=test)
    assert ev.predictive_test_energy == pytest.approx(ev.test_energy[0], rel=1e-12)
    assert ev.predictive_test_error == ev.test_error[0]
    assert np.isnan(ev.train_error).all()


# --- a synthetic run directory through the real checkpoint writers ------------------------------

SYNTH_TOML = """
[run]
seed = 0
n_iterations = {n}
sample_every = 100
discard = 0.0
[data]
name = "none"
[architecture]
name = "gaussian"
[sampler]
name = "hmc"
[ladder]
n_trajectories = 2
"""


@pytest.fixture(scope="module")
def synthetic_run(tmp_path_factory):
    """A fake 3-temperature run: AR(1) energies with known mean, variance and phi, known
    acceptance, step sizes, swaps and replica paths, written with thermonet.checkpoint."""
    d = tmp_path_factory.mktemp("synth")
    temps = np.array([0.5, 1.0, 2.0])
    spec = [(-10.0, 1.0, 0.5), (-6.0, 2.0, 0.8), (0.0, 4.0, 0.9)]   # mean, var, phi per slot
    n, seg = 20_000, 5000
    rng = np.random.default_rng(42)
    energy = np.stack([ar1(rng, n, *s) for s in spec], axis=1)
    accepted = rng.integers(0, 3, size=(n, 3))
    step = np.tile([0.01, 0.02, 0.04], (n, 1)) * (1 + 0.1 * rng.random((n, 3)))
    attempted = rng.integers(0, 2, size=(n, 2))
    swapped = attempted * (rng.random((n, 2)) < [0.5, 0.02])
    # replicas: two complete trips of replica 0 and one of replica 2 (hand-built below)
    pos = np.tile([0, 1, 2], (n, 1))
    pos[100:200] = [1, 0, 2]
    pos[200:300] = [2, 0, 1]      # replica 0 at the top
    pos[300:400] = [1, 0, 2]
    pos[400:500] = [0, 1, 2]      # back at the bottom: trip 1
    pos[500:600] = [2, 1, 0]      # replica 0 top, replica 2 bottom
    pos[600:700] = [0, 1, 2]      # replica 0 bottom: trip 2; replica 2 top
    pos[700:800] = [1, 2, 0]      # replica 2 bottom: its trip 1
    replica = replicas_from_positions(pos)
    uuid = "synthetic-run"
    p = 3
    samples_every = 100
    for lo in range(0, n, seg):
        hi = lo + seg
        its = list(range(lo + 1, hi + 1))
        rows = {"iteration": its, "energy_k": list(energy[lo:hi]),
                "n_accepted_k": list(accepted[lo:hi]), "n_divergent_k": list(accepted[lo:hi] * 0),
                "step_size_k": list(step[lo:hi]), "swap_attempted_k": list(attempted[lo:hi]),
                "swap_accepted_k": list(swapped[lo:hi]), "replica_k": list(replica[lo:hi])}
        samples = [(i, np.full((3, p), float(i))) for i in its if i % samples_every == 0]
        iotrace.write_segment(d, uuid, rows, samples)
    ck = ckpt.Checkpoint(iteration=n, run_uuid=uuid, config_toml=SYNTH_TOML.format(n=n),
                         config_sources={}, plugins={}, rng_states=[],
                         slots={"theta": np.zeros((3, p)), "energy": energy[-1],
                                "step_size": step[-1]},
                         replica_k=replica[-1], temperatures=temps, counters={})
    ckpt.write_checkpoint(d, ck)
    truth = {"temps": temps, "spec": spec, "n": n, "energy": energy, "accepted": accepted,
             "step": step, "attempted": attempted, "swapped": swapped, "replica": replica}
    return d, truth


def test_analyse_synthetic_run(synthetic_run):
    d, tr = synthetic_run
    a = analyse(d)
    t = a.table
    assert list(t) == list(TABLE_COLUMNS)
    assert list(a.pairs) == list(PAIR_COLUMNS)
    assert np.array_equal(a.temperatures, tr["temps"])
    n = tr["n"]
    for k, (mean, var, phi) in enumerate(tr["spec"]):
        assert abs(t["train_energy"][k] - mean) < 4 * t["train_energy_err"][k]
        assert t["train_energy_err"][k] == pytest.approx(ar1_se(var, phi, n), rel=0.25)
        assert t["tau_train_energy"][k] == pytest.approx((1 + phi) / (1 - phi), rel=0.25)
        e = tr["energy"][:, k]
        temp = tr["temps"][k]
        assert t["heat_capacity"][k] == pytest.approx(np.var(e, ddof=1) / temp**2, rel=1e-12)
        assert abs(t["heat_capacity"][k] - var / temp**2) < 4 * t["heat_capacity_err"][k]
    assert np.allclose(t["acceptance"], tr["accepted"].sum(axis=0) / (2 * n), rtol=1e-14)
    assert np.allclose(t["dt"], tr["step"].mean(axis=0), rtol=1e-13)
    assert t["n_samples"].tolist() == [n // 100] * 3
    # no data: per-point, error and test columns are NaN
    for col in ("train_energy_per_point", "test_energy", "train_error", "test_error",
                "predictive_test_error"):
        assert np.isnan(t[col]).all()
    assert a.pairs["swap_attempts"].tolist() == tr["attempted"].sum(axis=0).tolist()
    assert np.array_equal(a.pairs["swap_acceptance"],
                          tr["swapped"].sum(axis=0) / tr["attempted"].sum(axis=0))
    assert a.meta["round_trips_per_replica"] == [2, 0, 1]
    assert a.meta["round_trips"] == 3
    # pair 1-2 accepts 2% of swaps: warned; trips happened: no round-trip warning
    assert any("below 5%" in w and "T = 1-2" in w for w in a.warnings)
    assert not any("round trip" in w for w in a.warnings)
    assert a.references["uninformed_per_point"] == pytest.approx(math.log(10))
    assert math.isnan(a.references["baseline_test_error"])
    # agrees with `thermonet info` where both report the same thing
    s = summarise(d)
    assert s["round_trips"] == a.meta["round_trips"]
    assert np.allclose(s["mean_energy"], t["train_energy"], rtol=1e-13)
    assert np.allclose(s["swap_acceptance"], a.pairs["swap_acceptance"], rtol=1e-14)


def test_analyse_discard(synthetic_run):
    d, tr = synthetic_run
    a = analyse(d, discard=0.5)
    half = tr["n"] // 2
    assert np.allclose(a.table["train_energy"], tr["energy"][half:].mean(axis=0), rtol=1e-13)
    assert a.meta["discarded_iterations"] == half
    assert a.meta["first_iteration_used"] == half + 1
    assert a.table["n_samples"].tolist() == [half // 100] * 3
    assert a.meta["sample_iterations_used"][0] == half + 100
    assert a.pairs["swap_attempts"].tolist() == tr["attempted"][half:].sum(axis=0).tolist()
    with pytest.raises(ConfigError, match="discard"):
        analyse(d, discard=1.0)


def test_analysis_files_round_trip(synthetic_run, tmp_path):
    d, _ = synthetic_run
    a = analyse(d)
    a.to_csv(tmp_path / "a.csv", tmp_path / "p.csv")
    a.to_hdf5(tmp_path / "a.h5")
    rows = np.genfromtxt(tmp_path / "a.csv", delimiter=",", names=True)
    assert list(rows.dtype.names) == list(TABLE_COLUMNS)
    for c in TABLE_COLUMNS:
        assert np.array_equal(rows[c], a.table[c], equal_nan=True)
    pr = np.genfromtxt(tmp_path / "p.csv", delimiter=",", names=True)
    assert np.array_equal(pr["swap_acceptance"], a.pairs["swap_acceptance"])
    b = read_analysis(tmp_path / "a.h5")
    for c in TABLE_COLUMNS:
        assert np.array_equal(b.table[c], a.table[c], equal_nan=True)
    assert b.meta["round_trips_per_replica"] == a.meta["round_trips_per_replica"]
    assert b.warnings == a.warnings
    assert b.references["uninformed_per_point"] == a.references["uninformed_per_point"]
    assert not list(tmp_path.glob("*.tmp"))


def write_frozen_run(d: Path, temps: list[float], n: int) -> None:
    """A run whose energies never change and whose swaps are all rejected."""
    k = len(temps)
    rows = {"iteration": list(range(1, n + 1)), "energy_k": [np.arange(1.0, k + 1)] * n,
            "n_accepted_k": [np.ones(k, int)] * n, "n_divergent_k": [np.zeros(k, int)] * n,
            "step_size_k": [np.full(k, 0.1)] * n, "swap_attempted_k": [np.ones(k - 1, int)] * n,
            "swap_accepted_k": [np.zeros(k - 1, int)] * n, "replica_k": [np.arange(k)] * n}
    iotrace.write_segment(d, "u", rows, [])
    ckpt.write_checkpoint(d, ckpt.Checkpoint(
        iteration=n, run_uuid="u", config_toml=SYNTH_TOML.format(n=n), config_sources={},
        plugins={}, rng_states=[], slots={"step_size": np.full(k, 0.1)},
        replica_k=np.arange(k), temperatures=np.array(temps), counters={}))


def test_no_round_trip_makes_the_verdict_not_mixed(tmp_path):
    write_frozen_run(tmp_path, [1.0, 2.0], 50)
    a = analyse(tmp_path)
    assert a.meta["mixed"] is False
    assert a.meta["verdict"]["reasons"][0] == "0 restarts"
    assert a.meta["verdict"]["text"].startswith("not mixed: 0 restarts")
    assert "no swap accepted across T = 1-2" in a.meta["verdict"]["flags"]
    assert any("0.0%" in w for w in a.warnings)
    assert a.table["heat_capacity"].tolist() == [0.0, 0.0]
    assert a.table["train_energy_err"].tolist() == [0.0, 0.0]


def test_gaussian_prior_warning(tmp_path):
    write_frozen_run(tmp_path, [1.0, 2.0], 10)
    ck = ckpt.read_checkpoint(tmp_path)
    ck.config_toml += "[prior]\ngaussian_std = 1.0\n"
    ckpt.write_checkpoint(tmp_path, ck)
    assert any("Gaussian prior" in w for w in analyse(tmp_path).warnings)


def test_single_chain(tmp_path):
    write_frozen_run(tmp_path, [1.5], 20)
    a = analyse(tmp_path)
    assert a.table["train_energy"].tolist() == [1.0]
    assert a.table["acceptance"].tolist() == [0.5]       # 1 of n_trajectories = 2
    assert all(v.shape == (0,) for v in a.pairs.values())
    assert a.meta["round_trips"] == 0
    assert not any("round trip" in w or "swap" in w for w in a.warnings)


# --- errors ------------------------------------------------------------------------------------

def test_missing_and_corrupt_run_dirs(tmp_path):
    runner = CliRunner()
    res = runner.invoke(main, ["analyse", str(tmp_path / "nope")])
    assert res.exit_code == 1 and "does not exist" in res.output
    assert len(res.output.strip().splitlines()) == 1
    (tmp_path / "empty").mkdir()
    res = runner.invoke(main, ["analyse", str(tmp_path / "empty")])
    assert res.exit_code == 1 and "no checkpoint" in res.output
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "checkpoint.h5").write_bytes(b"not hdf5 at all")
    res = runner.invoke(main, ["analyse", str(tmp_path / "bad")])
    assert res.exit_code == 1 and "corrupt" in res.output
    assert len(res.output.strip().splitlines()) == 1
    with pytest.raises(CheckpointError):
        analyse(tmp_path / "empty")


def test_missing_baseline_fails_before_any_work(synthetic_run, monkeypatch):
    import thermonet.analysis.pipeline as an

    def no_data(*a, **k):
        raise AssertionError("data were loaded before the --baseline path was checked")

    run_dir, _ = synthetic_run
    monkeypatch.setattr(an, "open_run", no_data)
    with pytest.raises(ConfigError, match="does not exist"):
        analyse(run_dir, baseline=run_dir / "no_such_baseline.json")


def test_out_prefix_never_clobbers_the_run(synthetic_run):
    d, _ = synthetic_run
    for prefix in (d / "checkpoint", d / "trace" / "it000000001-000005000"):
        res = CliRunner().invoke(main, ["analyse", str(d), "--out", str(prefix)])
        assert res.exit_code == 1 and "own files" in res.output


# --- end to end on a small real run ---------------------------------------------------------------

RE_SMALL = Path(__file__).resolve().parents[1] / "configs" / "re_small.toml"

#: a small run shrunk: M(1), 4 temperatures, 12 iterations, a sample every 2, official test set
SMALL_RUN = {"architecture.name": "M1", "data.test": "official", "run.n_iterations": 12,
             "run.checkpoint_every": 4, "run.sample_every": 2, "run.discard": 0.25,
             "run.seed": 3, "ladder.n_temperatures": 4, "ladder.n_trajectories": 1,
             "sampler.n_leapfrog": 5, "init.burn_in": [2], "minimiser.max_steps": 60}


def _digest(d: Path) -> dict[str, str]:
    return {str(p.relative_to(d)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(d.rglob("*")) if p.is_file() and not p.name.startswith("analysis")
            and p.name != "thermonet.log"}


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    from thermonet import config as cfgmod
    from thermonet.runner import Run, detach_log

    run_dir = tmp_path_factory.mktemp("small") / "run"
    try:
        Run.create(cfgmod.load(RE_SMALL, SMALL_RUN), run_dir).run(quiet=True)
    finally:
        detach_log()
    return run_dir


def test_analyse_cli_end_to_end(small_run, tmp_path):
    import thermonet as tn
    from thermonet.data import load_data
    from thermonet.registry import get_architecture

    before = _digest(small_run)
    res = CliRunner().invoke(main, ["analyse", str(small_run), "--workers", "2"])
    assert res.exit_code == 0, res.output
    assert _digest(small_run) == before
    for name in ("analysis.csv", "analysis_pairs.csv", "analysis.h5"):
        assert (small_run / name).is_file()
    assert "T_min -> T_max -> T_min" in res.output and "stopping rule" in res.output
    a = read_analysis(small_run / "analysis.h5")
    assert a.meta["n_test"] == 10_000 and a.meta["n_train"] == 50
    # discard 0.25 of 12 iterations: iterations 4..12 used, samples at 4, 6, ..., 12
    assert a.meta["sample_iterations_used"] == [4, 6, 8, 10, 12]
    assert a.table["n_samples"].tolist() == [5] * 4
    # the test columns are the means over the stored samples of tn.evaluate's numbers
    arch, split = get_architecture("M1"), load_data("D50", test="official")
    tr = iotrace.read_trace(small_run, samples=True)
    keep = np.isin(tr["samples_iteration"], [4, 6, 8, 10, 12])
    for k in (0, 3):
        evs = [tn.evaluate(arch, split, th) for th in tr["samples_theta"][keep, k]]
        assert a.table["test_energy_per_point"][k] == pytest.approx(
            np.mean([e["test_energy_per_point"] for e in evs]), rel=1e-12)
        assert a.table["test_error"][k] == pytest.approx(np.mean([e["test_error"] for e in evs]),
                                                         abs=1e-15)
        assert a.table["train_error"][k] == pytest.approx(
            np.mean([e["train_error"] for e in evs]), abs=1e-15)
    assert np.all(np.isfinite(a.table["predictive_test_energy_per_point"]))
    # the predictive averages out sample noise: never worse than the mean of the samples' energies
    assert np.all(a.table["predictive_test_energy_per_point"]
                  <= a.table["test_energy_per_point"] + 1e-12)
    # workers do not change the result
    b = analyse(small_run, workers=1)
    for c in TABLE_COLUMNS:
        assert np.array_equal(a.table[c], b.table[c], equal_nan=True)
    assert b.best == pytest.approx(a.best, nan_ok=True)


def test_analyse_with_baseline(small_run, tmp_path):
    runner = CliRunner()
    base = ["baseline", "--arch", "M1", "--data", "D50", "--test", "official", "--draws", "3",
            "--keep", "2", "--minimiser", "fire", "--set", "max_steps=40"]
    res = runner.invoke(main, ["-q", *base, "--json", "--out", str(tmp_path / "minima.npy")])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    (tmp_path / "baseline.json").write_text(res.stdout)
    a = analyse(small_run, baseline=tmp_path / "baseline.json", predictive=False)
    r = a.references
    assert r["baseline_test_energy_per_point"] == summary["test_energy_per_point_mean"]
    assert r["baseline_test_error"] == summary["test_error_mean"]
    assert r["baseline_n_kept"] == 2
    assert np.isnan(a.table["predictive_test_error"]).all()
    # the saved minima, evaluated here on the run's test set, give the same numbers
    b = analyse(small_run, baseline=tmp_path / "minima.npy", test=False)
    assert b.references["baseline_test_energy_per_point"] == pytest.approx(
        summary["test_energy_per_point_mean"], rel=1e-12)
    assert b.references["baseline_test_error"] == pytest.approx(summary["test_error_mean"],
                                                                abs=1e-15)
    assert b.references["baseline_test_error_err"] == pytest.approx(summary["test_error_sem"],
                                                                    rel=1e-12)
    assert np.isnan(b.table["test_error"]).all() and np.isfinite(b.table["train_error"]).all()
    res = runner.invoke(main, ["analyse", str(small_run), "--no-test", "--baseline",
                               str(tmp_path / "baseline.json"), "--out", str(tmp_path / "x")])
    assert res.exit_code == 0, res.output
    assert "standard optimisation: E_test/N = " in res.output and "(2 minima)" in res.output
    assert (tmp_path / "x.csv").is_file() and (tmp_path / "x_pairs.csv").is_file()
    # a baseline from another test set is flagged
    (tmp_path / "other.json").write_text(json.dumps({**summary, "n_test": 69_950,
                                                     "test_kind": "complement"}))
    c = analyse(small_run, baseline=tmp_path / "other.json", test=False)
    assert any("different test set" in w for w in c.warnings)
    assert not any("different test set" in w for w in a.warnings)
    # a directory holding baseline.json works; garbage gives a one-line error
    assert analyse(small_run, baseline=tmp_path, test=False).references["baseline_n_kept"] == 2
    (tmp_path / "junk.json").write_text("{}")
    res = runner.invoke(main, ["analyse", str(small_run), "--baseline",
                               str(tmp_path / "junk.json")])
    assert res.exit_code == 1 and "thermonet baseline --json" in res.output
    with h5py.File(small_run / "analysis.h5", "r") as fh:
        assert fh.attrs["format"] == "thermonet.analysis"


def test_run_without_samples(tmp_path):
    from thermonet import config as cfgmod
    from thermonet.runner import Run, detach_log

    over = {**SMALL_RUN, "run.n_iterations": 4, "run.sample_every": 0}
    try:
        Run.create(cfgmod.load(RE_SMALL, over), tmp_path / "run").run(quiet=True)
    finally:
        detach_log()
    a = analyse(tmp_path / "run")
    tr = iotrace.read_trace(tmp_path / "run")
    assert np.allclose(a.table["train_energy_per_point"], tr["energy_k"][1:].mean(axis=0) / 50,
                       rtol=1e-13)
    assert np.isnan(a.table["test_error"]).all() and a.table["n_samples"].tolist() == [0] * 4
    assert any("no stored parameter samples" in w for w in a.warnings)
