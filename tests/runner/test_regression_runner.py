"""`thermonet run` on regression models: configuration checks, bit-exact resume with the
hyperparameters, persistent momenta and transition counter in the state (also after a kill at
a checkpoint), and the analysis in squared errors checked against a NumPy forward pass."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from tests.runs import assert_same, tree
from thermonet import config as cfgmod
from thermonet.cli import main
from thermonet.errors import ThermonetError
from thermonet.io import checkpoint as ckpt
from thermonet.io import trace as iotrace
from thermonet.runner import Run, detach_log

ROOT = Path(__file__).resolve().parents[2]

ARM = """
[run]
seed = 3
n_iterations = 8
checkpoint_every = 2
sample_every = 1
discard = 0.25
[data]
name = "robot-arm"
[architecture]
name = "mlp-regression"
hidden = [6]
[init]
minimise = false
burn_in = [2]
[sampler]
name = "hmc-gibbs"
n_leapfrog = 12
step_size = 0.001
adapt_method = "fixed"
fixed_hyper_transitions = 2
persistence = 0.9
window = 3
step_size_jitter = 0.2
[ladder]
temperatures = [1.0, 1.5]
n_trajectories = 2
"""


@pytest.fixture
def arm_cfg(tmp_path):
    p = tmp_path / "arm.toml"
    p.write_text(ARM)
    return p


@pytest.mark.parametrize("key,value,match", [
    ("architecture.hidden_activation", "relu", "hidden_activation = 'relu'"),
    ("architecture.noise_std", -1.0, "noise_std = -1.0"),
    ("architecture.hyper_shape", 0.0, "shape = 0.0"),
    ("architecture.hyper_widht", 0.1, "did you mean 'hyper_width'"),
    ("architecture.ard", "yes", "ard = 'yes' has the wrong type"),
    ("sampler.persistence", 1.0, "persistence = 1.0"),
    ("sampler.fixed_hyper_transitions", -1, "fixed_hyper_transitions = -1"),
])
def test_regression_config_errors_are_one_line(arm_cfg, tmp_path, key, value, match):
    with pytest.raises(ThermonetError, match=match) as err:
        cfg = cfgmod.load(arm_cfg, {key: value})
        Run.create(cfg, tmp_path / "r")     # the prior rung is refused when the engine is built
    detach_log()
    assert "\n" not in str(err.value)


def test_a_prior_rung_needs_the_direct_parameterisation(arm_cfg, tmp_path):
    cfg = cfgmod.load(arm_cfg, {"ladder.prior_rung": True,
                                "architecture.parameterisation": "scale"})
    with pytest.raises(ThermonetError, match="prior_rung = false") as err:
        Run.create(cfg, tmp_path / "r")     # refused when the engine is built
    detach_log()
    assert "\n" not in str(err.value)


def test_a_hierarchical_prior_rung_resumes_bit_for_bit(arm_cfg, tmp_path):
    """The prior rung draws hyperparameters and weights from its slot's stream: a run
    stopped and resumed equals the straight one, draws included."""
    extra = {"ladder.prior_rung": True}
    straight, half = tmp_path / "straight", tmp_path / "half"
    Run.create(cfgmod.load(arm_cfg, extra), straight).run()
    Run.create(cfgmod.load(arm_cfg, {**extra, "run.n_iterations": 4}), half).run()
    detach_log()
    Run.open(half, n_iterations=8).run()
    detach_log()
    assert_same(tree(straight), tree(half))
    hyper = ckpt.read_checkpoint(straight).slots["hyper"]
    assert hyper.shape == (3, 4)                     # the prior rung holds drawn ones too
    tr = iotrace.read_trace(straight)
    assert np.all(np.isfinite(tr["swap_energy_k"]))


def test_hmc_gibbs_run_resumes_bit_for_bit_with_hyperparameters(arm_cfg, tmp_path):
    straight, half = tmp_path / "straight", tmp_path / "half"
    Run.create(cfgmod.load(arm_cfg), straight).run()
    Run.create(cfgmod.load(arm_cfg, {"run.n_iterations": 4}), half).run()
    detach_log()
    mid = ckpt.read_checkpoint(half)
    assert {"hyper", "momentum", "n_done"} <= set(mid.slots)
    assert mid.slots["hyper"].shape == (2, 4)        # 3 weight groups + the noise, per slot
    assert np.all(mid.slots["n_done"] == 2 + 4 * 2)  # burn-in + 4 iterations x 2 transitions
    assert np.any(mid.slots["momentum"] != 0)
    Run.open(half, n_iterations=8).run()
    detach_log()
    assert_same(tree(straight), tree(half))
    # the hyperparameters moved away from their initial values (Gibbs ran)
    assert not np.allclose(ckpt.read_checkpoint(straight).slots["hyper"], 1.0)


def test_a_run_written_before_an_option_existed_resumes(arm_cfg, tmp_path):
    """A checkpoint whose stored configuration lacks an option added since (here
    architecture.kernel, as in runs written before it existed) resumes with the option's
    default, not as a changed configuration."""
    import dataclasses

    straight, half = tmp_path / "straight", tmp_path / "half"
    Run.create(cfgmod.load(arm_cfg), straight).run()
    Run.create(cfgmod.load(arm_cfg, {"run.n_iterations": 4}), half).run()
    detach_log()

    def drop_kernel(text: str) -> str:
        out = "".join(line for line in text.splitlines(keepends=True)
                      if not line.startswith("kernel ="))
        assert out != text
        return out

    ck = ckpt.read_checkpoint(half)
    ckpt.write_checkpoint(half, dataclasses.replace(ck, config_toml=drop_kernel(ck.config_toml)))
    (half / ckpt.CONFIG).write_text(drop_kernel((half / ckpt.CONFIG).read_text()))
    Run.open(half, n_iterations=8).run()
    detach_log()
    assert_same(tree(straight), tree(half))      # "auto" then and now: the same kernel


@pytest.mark.slow
def test_kill_at_a_checkpoint_then_resume_is_exact(arm_cfg, tmp_path):
    straight = tmp_path / "straight"
    Run.create(cfgmod.load(arm_cfg), straight).run()
    detach_log()
    victim = tmp_path / "victim"
    env = {**os.environ, "THERMONET_TEST_CRASH": "before-replace:checkpoint:3",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    code = "from tests.source_plugins import cli_with_source_plugins as m; m()"
    proc = subprocess.run([sys.executable, "-c", code, "-q", "run", str(arm_cfg), "--out",
                           str(victim)], env=env, cwd=ROOT, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 137, proc.stderr      # killed writing the 3rd checkpoint
    assert ckpt.read_checkpoint(victim).iteration == 2
    res = CliRunner().invoke(main, ["-q", "resume", str(victim)])
    assert res.exit_code == 0, res.output
    detach_log()
    assert_same(tree(straight), tree(victim))


def test_analyse_reports_squared_errors_of_regression_runs(arm_cfg, tmp_path):
    out = tmp_path / "r"
    Run.create(cfgmod.load(arm_cfg), out).run()
    detach_log()
    res = CliRunner().invoke(main, ["analyse", str(out)])
    assert res.exit_code == 0, res.output
    assert "regression" in res.output and "sqerr_test" in res.output
    assert "classifier" not in res.output
    from thermonet.analysis import read_analysis
    from thermonet.data import load_data

    a = read_analysis(out / "analysis.h5")
    split = load_data("robot-arm")
    tr = iotrace.read_trace(out, samples=True)
    keep = tr["samples_iteration"] >= 3                 # discard 0.25 of 8 iterations
    thetas = tr["samples_theta"][keep]

    def forward(theta, x):                              # independent NumPy network, 2-6-2
        w1, b1 = theta[:12].reshape(6, 2), theta[12:18]
        w2, b2 = theta[18:30].reshape(2, 6), theta[30:32]
        return np.tanh(x @ w1.T + b1) @ w2.T + b2

    for k in range(2):
        f = np.array([forward(th, split.test.x) for th in thetas[:, k]])
        per = np.mean(np.sum((f - split.test.y) ** 2, axis=2), axis=1)
        assert a.table["test_error"][k] == pytest.approx(per.mean(), rel=1e-10)
        pred = np.mean(np.sum((f.mean(axis=0) - split.test.y) ** 2, axis=1))
        assert a.table["predictive_test_error"][k] == pytest.approx(pred, rel=1e-10)
    base = np.mean(np.sum((split.test.y - split.train.y.mean(axis=0)) ** 2, axis=1))
    assert a.references["uninformed_error"] == pytest.approx(base, rel=1e-12)
    # the hyperparameters are recorded at every iteration: the last row is the checkpoint's,
    # and the reported widths are the posterior means of 1/sqrt(h) after the discard
    h = tr["hyper_k"]
    assert h.shape == (8, 2, 4)
    assert np.array_equal(h[-1], ckpt.read_checkpoint(out).slots["hyper"])
    hyp = a.meta["hyperparameters"]
    assert hyp["names"] == ["layer1.weight", "layer1.bias", "layer2.weight", "noise"]
    assert np.allclose(hyp["width"], np.mean(1 / np.sqrt(h[2:]), axis=0), rtol=1e-12)
    assert "noise" in res.output and "posterior mean width" in res.output


def test_analyse_reports_the_scale_factors_widths_from_the_samples(arm_cfg, tmp_path):
    """Neal's scale factors are coordinates of the state (after the 32 weights of the 2-6-2
    network), not recorded hyperparameters: the reported group widths are the posterior
    means of exp(-u_g/2) over the stored samples, before the noise's from the trace."""
    cfg = cfgmod.load(arm_cfg, {"architecture.parameterisation": "scale"})
    out = tmp_path / "s"
    Run.create(cfg, out).run()
    detach_log()
    from thermonet.analysis import analyse

    hyp = analyse(out).meta["hyperparameters"]
    assert hyp["names"] == ["layer1.weight", "layer1.bias", "layer2.weight", "noise"]
    tr = iotrace.read_trace(out, samples=True)
    keep = tr["samples_iteration"] >= 3                 # discard 0.25 of 8 iterations
    u = tr["samples_theta"][keep][:, :, 32:35]
    assert tr["samples_theta"].shape[2] == 35
    widths = np.array(hyp["width"])
    assert np.allclose(widths[:, :3], np.mean(np.exp(-u / 2), axis=0), rtol=1e-12)
    h = tr["hyper_k"]                                   # the noise precision only
    assert h.shape == (8, 2, 1)
    assert np.allclose(widths[:, 3], np.mean(1 / np.sqrt(h[2:, :, 0]), axis=0), rtol=1e-12)
    from thermonet.analysis import summarise  # `thermonet info`: the same

    s = summarise(out)["hyperparameters"]
    assert s["names"] == hyp["names"] and np.allclose(s["width"], widths, rtol=1e-12)


def test_info_reports_the_hyperparameters_of_regression_runs(arm_cfg, tmp_path):
    from thermonet.analysis import summarise

    out = tmp_path / "r"
    Run.create(cfgmod.load(arm_cfg), out).run()
    detach_log()
    s = summarise(out)
    h = iotrace.read_trace(out)["hyper_k"]
    start = s["discarded_iterations"]
    assert s["hyperparameters"]["names"] == ["layer1.weight", "layer1.bias", "layer2.weight",
                                             "noise"]
    assert np.allclose(s["hyperparameters"]["width"], np.mean(1 / np.sqrt(h[start:]), axis=0),
                       rtol=1e-12)
    res = CliRunner().invoke(main, ["info", str(out)])
    assert res.exit_code == 0, res.output
    lines = [ln for ln in res.output.splitlines() if ln.startswith("hyper ")]
    assert len(lines) == 2 and "noise" in lines[0] and "T = 1.5" in lines[1]
