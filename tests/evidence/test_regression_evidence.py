"""The evidence of a regression network at fixed hyperparameters, by stepping stone from a
prior rung that draws the network's own Gaussian prior.

With ``hierarchical = false`` and a known noise level, ``exp(-E/T)`` of ``mlp-regression`` is
``p(D|w)^(1/T) N(w; 0, 1/prec)``: at ``beta = 0`` the prior, at ``beta = 1`` the posterior, so
``log Z(1) = ln p(D|alpha, beta, H)``, MacKay's evidence of the model (every basin), without
his Gaussian approximation. The reference here is independent of thermonet: NumPy's forward
pass and Monte Carlo over the prior, with the output bias integrated out in closed form
(Rao-Blackwellised), so its error bar is its own sample standard error.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from click.testing import CliRunner

from thermonet.analysis.model_evidence import run_log_evidence
from thermonet.architectures.regression import RegressionMLP
from thermonet.cli import main
from thermonet.errors import ConfigError
from thermonet.io.trace import read_trace
from thermonet.runner import run as run_config
from thermonet.samplers.hmc import HMC
from thermonet.samplers.hmc_gibbs import GibbsHMC
from thermonet.tempering.prior_rung import PriorRung

Z = 4.5
ALPHA = [0.5, 2.0, 0.25]        # layer1.weight, layer1.bias, layer2.weight (times fan-in H)
H = 2
NOISE = 0.5
BIAS_SD = 100.0                 # the architecture's output-bias width
#: informative Gamma hyperpriors (so that plain Monte Carlo over the prior is a usable check)
HIER = {"hyper_width": 0.7, "hyper_shape": 4.0, "noise_width": 1.0, "noise_shape": 8.0}


def _data():
    rng = np.random.default_rng(7)
    x = rng.uniform(-2.0, 2.0, size=(6, 1))
    y = np.tanh(1.5 * x) + NOISE * rng.normal(size=(6, 1))
    return x, y


def _arch(**kw):
    return RegressionMLP(1, [H], 1, hierarchical=False, noise_std=NOISE,
                         group_precisions=ALPHA, **kw)


def _prior_sd():
    """Per-parameter prior widths in the layout W1 (H), b1 (H), W2 (H), b2, by hand."""
    prec = [ALPHA[0]] * H + [ALPHA[1]] * H + [ALPHA[2] * H] * H
    return np.array([1.0 / math.sqrt(p) for p in prec] + [BIAS_SD])


def _gamma(rng, width, shape, size):
    """Neal's Gamma prior on a precision: ordinary shape a/2, mean 1/width^2."""
    return rng.gamma(shape / 2, 1.0 / (shape / 2 * width ** 2), size=size)


def _reference_log_z(x, y, n_draws=400_000, seed=3, hier=None):
    """ln ∫ p(D|w) N(w; 0, prior) dw: Monte Carlo over W1, b1, W2 from the prior (and, with
    ``hier``, over the group and noise precisions from their Gamma priors first), the output
    bias c integrated exactly (the likelihood is Gaussian in c); mean and standard error."""
    rng = np.random.default_rng(seed)
    if hier is None:
        sd = _prior_sd()
        sd_n = [np.full((n_draws, 1), sd[j * H]) for j in range(3)]
        tau = np.full(n_draws, 1.0 / NOISE ** 2)
    else:
        prec = [_gamma(rng, hier["hyper_width"], hier["hyper_shape"], (n_draws, 1))
                for _ in range(3)]
        prec[2] = prec[2] * H
        sd_n = [1.0 / np.sqrt(p) for p in prec]
        tau = _gamma(rng, hier["noise_width"], hier["noise_shape"], n_draws)
    w1 = rng.normal(0.0, 1.0, size=(n_draws, H)) * sd_n[0]
    b1 = rng.normal(0.0, 1.0, size=(n_draws, H)) * sd_n[1]
    w2 = rng.normal(0.0, 1.0, size=(n_draws, H)) * sd_n[2]
    g = np.tanh(x[None, :, 0, None] * w1[:, None, :] + b1[:, None, :]) @ w2[:, :, None]
    r = y[None, :, 0] - g[:, :, 0]                                   # (draws, n)
    n, s2 = x.shape[0], BIAS_SD ** 2
    a = tau * n + 1.0 / s2
    b = tau * r.sum(axis=1)
    log_f = (0.5 * n * np.log(tau / (2 * math.pi)) - 0.5 * np.log(a * s2)
             + b ** 2 / (2 * a) - 0.5 * tau * (r ** 2).sum(axis=1))
    m = log_f.max()
    w = np.exp(log_f - m)
    return m + math.log(w.mean()), w.std(ddof=1) / math.sqrt(n_draws) / w.mean()


def test_group_precisions_fix_each_group_and_are_checked():
    arch = _arch()
    tau, prec = arch.expand_hyper(np.zeros(0), 1.0)
    assert tau == pytest.approx(1.0 / NOISE ** 2)
    np.testing.assert_allclose(prec, 1.0 / _prior_sd() ** 2, rtol=1e-14)
    _, prec3 = arch.expand_hyper(np.zeros(0), 3.0)
    np.testing.assert_allclose(prec3, 3.0 * prec, rtol=1e-14)
    assert arch.group_names() == ["layer1.weight", "layer1.bias", "layer2.weight"]
    with pytest.raises(ConfigError, match="expected 3 finite positive precisions"):
        RegressionMLP(1, [H], 1, hierarchical=False, group_precisions=[1.0, 2.0])
    with pytest.raises(ConfigError, match="expected 3 finite positive precisions"):
        RegressionMLP(1, [H], 1, hierarchical=False, group_precisions=[1.0, -2.0, 1.0])
    with pytest.raises(ConfigError, match="set hierarchical = false"):
        RegressionMLP(1, [H], 1, group_precisions=ALPHA)


def test_the_prior_rung_draws_the_networks_gaussian_prior():
    x, y = _data()
    pot = _arch().potential(x=x, y=y)
    rung = PriorRung(GibbsHMC(pot, temperature=1.0), None)
    theta, hyper = rung.sample(np.random.default_rng(11))
    assert hyper is None
    expected = np.random.default_rng(11).normal(0.0, _prior_sd())
    np.testing.assert_array_equal(theta, expected)


def test_a_hierarchical_prior_rung_draws_hyperparameters_then_weights():
    """Neal's Gamma priors (width s: mean precision 1/s^2; shape a: ordinary shape a/2), then
    the weights at those precisions, from one stream in that order."""
    x, y = _data()
    arch = RegressionMLP(1, [H], 1, **HIER)
    rung = PriorRung(GibbsHMC(arch.potential(x=x, y=y), temperature=1.0), None)
    theta, hyper = rung.sample(np.random.default_rng(5))
    rng = np.random.default_rng(5)
    a, s = HIER["hyper_shape"], HIER["hyper_width"]
    want = [rng.gamma(a / 2, 1 / (a / 2 * s ** 2)) for _ in range(3)]
    a, s = HIER["noise_shape"], HIER["noise_width"]
    want.append(rng.gamma(a / 2, 1 / (a / 2 * s ** 2)))
    np.testing.assert_array_equal(hyper, want)
    prec = [want[0]] * H + [want[1]] * H + [want[2] * H] * H + [BIAS_SD ** -2]
    np.testing.assert_array_equal(theta, rng.normal(0.0, 1.0 / np.sqrt(prec)))
    state = rung.draw(np.random.default_rng(5))
    np.testing.assert_array_equal(state.hyper, hyper)


def test_the_prior_rung_refuses_what_it_cannot_draw_exactly():
    x, y = _data()
    scaled = RegressionMLP(1, [H], 1, noise_std=NOISE, parameterisation="scale").potential(
        x=x, y=y)
    with pytest.raises(ConfigError, match="cannot draw exactly"):
        PriorRung(GibbsHMC(scaled, temperature=1.0), None)
    fixed = _arch().potential(x=x, y=y)
    with pytest.raises(ConfigError, match="divides the whole energy"):
        PriorRung(HMC(fixed, temperature=1.0), None)
    with pytest.raises(ConfigError, match="noise_std"):
        RegressionMLP(1, [H], 1, hierarchical=False).potential(x=x, y=y).prior_sample(
            np.random.default_rng(0))


RUN = """
[run]
seed = 2
n_iterations = 2500
checkpoint_every = 2500
sample_every = 0
adapt_every = 0
discard = 0.1
[data]
path = "train.npz"
test_path = "test.npz"
inputs = ["x"]
outputs = ["y"]
[architecture]
name = "mlp-regression"
n_inputs = 1
hidden = [HIDDEN]
n_outputs = 1
hierarchical = false
noise_std = NOISE
group_precisions = ALPHA
[init]
minimise = false
burn_in = [5]
[sampler]
name = "hmc-gibbs"
n_leapfrog = 10
step_size = 0.05
step_size_jitter = 0.3
adapt_method = "chain"
warmup_transitions = 60
[ladder]
n_temperatures = 10
t_min = 1.0
t_max = 3000.0
swap_scheme = "deo"
prior_rung = true
adapt_rounds = 3
adapt_round_length = 8
"""


@pytest.mark.slow
def test_stepping_stone_gives_the_evidence_at_fixed_hyperparameters(tmp_path):
    """The run's log Z(T = 1) equals the reference within the joint error bar; read from the
    slots' whole energies (which carry ``T sum prec w^2/2``) it would be off by hundreds of
    standard errors."""
    x, y = _data()
    np.savez(tmp_path / "train.npz", x=x, y=y)
    np.savez(tmp_path / "test.npz", x=x[:2], y=y[:2])
    cfg = tmp_path / "reg.toml"
    cfg.write_text(RUN.replace("HIDDEN", str(H)).replace("NOISE", repr(NOISE))
                   .replace("ALPHA", repr(ALPHA)))
    run_config(cfg, tmp_path / "run")
    ev = run_log_evidence(tmp_path / "run")
    ref, ref_err = _reference_log_z(x, y)
    err = math.hypot(ev.log_z_ss_err, ref_err)
    assert abs(ev.log_z_ss - ref) < Z * err, (ev.log_z_ss, ev.log_z_ss_err, ref, ref_err)
    assert ev.log_z_ss_err < 0.15                       # the check has teeth
    # the swap energies are the likelihood's; the slots' energies add the tempered prior
    tr = read_trace(tmp_path / "run")
    diff = np.asarray(tr["energy_k"]) - np.asarray(tr["swap_energy_k"])
    assert np.all(diff[:, :-1] > 0) and np.ptp(diff[:, 0]) > 0
    out = CliRunner().invoke(main, ["analyse", str(tmp_path / "run")])
    assert out.exit_code == 0, out.output
    assert f"log evidence (T = 1, from the prior rung): {ev.log_z_ss:.4f}" in out.output
    assert "hyper      T" not in CliRunner().invoke(main, ["info", str(tmp_path / "run")]).output


@pytest.mark.slow
def test_stepping_stone_gives_the_evidence_with_hyperparameters_integrated_out(tmp_path):
    """A hierarchical model (three group precisions and the noise precision with Gamma
    priors): the prior rung draws them, so log Z(T = 1) is ln p(D|H) with every
    hyperparameter integrated out; against Monte Carlo over the whole prior."""
    x, y = _data()
    np.savez(tmp_path / "train.npz", x=x, y=y)
    np.savez(tmp_path / "test.npz", x=x[:2], y=y[:2])
    cfg = tmp_path / "reg.toml"
    arch = "\n".join(f"{k} = {v!r}" for k, v in HIER.items())
    cfg.write_text(RUN.replace("HIDDEN", str(H))
                   .replace("hierarchical = false\nnoise_std = NOISE\ngroup_precisions = ALPHA",
                            "hierarchical = true\n" + arch))
    run_config(cfg, tmp_path / "run")
    ev = run_log_evidence(tmp_path / "run")
    ref, ref_err = _reference_log_z(x, y, hier=HIER)
    err = math.hypot(ev.log_z_ss_err, ref_err)
    assert abs(ev.log_z_ss - ref) < Z * err, (ev.log_z_ss, ev.log_z_ss_err, ref, ref_err)
    assert ev.log_z_ss_err < 0.15
    fixed, _ = _reference_log_z(x, y)
    assert abs(fixed - ref) > 10 * err          # a different number from the fixed prior's
