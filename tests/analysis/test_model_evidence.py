"""Model evidence against basin evidence, on a Gaussian mixture whose log Z is exact.

The target has four modes in the box |w_i| < 8, mapped onto each other in pairs by the
symmetry w -> -w (|G| = 2): two narrow heavy ones at (±5, 0) and two wide light ones at
(0, ±5). Its exact log evidence (box prior) is the log-sum-exp of the components' integrals.
TI from one mode measures that mode's basin; the basin times its |G| copies misses the other
pair by the known amount ln(1 + Z_B / Z_A); the census of both distinct basins and the
prior-anchored ladder recover the exact value. Tolerances are the estimators' own error bars.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from click.testing import CliRunner

from thermonet.analysis.model_evidence import model_evidence, run_log_evidence
from thermonet.cli import main
from thermonet.errors import ConfigError
from thermonet.evidence.basins.census import (
    census,
    distinct_basins,
    log_sum_exp,
    signature_distance,
)
from thermonet.evidence.ti.integration import TIConfig, repeat_ti
from thermonet.priors import BoxPrior
from thermonet.runner import run as run_config
from thermonet.testsystems import GaussianMixture

Z = 4.0          # tolerance in standard errors
MEANS = [[5.0, 0.0], [-5.0, 0.0], [0.0, 5.0], [0.0, -5.0]]
WIDTHS = [0.3, 0.3, 0.7, 0.7]
WEIGHTS = [0.4, 0.4, 0.1, 0.1]
SCALE = 16.0     # box |w_i| < 8
LOG_G = math.log(2.0)

RUN = f"""
[run]
seed = 3
n_iterations = 3000
checkpoint_every = 1000
sample_every = 0
discard = 0.1
[data]
name = "none"
[architecture]
name = "gaussian_mixture"
means = {MEANS}
widths = {WIDTHS}
weights = {WEIGHTS}
prior_scale = {SCALE}
[init]
minimise = false
burn_in = [20]
[sampler]
name = "hmc"
n_leapfrog = 8
step_size = 0.2
[ladder]
n_temperatures = 20
t_min = 1.0
t_max = 200.0
swap_scheme = "deo"
prior_rung = true
"""


def _mixture():
    return GaussianMixture(means=MEANS, widths=WIDTHS, weights=WEIGHTS, prior_scale=SCALE)


def _exact_components():
    """Each component's log evidence (its integral over the box, minus log V), by
    independent arithmetic: scipy's erf, not the test system's method."""
    from scipy import special

    a = SCALE / 2
    m, s = np.array(MEANS), np.array(WIDTHS)[:, None]
    w = np.array(WEIGHTS) / np.sum(WEIGHTS)
    f = s * np.sqrt(np.pi / 2) * (special.erf((a - m) / (np.sqrt(2) * s))
                                  + special.erf((a + m) / (np.sqrt(2) * s)))
    return np.log(w) + np.log(f).sum(axis=1) - 2 * math.log(2 * a)


def test_the_mixture_knows_its_exact_integrals():
    mix = _mixture()
    comp = _exact_components()
    log_v = BoxPrior.for_architecture(mix).log_volume
    assert mix.component_log_integrals() - log_v == pytest.approx(comp, abs=1e-12)
    assert mix.log_integral() - log_v == pytest.approx(np.log(np.exp(comp).sum()), abs=1e-12)
    # and against brute-force quadrature of exp(-E) on a grid
    g = np.linspace(-8, 8, 201)
    pot = mix.potential()
    ww = np.array([[pot.energy(np.array([x, y])) for x in g] for y in g])
    h = g[1] - g[0]
    brute = np.log(np.exp(-ww).sum() * h * h)
    assert brute == pytest.approx(mix.log_integral(), abs=2e-3)


@pytest.fixture(scope="module")
def ladder_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("mix")
    cfg = d / "mix.toml"
    cfg.write_text(RUN)
    run_config(cfg, d / "run")
    return d / "run"


@pytest.fixture(scope="module")
def basin_ti():
    """TI from mode A (narrow, heavy) and from mode B (wide, light): 6 seeds each."""
    mix = _mixture()
    pot, prior = mix.potential(), BoxPrior.for_architecture(mix)
    cfg = TIConfig(n_bridges=20, n_burn_in=20, n_samples=200, n_leapfrog=10, step_size=0.1,
                   kfit_burn_in=100, kfit_samples=300, initial_burn_in=100)
    out = {}
    for mode in (0, 2):
        _, mean, sd = repeat_ti(pot, np.array(MEANS[mode]), prior, cfg, seeds=range(6))
        out[mode] = (mean - prior.log_volume, sd / math.sqrt(6))
    return out


@pytest.mark.slow
def test_the_prior_anchored_ladder_gives_the_exact_log_evidence(ladder_run):
    exact = float(np.log(np.exp(_exact_components()).sum()))
    ev = run_log_evidence(ladder_run)
    assert ev.mixed, ev.verdict
    assert ev.n_rungs == 21 and ev.iterations_used == 2700
    assert abs(ev.log_z_ss - exact) < Z * ev.log_z_ss_err, (ev.log_z_ss, ev.log_z_ss_err, exact)
    assert abs(ev.log_z_ti - exact) < Z * ev.log_z_ti_err, (ev.log_z_ti, ev.log_z_ti_err, exact)
    assert "the model's evidence" in ev.describe() and "NOT" not in ev.describe()


@pytest.mark.slow
def test_basin_times_copies_misses_the_other_basins_by_the_analytic_amount(ladder_run,
                                                                           basin_ti):
    comp = _exact_components()
    exact = float(np.log(np.exp(comp).sum()))
    za, za_err = basin_ti[0]
    zb, zb_err = basin_ti[2]
    # TI measures each basin: the component's integral, not the model's
    assert abs(za - comp[0]) < Z * za_err
    assert abs(zb - comp[2]) < Z * zb_err
    basin_plus_copies = za + LOG_G
    missing = exact - (comp[0] + LOG_G)               # ln(1 + Z_B / Z_A), analytic
    assert missing == pytest.approx(math.log1p(math.exp(comp[2] - comp[0])), abs=1e-12)
    assert missing > 0.8
    ev = run_log_evidence(ladder_run)
    err = math.hypot(ev.log_z_ss_err, za_err)
    # the global estimate exceeds basin + copies by exactly the analytic amount ...
    assert abs((ev.log_z_ss - basin_plus_copies) - missing) < Z * err
    # ... which is far outside the errors: basin + copies is wrong here
    assert ev.log_z_ss - basin_plus_copies > Z * err


@pytest.mark.slow
def test_the_census_of_distinct_basins_recovers_the_model_evidence(ladder_run, basin_ti):
    """Minima at all four modes: A and -A (images) count once, B and -B once; the census
    bound, the log-sum-exp of the two distinct basins plus ln 2, is then the exact value,
    and explains all of the global estimate."""
    mix = _mixture()
    pot = mix.potential()
    minima = [np.array(m) for m in MEANS]
    # invariants of w -> -w: the energy and the squares of the coordinates
    sig = [np.concatenate([[pot.energy(w)], w * w]) for w in minima]
    assert distinct_basins(sig) == [0, 0, 1, 1]
    le = [basin_ti[0][0], basin_ti[0][0], basin_ti[2][0], basin_ti[2][0]]
    er = [basin_ti[0][1], basin_ti[0][1], basin_ti[2][1], basin_ti[2][1]]
    ev = run_log_evidence(ladder_run)
    c = census(le, er, sig, LOG_G, global_log_evidence=ev.log_z_ss,
               global_error=ev.log_z_ss_err, global_mixed=ev.mixed)
    exact = float(np.log(np.exp(_exact_components()).sum()))
    assert c.n_basins == 2
    assert abs(c.bound - exact) < Z * c.bound_error
    assert abs(c.fraction - 1.0) < Z * c.fraction_error
    # one basin found: a lower bound, short by the analytic amount
    only_a = census(le[:2], er[:2], sig[:2], LOG_G, global_log_evidence=exact)
    short = math.log1p(math.exp(_exact_components()[2] - _exact_components()[0]))
    assert abs((exact - only_a.bound) - short) < Z * only_a.bound_error
    assert abs(only_a.fraction - math.exp(-short)) < Z * only_a.fraction_error
    # counting the images as distinct basins double-counts: ln 2 too high
    naive = census(le, er, [w for w in minima], LOG_G)       # raw w: not invariant
    assert naive.n_basins == 4
    assert naive.bound - c.bound == pytest.approx(LOG_G, abs=1e-12)


def test_census_arithmetic_against_numpy():
    rng = np.random.default_rng(0)
    v, e = rng.normal(size=5) * 3, rng.uniform(0.1, 0.5, size=5)
    total, err = log_sum_exp(v, e)
    assert total == pytest.approx(np.log(np.exp(v).sum()), rel=1e-14)
    # delta method against a finite difference of the log-sum-exp
    grad = np.array([(np.log(np.exp(v + 1e-6 * np.eye(5)[i]).sum()) - total) / 1e-6
                     for i in range(5)])
    assert err == pytest.approx(np.sqrt(np.sum((grad * e) ** 2)), rel=1e-5)
    # groups: a chain of close signatures joins, a distant one does not
    sig = [np.array([1.0]), np.array([1.0005]), np.array([1.0009]), np.array([2.0])]
    assert distinct_basins(sig, rtol=1e-3) == [0, 0, 0, 1]
    assert distinct_basins(sig, rtol=1e-5) == [0, 1, 2, 3]
    assert signature_distance([1.0], None) == math.inf
    assert signature_distance([1.0], [1.0, 2.0]) == math.inf
    c = census([-3.0, -3.2, -1.0], [0.1, 0.1, 0.2], sig[:2] + [sig[3]], None)
    assert c.basin_log_evidence == pytest.approx([-3.1, -1.0])
    assert c.basin_error == pytest.approx([math.sqrt(0.02) / 2, 0.2])
    assert c.bound == pytest.approx(np.log(np.exp(-3.1) + np.exp(-1.0)))
    with pytest.raises(ValueError, match="same number"):
        census([1.0], [0.1, 0.2], [None], None)


def _evidence_line(run_dir, out):
    res = CliRunner().invoke(main, ["analyse", str(run_dir), "--out", str(out)])
    assert res.exit_code == 0, res.output
    return next(ln for ln in res.output.splitlines() if ln.startswith("evidence"))


@pytest.mark.slow
def test_analyse_prints_the_log_evidence_with_its_meaning(ladder_run, tmp_path):
    line = _evidence_line(ladder_run, tmp_path / "a")
    ev = run_log_evidence(ladder_run)
    assert ev.mixed
    assert f"{ev.log_z_ss:.4f}" in line and "the model's evidence" in line
    assert "NOT" not in line


def test_analyse_says_a_short_runs_log_evidence_is_not_the_models(tmp_path):
    # the same ladder for 150 iterations: too few restarts for the verdict
    cfg = tmp_path / "c.toml"
    cfg.write_text(RUN.replace("n_iterations = 3000", "n_iterations = 150"))
    run_config(cfg, tmp_path / "r")
    line = _evidence_line(tmp_path / "r", tmp_path / "a")
    ev = run_log_evidence(tmp_path / "r")
    assert not ev.mixed
    assert f"{ev.log_z_ss:.4f}" in line and "NOT the model's evidence" in line


def test_log_evidence_needs_a_prior_rung_and_says_when_not_mixed():
    class V:
        mixed = False

        def __str__(self):
            return "not mixed: 0 restarts"

    e = np.random.default_rng(1).normal(size=(50, 3)) + 5
    assert model_evidence([1.0, 2.0, 4.0], e, V()) is None              # no prior rung
    assert model_evidence([0.5, 2.0, np.inf], e, V()) is None           # no rung at T = 1
    ev = model_evidence([1.0, 2.0, np.inf], e, V())
    assert ev is not None and not ev.mixed
    assert "NOT the model's evidence" in ev.describe()
    assert ev.ti_usable and "(integration over beta)" in ev.describe()
    # energies at the prior rung spread over many decades (vague hyperpriors): the trapezoid's
    # first interval has no useful mean, and the line says so instead of printing it
    wild = e.copy()
    wild[:, 2] = 10.0 ** np.random.default_rng(2).uniform(0, 12, size=50)
    bad = model_evidence([1.0, 2.0, np.inf], wild, V())
    assert bad is not None and not bad.ti_usable
    assert np.isfinite(bad.log_z_ss)                  # the stepping stone still is
    assert "integration over beta not usable (± " in bad.describe()


def test_run_log_evidence_refuses_a_run_without_a_prior_rung(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text(RUN.replace("prior_rung = true", "prior_rung = false")
                   .replace("n_iterations = 3000", "n_iterations = 5"))
    run_config(cfg, tmp_path / "r")
    with pytest.raises(ConfigError, match="prior rung and a rung at T = 1"):
        run_log_evidence(tmp_path / "r")


@pytest.mark.slow
def test_the_evidence_workflow_reports_the_census_and_the_fraction(tmp_path):
    """`thermonet evidence` on the mixture from its four modes: the mixture states no
    symmetries, so each mode is its own basin (signature: energy and point), and the census
    bound is the log-sum-exp of the four basin evidences, the exact log evidence within its
    error; with the global estimate given (added when the directory is continued) the
    fraction explained is 1 within its error."""
    import json

    np.save(tmp_path / "modes.npy", np.array(MEANS))
    exact = float(np.log(np.exp(_exact_components()).sum()))
    body = (f"[evidence]\nseed = 4\nlaplace = false\nn_minima = 4\nrepeats = 3\n"
            f"[data]\nname = 'none'\n[ti]\nn_bridges = 20\nn_burn_in = 20\nn_samples = 200\n"
            f"n_leapfrog = 10\nstep_size = 0.1\nkfit_burn_in = 100\nkfit_samples = 300\n"
            f"initial_burn_in = 100\n[model.mix]\narchitecture = 'gaussian_mixture'\n"
            f"means = {MEANS}\nwidths = {WIDTHS}\nweights = {WEIGHTS}\nprior_scale = {SCALE}\n"
            f"params = '{tmp_path / 'modes.npy'}'\n")
    cfg = tmp_path / "ev.toml"
    cfg.write_text(body)
    res = CliRunner().invoke(main, ["-q", "evidence", str(cfg), "--out", str(tmp_path / "o"),
                                    "--no-convergence"])
    assert res.exit_code == 0, res.output
    s = json.loads((tmp_path / "o" / "summary.json").read_text())
    c = s["models"][0]["census"]
    assert c["n_basins"] == 4 and c["log_multiplicity"] is None
    # the bound's error: each basin's spread over 3 repeats (sd), combined
    assert abs(c["bound"] - exact) < Z * c["bound_error"], (c["bound"], exact)
    assert "census of mix: 4 distinct basin(s) among 4 minima" in res.output
    # add the global estimate: the directory continues, nothing is recomputed
    cfg.write_text(body + f"global_log_evidence = [{exact}, 0.0]\n")
    res = CliRunner().invoke(main, ["-q", "evidence", str(cfg), "--out", str(tmp_path / "o"),
                                    "--no-convergence"])
    assert res.exit_code == 0, res.output
    c2 = json.loads((tmp_path / "o" / "summary.json").read_text())["models"][0]["census"]
    assert c2["bound"] == c["bound"]
    assert abs(c2["fraction"] - 1) < Z * c2["fraction_error"]
    assert "the basins found explain a fraction" in res.output


def test_the_census_and_global_sample_runs_are_valid():
    from pathlib import Path

    from thermonet import config as cfgmod
    from thermonet.evidence import config as evcfg

    root = Path(__file__).resolve().parents[2] / "sample_runs"
    ev = evcfg.load(root / "evidence_M1_vs_M3_D50_census.toml")
    # the census: >= 20 minima per model, its settings checked by the report
    e = ev["evidence"]
    assert e["n_minima"] >= 20 and e["convergence"] and 1 <= e["convergence_minima"] < 20
    assert set(ev["model"]) == {"M1", "M3"}
    assert all(len(m["global_log_evidence"]) == 2 for m in ev["model"].values())
    run = cfgmod.load(root / "global_M3_D50.toml")
    assert run["ladder"]["prior_rung"] and run["ladder"]["t_min"] == 1.0


def test_a_bound_above_the_global_estimate_is_flagged():
    """Overlapping copies (the basin is the whole posterior, yet multiplied by |G|) put the
    'lower bound' above the global value: flagged, not reported as a fraction quietly."""
    from thermonet.evidence.basins.census import describe

    over = census([-98.0], [1.0], [None], 110.0, global_log_evidence=-98.6, global_error=0.3)
    assert over.exceeds_global and over.fraction > 1
    assert "THE BOUND EXCEEDS THE GLOBAL ESTIMATE" in "\n".join(describe("M1", over.to_dict()))
    fine = census([-98.0], [1.0], [None], 0.0, global_log_evidence=-98.6, global_error=0.3)
    assert not fine.exceeds_global
    assert "EXCEEDS" not in "\n".join(describe("M1", fine.to_dict()))
