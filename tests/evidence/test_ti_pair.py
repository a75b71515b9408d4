"""TI in both directions (thermonet.evidence.ti.pair): the second law's bracket on a sweep that
lags, the midpoint's error bar against the scatter of independent runs, the halves against
one-way runs, resume, the exact draw of the reference that starts a reverse sweep, and the
option through ``thermonet evidence``."""

from __future__ import annotations

import dataclasses
import json
import logging
import math

import numpy as np
import pytest
from scipy import stats

from tests.evidence.test_ti import FAST as TI_FAST
from tests.evidence.test_ti import gaussian_box_log_z
from thermonet.errors import ConfigError
from thermonet.evidence import EvidenceResult, bidirectional_ti
from thermonet.evidence.ti.integration import (
    TIConfig,
    fit_reference,
    repeat_ti,
    thermodynamic_integration,
    ti_streams,
)
from thermonet.evidence.ti.pair import (
    REFERENCE_FILE,
    combine,
    reverse_seed,
)
from thermonet.evidence.ti.reference import Reference
from thermonet.priors import BoxPrior
from thermonet.testsystems import Gaussian

FAST = {**TI_FAST, "n_samples": 60}


def _result(value: float, error: float, **details) -> EvidenceResult:
    return EvidenceResult("ti", 1.0, 3, 0.5, value, error, 2.0, details)


# --- the arithmetic ---------------------------------------------------------------------------

def test_combine_gives_the_midpoint_and_the_dissipation_error():
    f = _result(10.0, 0.3, dj_mean=[1.0], lambdas=[0.0])
    r = _result(6.0, 0.4, dj_mean=[2.0])
    c = combine(f, r)
    assert c.log_integral == 8.0
    d = c.details
    assert d["hysteresis"] == 4.0 and d["hysteresis_error"] == pytest.approx(0.5)
    assert d["integral_mc_error"] == pytest.approx(0.25)
    assert d["dissipation_error"] == pytest.approx(math.sqrt(2.0))      # sqrt(H/2)
    assert c.log_integral_error == pytest.approx(math.sqrt(0.25 ** 2 + 2.0))
    assert (d["dj_mean_forward"], d["dj_mean_reverse"]) == ([1.0], [2.0])
    assert not d["hysteresis_inverted"]
    assert (c.log_volume, c.n_params, c.energy0) == (2.0, 3, 0.5)


def test_a_reverse_sweep_above_the_forward_one_is_flagged(caplog):
    """H < 0 adds no dissipation term; beyond three joint errors it contradicts the second law
    and is reported."""
    with caplog.at_level(logging.WARNING):
        c = combine(_result(6.0, 0.3), _result(6.5, 0.4))
    assert not c.details["hysteresis_inverted"] and not caplog.records
    assert c.log_integral_error == pytest.approx(0.25)
    with caplog.at_level(logging.WARNING):
        c = combine(_result(6.0, 0.3), _result(8.0, 0.4))
    assert c.details["hysteresis_inverted"]
    assert "against the second law" in caplog.text


def test_config_rejects_reverse_with_both_and_keeps_old_fingerprints():
    with pytest.raises(ConfigError, match="both_directions"):
        TIConfig(both_directions=True, reverse=True)
    assert "both_directions" not in TIConfig().as_dict()
    assert TIConfig(both_directions=True).as_dict()["both_directions"] is True


# --- the exact start of a reverse sweep -------------------------------------------------------

def test_reference_draw_is_the_truncated_reference():
    """Kolmogorov-Smirnov against the exact marginals: a Gaussian the box cuts off-centre, one
    the box hardly touches, and a uniform direction (fixed seed; p > 0.01)."""
    ref = Reference(np.array([0.8, -0.2, 0.0]), np.array([2.0, 50.0, 0.0]),
                    np.array([False, False, True]), 1.0)
    a = np.array([1.0, 3.0, 2.0])
    rng = np.random.default_rng(5)
    w = np.array([ref.draw(a, 1.5, rng) for _ in range(4000)])
    assert np.all(np.abs(w) <= a)
    sd = np.sqrt(1.5 / ref.k[:2])
    for i in range(2):
        lo, hi = (-a[i] - ref.w0[i]) / sd[i], (a[i] - ref.w0[i]) / sd[i]
        p = stats.kstest(w[:, i], stats.truncnorm(lo, hi, loc=ref.w0[i], scale=sd[i]).cdf).pvalue
        assert p > 0.01, (i, p)
    assert stats.kstest(w[:, 2], stats.uniform(-2.0, 4.0).cdf).pvalue > 0.01


# --- against one-way runs ---------------------------------------------------------------------

def _gaussian_case():
    mu = np.array([0.5, -0.3])
    pot = Gaussian(2, stiffness=[1.0, 4.0], centre=mu).potential()
    return pot, mu, BoxPrior(np.array([2.0, 1.5]))


def test_the_halves_are_one_way_runs():
    """The forward half is the one-way run with the same seed (the same fitted reference), the
    reverse half the one-way reverse run from the child seed, bit for bit."""
    pot, mu, prior = _gaussian_case()
    cfg = TIConfig(**FAST, both_directions=True)
    pair = thermodynamic_integration(pot, mu, prior, cfg, seed=7)
    one = dataclasses.replace(cfg, both_directions=False)
    fwd = thermodynamic_integration(pot, mu, prior, one, seed=7)
    assert pair.details["forward_log_integral"] == fwd.log_integral
    ref = fit_reference(pot, mu, prior, one, ti_streams(7)[0])
    rev = thermodynamic_integration(pot, mu, prior, dataclasses.replace(one, reverse=True),
                                    seed=reverse_seed(7), reference=ref)
    assert pair.details["reverse_log_integral"] == rev.log_integral
    assert pair.log_integral == 0.5 * (fwd.log_integral + rev.log_integral)
    # repeats honour the setting too
    (rep,), _, _ = repeat_ti(pot, mu, prior, cfg, [7])
    assert rep.log_integral == pair.log_integral and rep.details["both_directions"]


@pytest.mark.parametrize("sigma", [[40.0, 40.0], [2.0, 1.5]], ids=["box-far", "box-cuts"])
def test_midpoint_on_a_gaussian_in_a_box(sigma):
    k, mu = [1.0, 4.0], np.array([0.5, -0.3])
    pot = Gaussian(2, stiffness=k, centre=mu).potential()
    prior = BoxPrior(np.array(sigma))
    exact = gaussian_box_log_z(k, mu, prior.half_width, 1.0)
    r = bidirectional_ti(pot, mu, prior, TIConfig(**FAST), seed=1)
    assert 0 < r.log_integral_error < 0.2
    assert abs(r.log_integral - exact) < 4 * r.log_integral_error


def test_the_two_directions_bracket_a_sweep_that_lags():
    """20 unit wells that widen 3.2-fold from λ = 0 to λ = 1 while one stiff well (k = 100)
    holds the step size down, with short trajectories and no burn-in between λ points: the
    chain lags behind λ. Over 12 seeds the forward sweep lies above the exact value and the
    reverse sweep below it (the second law), each by more than 3 standard errors of its
    mean (measured: +2.5 ± 0.5 and -3.6 ± 1.0), and the one-way error bars miss the forward
    bias entirely (mean z² 379), while the midpoint's scatter matches its error bar (mean z²
    1.47; [0.25, 2.5] holds for chi²/12 with probability ~0.99)."""
    n = 21
    k = np.ones(n)
    k[0] = 100.0
    mu = np.zeros(n)
    pot = Gaussian(n, stiffness=k, centre=mu).potential()
    prior = BoxPrior(np.full(n, 40.0))
    exact = float(np.sum(0.5 * np.log(2 * np.pi / k)))
    k_ref = np.full(n, 0.1)
    k_ref[0] = 100.0
    ref = Reference(mu, k_ref, np.zeros(n, dtype=bool), 0.0)
    cfg = TIConfig(n_bridges=80, lambda_power=2.0, n_burn_in=0, n_samples=20, n_leapfrog=2,
                   initial_burn_in=60, step_size=0.3, readapt_every=0, min_acceptance=0.0)
    fwd, rev, z_mid, z_fwd = [], [], [], []
    for seed in range(12):
        r = bidirectional_ti(pot, mu, prior, cfg, seed=seed, reference=ref)
        d = r.details
        fwd.append(d["forward_log_integral"] - exact)
        rev.append(d["reverse_log_integral"] - exact)
        z_mid.append((r.log_integral - exact) / r.log_integral_error)
        z_fwd.append(fwd[-1] / d["forward_log_integral_error"])
    se = lambda x: np.std(x, ddof=1) / math.sqrt(len(x))  # noqa: E731
    assert np.mean(fwd) > 3 * se(fwd)
    assert np.mean(rev) < -3 * se(rev)
    assert np.mean(np.square(z_fwd)) > 25
    assert 0.25 < np.mean(np.square(z_mid)) < 2.5


def test_resume_in_the_reverse_sweep_is_bit_identical(tmp_path):
    pot, mu, prior = _gaussian_case()
    cfg = TIConfig(**{**FAST, "n_samples": 20}, both_directions=True)
    whole = thermodynamic_integration(pot, mu, prior, cfg, seed=3)

    class Stop(Exception):
        pass

    calls = []

    def stop(j, n, info):
        calls.append(j)
        if len(calls) == 16:         # the fifth point of the reverse sweep
            raise Stop

    with pytest.raises(Stop):
        thermodynamic_integration(pot, mu, prior, cfg, seed=3, run_dir=tmp_path, progress=stop)
    assert (tmp_path / REFERENCE_FILE).is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["forward", REFERENCE_FILE, "reverse"]
    resumed = thermodynamic_integration(pot, mu, prior, cfg, seed=3, run_dir=tmp_path)
    assert resumed.log_integral == whole.log_integral
    assert resumed.details["dj_mean_reverse"] == whole.details["dj_mean_reverse"]


# --- through `thermonet evidence` -------------------------------------------------------------

def test_evidence_command_runs_both_directions(tmp_path):
    """Model A (3 unit wells in |w_i| < 5) with ``ti.both_directions``: the row is the midpoint
    of the two sweeps stored beside it, within its error of the exact integral; the report's
    reverse variant is a one-way reverse sweep."""
    from click.testing import CliRunner

    from thermonet.cli import main
    from thermonet.evidence import run as evrun

    body = ("[evidence]\nseed = 1\nlaplace = false\nn_minima = 2\nconvergence_minima = 1\n"
            "[data]\nname = 'none'\n"
            "[ti]\nn_bridges = 10\nn_burn_in = 20\nn_samples = 50\nn_leapfrog = 10\n"
            "kfit_burn_in = 50\nkfit_samples = 100\ninitial_burn_in = 30\n"
            "both_directions = true\n"
            "[model.A]\narchitecture = 'gaussian'\nn = 3\nstiffness = 1.0\n")
    (tmp_path / "ev.toml").write_text(body)
    res = CliRunner().invoke(main, ["-q", "evidence", str(tmp_path / "ev.toml"), "--out",
                                    str(tmp_path / "o")])
    assert res.exit_code == 0, res.output
    row, row1 = json.loads((tmp_path / "o" / "summary.json").read_text())["rows"]
    base = tmp_path / "o" / "ti" / "A" / "min000"
    assert sorted(p.name for p in (base / "rep000").iterdir()) == [
        "forward", REFERENCE_FILE, "result.json", "reverse"]
    d = row["ti_details"]
    assert row["log_integral"] == pytest.approx(
        0.5 * (d["forward_log_integral"] + d["reverse_log_integral"]), rel=0, abs=1e-9)
    exact = 3 * math.log(math.sqrt(2 * math.pi) * math.erf(5 / math.sqrt(2)))
    assert abs(row["log_integral"] - exact) < 4 * row["log_integral_error"]
    rev = json.loads((base / "conv-reverse" / "result.json").read_text())
    assert rev["details"]["config"]["reverse"] is True
    assert "both_directions" not in rev["details"]["config"]
    h = np.array([x["forward_log_integral"] - x["reverse_log_integral"]
                  for x in (d, row1["ti_details"])])
    (line,) = [ln for ln in res.output.splitlines() if ln.startswith("both directions, A")]
    se = float(h.std(ddof=1)) / math.sqrt(2)
    assert f"H = forward - reverse = {evrun.pm(float(h.mean()), se)} over 2 minima" in line
    assert "REVERSE ABOVE FORWARD" not in res.output
