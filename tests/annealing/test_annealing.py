"""Simulated annealing with validation early stopping (thermonet.annealing, `thermonet anneal`).

The stopping rule and the schedule are checked on hand-made numbers; a tiny real anneal (M1 on
D50) is checked against an independent NumPy re-evaluation of its stored numbers; resume after
an interruption (in process, and by a killed process) must give the uninterrupted result bit for
bit; the validation set must not intersect the training or the test set.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
from click.testing import CliRunner

from tests import reference
from thermonet import annealing as an
from thermonet.cli import main
from thermonet.errors import CheckpointMismatchError, ConfigError, ThermonetError
from thermonet.io.atomic import temp_path

M1_WIDTHS = [256, 40, 10]

TINY = {
    "run": {"seed": 3},
    "data": {"name": "D50", "test": "complement"},
    "architecture": {"name": "M1"},
    "anneal": {"t_start": 3.0, "t_end": 0.01, "n_temperatures": 6, "n_trajectories": 4,
               "burn_in": 1, "patience": 2, "n_validation": 100, "adapt_every": 2},
    "sampler": {"n_leapfrog": 8, "adapt_trajectories": 3},
}

TINY_TOML = """
[run]
seed = 3
[data]
name = "D50"
test = "complement"
[architecture]
name = "M1"
[anneal]
t_start = 3.0
t_end = 0.01
n_temperatures = 6
n_trajectories = 4
burn_in = 1
patience = 2
n_validation = 100
adapt_every = 2
[sampler]
n_leapfrog = 8
adapt_trajectories = 3
"""


def _cfg(**anneal):
    raw = {k: dict(v) for k, v in TINY.items()}
    raw["anneal"].update(anneal)
    return an.resolve_config(raw)


# --- schedule ------------------------------------------------------------------------------

def test_geometric_schedule_exact_values():
    t = an.geometric_schedule(10.0, 1e-3, 5)
    np.testing.assert_allclose(t, [10.0, 1.0, 0.1, 0.01, 0.001], rtol=1e-14, atol=0)
    assert t[0] == 10.0 and t[-1] == 1e-3          # both ends exact
    np.testing.assert_allclose(t[1:] / t[:-1], 0.1, rtol=1e-14)
    t7 = an.geometric_schedule(2.0, 0.5, 7)
    np.testing.assert_allclose(t7, 2.0 * 0.25 ** (np.arange(7) / 6), rtol=1e-15)
    assert an.geometric_schedule(4.0, 1.0, 1).tolist() == [4.0]


def test_schedule_from_config():
    cfg = _cfg(t_start=8.0, t_end=0.5, n_temperatures=5)
    np.testing.assert_allclose(an.schedule_of(cfg), [8.0, 4.0, 2.0, 1.0, 0.5], rtol=1e-15)
    cfg = _cfg(temperatures=[3, 1.5, 0.2])
    assert an.schedule_of(cfg).tolist() == [3.0, 1.5, 0.2]


# --- stopping rule on hand-made validation curves -------------------------------------------

@pytest.mark.parametrize("curve, patience, window, min_delta, expected", [
    # minimum at k = 2, then it rises: stop `patience` temperatures later
    ([0.5, 0.4, 0.3, 0.35, 0.36, 0.37], 3, 1, 0.0, 5),
    ([0.5, 0.4, 0.3, 0.35, 0.36, 0.37], 2, 1, 0.0, 4),
    ([0.5, 0.4, 0.3, 0.35, 0.36, 0.37], 4, 1, 0.0, None),   # schedule ends first
    ([0.5, 0.4, 0.3, 0.2, 0.1], 1, 1, 0.0, None),            # always improving
    # a noisy rise that comes back down resets the count
    ([0.5, 0.3, 0.31, 0.29, 0.33, 0.34, 0.35], 2, 1, 0.0, 5),
    # equal value is not an improvement
    ([0.5, 0.3, 0.3, 0.3], 2, 1, 0.0, 3),
    # window 1: best 0.3 at k=1, no improvement at k=2, 3 -> stop at 3;
    # window 2: averages 0.5, 0.4, 0.31, 0.315, 0.32, ... best at k=2 -> stop at 4
    ([0.5, 0.3, 0.32, 0.31, 0.33, 0.2], 2, 1, 0.0, 3),
    ([0.5, 0.3, 0.32, 0.31, 0.33, 0.2], 2, 2, 0.0, 4),
    # min_delta: decreases of less than 0.01 do not count
    ([0.5, 0.3, 0.295, 0.292, 0.291], 3, 1, 0.01, 4),
    ([0.5, 0.3, 0.295, 0.292, 0.291], 3, 1, 0.0, None),
])
def test_stop_index_hand_made(curve, patience, window, min_delta, expected):
    assert an.stop_index(curve, patience, window, min_delta) == expected


def test_running_average_and_best_index():
    np.testing.assert_allclose(an.running_average([0.5, 0.3, 0.32, 0.31], 2),
                               [0.5, 0.4, 0.31, 0.315], rtol=1e-15)
    np.testing.assert_allclose(an.running_average([1.0, 2.0, 6.0], 3), [1.0, 1.5, 3.0])
    assert an.best_index([0.4, 0.2, 0.2, 0.3]) == 1
    assert an.best_index([0.4, 0.2, 0.195], min_delta=0.01) == 1


class _Scripted(an.Annealer):
    """Validation numbers from a script (one per trajectory) instead of the network; records
    the parameters each number was attached to."""

    script: ClassVar[list[float]] = []
    seen: ClassVar[list[np.ndarray]] = []

    def _validation(self, theta):
        i = len(self.seen)
        self.seen.append(theta.copy())
        return self.script[i], 0.0


@pytest.mark.slow
@pytest.mark.mnist
def test_annealer_stops_at_the_right_temperature_and_returns_the_argmin(tmp_path):
    # 6 temperatures x 4 trajectories (burn_in 1: averages over the last 3); patience 2.
    # averages per T: 0.8, 0.5, 0.3, 0.4, 0.45 -> best T index 2, stop after index 4
    # single vectors: the lowest, 0.1, is trajectory 0 of T index 3 (a burn-in trajectory)
    script = [0.9, 0.8, 0.8, 0.8,
              0.6, 0.5, 0.5, 0.5,
              0.3, 0.3, 0.2, 0.4,
              0.1, 0.4, 0.4, 0.4,
              0.5, 0.45, 0.45, 0.45,
              0.0, 0.0, 0.0, 0.0]
    _Scripted.script, _Scripted.seen = script, []
    ann = _Scripted.create(_cfg(), tmp_path / "a").run()
    assert ann.n_done == 5 and ann.status == "stopped"
    np.testing.assert_allclose(ann.table["val_error_mean"], [0.8, 0.5, 0.3, 0.4, 0.45],
                               rtol=1e-15)
    assert ann.table["val_error_min"] == [0.8, 0.5, 0.2, 0.1, 0.45]
    assert ann.best["temperature_index"] == 3 and ann.best["trajectory"] == 0
    assert ann.best["val_error"] == 0.1
    np.testing.assert_array_equal(ann.best_theta, _Scripted.seen[12])
    assert len(_Scripted.seen) == 20          # nothing evaluated after the stop
    np.testing.assert_array_equal(an.read_anneal(tmp_path / "a")["theta"], _Scripted.seen[12])


# --- a tiny real anneal ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory, mnist_dir):
    out = tmp_path_factory.mktemp("anneal") / "tiny"
    ann = an.Annealer.create(_cfg(), out).run()
    return out, ann


def test_tiny_anneal_numbers_reproduce_independently(tiny_run):
    out, ann = tiny_run
    s = ann.s
    assert ann.is_done and 1 <= ann.n_done <= 6
    np.testing.assert_array_equal(ann.table["temperature"], s.schedule[:ann.n_done])
    # the returned vector has the lowest single validation error recorded
    assert ann.best["val_error"] == min(ann.table["val_error_min"])
    k = ann.best["temperature_index"]
    assert ann.table["val_error_min"][k] == ann.best["val_error"]
    for k in range(ann.n_done):
        assert ann.table["val_error_min"][k] <= ann.table["val_error_mean"][k] + 1e-15
    # independent NumPy re-evaluation of the stored best vector
    theta = an.read_anneal(out)["theta"]
    np.testing.assert_array_equal(theta, ann.best_theta)
    v = s.validation
    z = reference.logits(theta, M1_WIDTHS, v.x)
    assert np.mean(np.argmax(z, axis=1) != v.y) == ann.best["val_error"]
    np.testing.assert_allclose(reference.energy(theta, M1_WIDTHS, v.x, v.y) / len(v),
                               ann.best["val_energy_per_point"], rtol=1e-12)
    tr = s.split.train
    np.testing.assert_allclose(reference.energy(theta, M1_WIDTHS, tr.x, tr.y),
                               ann.best["train_energy"], rtol=1e-12)
    te = s.test
    zt = reference.logits(theta, M1_WIDTHS, te.x)
    assert np.mean(np.argmax(zt, axis=1) != te.y) == ann.best["test"]["error"]
    np.testing.assert_allclose(reference.energy(theta, M1_WIDTHS, te.x, te.y) / len(te),
                               ann.best["test"]["energy_per_point"], rtol=1e-12)
    # the summary file holds the same numbers
    summary = json.loads((out / an.ANNEAL_JSON).read_text())
    assert summary["best"]["val_error"] == ann.best["val_error"]
    assert summary["table"]["val_error_mean"] == ann.table["val_error_mean"]


def test_best_parameters_load_with_evaluate(tiny_run):
    out, ann = tiny_run
    res = CliRunner().invoke(main, ["evaluate", "--arch", "M1", "--data", "D50", "--params",
                                    str(out / an.ANNEAL_H5), "--test", "complement", "--json"])
    assert res.exit_code == 0, res.output
    got = json.loads(res.stdout)
    assert got["test_error"] == ann.best["test_full"]["error"]
    assert got["train_energy"] == ann.best["train_energy"]


def test_validation_disjoint_from_train_and_test(tiny_run):
    _, ann = tiny_run
    s = ann.s
    val, train, test = s.validation.indices, s.split.train.indices, s.test.indices
    assert np.intersect1d(val, train).size == 0
    assert np.intersect1d(val, test).size == 0
    assert np.intersect1d(train, test).size == 0
    # complement minus validation: together they are all 70,000 MNIST images
    assert len(val) + len(train) + len(test) == 70_000
    assert np.unique(np.concatenate([val, train, test])).size == 70_000
    assert np.all(val < 60_000) and np.bincount(s.validation.y, minlength=10).tolist() == [10] * 10
    assert s.validation.provenance["pool"] == "mnist"


def test_validation_from_embedded_pool_with_official_test():
    from thermonet.data import load_data

    split = load_data("D500", test="official")
    seed = np.random.SeedSequence(1).spawn(3)[2]
    v = an.make_validation(split.train, 200, seed, "embedded")
    assert v.provenance["pool"] == "embedded" and len(v) == 200
    assert np.intersect1d(v.indices, split.train.indices).size == 0
    assert np.intersect1d(v.indices, split.test.indices).size == 0
    v2 = an.make_validation(split.train, 200, np.random.SeedSequence(1).spawn(3)[2], "embedded")
    np.testing.assert_array_equal(v.indices, v2.indices)       # seeded
    with pytest.raises(Exception, match="n_validation = 60000"):
        an.make_validation(split.train, 60_000, seed, "embedded")


# --- resume --------------------------------------------------------------------------------

def _assert_same(a, b):
    np.testing.assert_array_equal(a.best_theta, b.best_theta)
    np.testing.assert_array_equal(a.chain.theta, b.chain.theta)
    assert a.best["val_error"] == b.best["val_error"] and a.n_done == b.n_done
    for c in an.TABLE_COLUMNS:
        if c != "seconds":
            assert a.table[c] == b.table[c], c


def test_resume_after_interruption_is_bit_identical(tiny_run, tmp_path):
    _, straight = tiny_run
    out = tmp_path / "r"
    an.Annealer.create(_cfg(), out).run(max_temperatures=2)
    ck = an.read_anneal(out)
    assert ck["n_done"] == 2 and ck["status"] == "running"
    resumed = an.Annealer.open(out, _cfg()).run()
    _assert_same(resumed, straight)


@pytest.mark.slow
def test_resume_after_kill_by_cli_is_bit_identical(tiny_run, tmp_path):
    _, straight = tiny_run
    cfg_path = tmp_path / "tiny.toml"
    cfg_path.write_text(TINY_TOML)
    out = tmp_path / "k"
    env = dict(os.environ, THERMONET_TEST_CRASH="before-replace:anneal.h5:3")
    proc = subprocess.run([sys.executable, "-m", "thermonet.cli", "anneal", str(cfg_path),
                           "--out", str(out), "--quiet"], check=False, env=env,
                          capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 137, proc.stderr
    # killed between writing the file of the 2nd temperature and replacing the checkpoint
    assert an.read_anneal(out)["n_done"] == 1 and temp_path(out / "anneal.h5").exists()
    res = CliRunner().invoke(main, ["anneal", str(cfg_path), "--out", str(out), "--resume",
                                    "--quiet", "--json"])
    assert res.exit_code == 0, res.output
    resumed = an.Annealer.open(out)
    _assert_same(resumed, straight)
    assert not temp_path(out / "anneal.h5").exists()


def test_resume_refuses_a_changed_config(tiny_run, tmp_path):
    out = tmp_path / "c"
    an.Annealer.create(_cfg(), out).run(max_temperatures=1)
    with pytest.raises(CheckpointMismatchError, match=r"anneal.patience: 2 -> 3"):
        an.Annealer.open(out, _cfg(patience=3))


# --- bad configurations: one-line errors ------------------------------------------------------

@pytest.mark.parametrize("change, message", [
    ({"anneal": {"patiense": 3}}, "unknown key 'patiense' in [anneal]; did you mean 'patience'?"),
    ({"aneal": {}}, ("unknown section [aneal] in an anneal configuration; did you mean "
                     "'anneal'?")),
    ({"anneal": {"t_start": 0.01, "t_end": 3.0}}, ("anneal.t_start = 0.01 is not above "
                                                   "anneal.t_end = 3.0")),
    ({"anneal": {"temperatures": [1.0, 2.0]}}, "strictly decreasing"),
    ({"anneal": {"burn_in": 4}}, "anneal.burn_in = 4 leaves no trajectory"),
    ({"anneal": {"n_validation": 0}}, ("anneal.n_validation = 0 is out of range; "
                                       "expected a positive integer")),
    ({"anneal": {"patience": 0}}, "anneal.patience = 0 is out of range"),
    ({"anneal": {"start": "params"}}, "needs anneal.params"),
    ({"anneal": {"validation_pool": "web"}}, "one of auto, mnist, embedded"),
    ({"sampler": {"name": "rehmc"}}, "no sampler named 'rehmc'"),
    ({"sampler": {"n_leapfrg": 5}}, "did you mean 'n_leapfrog'?"),
    ({"sampler": {"step_size": -1.0}}, "step_size = -1.0; expected dt > 0"),
])
def test_bad_config_one_line_errors(change, message):
    raw = {k: dict(v) for k, v in TINY.items()}
    for section, table in change.items():
        raw.setdefault(section, {}).update(table)
    with pytest.raises(ThermonetError) as err:       # ConfigError, MissingPluginError, ...
        an.resolve_config(raw)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_cli_errors_are_one_line(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text(TINY_TOML.replace("patience = 2", "patiense = 2"))
    res = CliRunner().invoke(main, ["anneal", str(bad), "--out", str(tmp_path / "x")])
    assert res.exit_code == 1
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "did you mean 'patience'" in lines[0]
    good = tmp_path / "good.toml"
    good.write_text(TINY_TOML)
    res = CliRunner().invoke(main, ["anneal", str(good), "--out", str(tmp_path / "none"),
                                    "--resume"])
    assert res.exit_code == 1 and "holds no anneal" in res.output
    assert not Path(tmp_path / "none" / an.ANNEAL_H5).exists()


def test_existing_anneal_is_not_overwritten(tiny_run, tmp_path):
    out, _ = tiny_run
    before = (out / an.ANNEAL_H5).read_bytes()
    with pytest.raises(ConfigError, match="already holds an anneal"):
        an.Annealer.create(_cfg(), out)
    assert (out / an.ANNEAL_H5).read_bytes() == before


# --- the sample configurations -----------------------------------------------------------------

SAMPLE_RUNS = Path(__file__).resolve().parents[2] / "sample_runs"


@pytest.mark.parametrize("name", ["anneal_M3_D500", "anneal_M3_D500_quick"])
def test_sample_anneal_configs_are_valid(name):
    cfg = an.load_config(SAMPLE_RUNS / f"{name}.toml")
    assert cfg["data"]["name"] == "D500" and cfg["architecture"]["name"] == "M3"
    t = an.schedule_of(cfg)
    assert t[0] >= 0.3 and t[-1] == 1e-3 and np.all(np.diff(t) < 0)
    assert cfg["anneal"]["n_validation"] == 1000


def test_sample_robot_arm_anneal_config_is_valid():
    cfg = an.load_config(SAMPLE_RUNS / "anneal_robot_arm.toml")
    assert cfg["data"]["name"] == "robot-arm" and cfg["architecture"]["name"] == "mlp-regression"
    assert cfg["architecture"]["noise_std"] == 0.05 and cfg["anneal"]["n_validation"] == 50


def test_docs_list_every_anneal_key_with_its_default():
    import re

    text = (Path(__file__).resolve().parents[2] / "docs" / "annealing.md").read_text()
    rows = dict(re.findall(r"^\| `(\w+)` \| (.+?) \|", text, flags=re.MULTILINE))
    assert set(an.ANNEAL_KEYS) <= set(rows)
    for key, (default, *_rest) in an.ANNEAL_KEYS.items():
        shown = rows[key].strip("`")
        if isinstance(default, str):
            assert shown == f'"{default}"', key
        elif isinstance(default, list):
            assert shown == "[]", key
        else:
            assert float(shown) == default, key


def test_start_from_a_minimum_or_a_parameter_file(tmp_path, mnist_dir):
    from thermonet.data import load_dataset
    from thermonet.minimisers.rmin import RMin
    from thermonet.priors import BoxPrior
    from thermonet.registry import get_architecture

    raw = {k: dict(v) for k, v in TINY.items()}
    raw["anneal"]["start"] = "minimum"
    raw["minimiser"] = {"name": "rmin", "max_steps": 15}
    ann = an.Annealer.create(an.resolve_config(raw), tmp_path / "m")
    arch = get_architecture("M1")
    draw = arch.initial_draw(np.random.default_rng(np.random.SeedSequence(3).spawn(3)[0]))
    pot = arch.potential(load_dataset("D50"))
    ref = RMin(max_steps=15).minimise(pot, draw, prior=BoxPrior.for_architecture(arch))
    np.testing.assert_array_equal(ann.chain.theta, ref.theta)
    assert ann.chain.energy == pytest.approx(ref.energy, rel=1e-12)
    assert ref.energy < pot.energy(draw)
    np.save(tmp_path / "w.npy", draw)
    raw["anneal"].update(start="params", params=str(tmp_path / "w.npy"))
    ann = an.Annealer.create(an.resolve_config(raw), tmp_path / "p")
    np.testing.assert_array_equal(ann.chain.theta, draw)


def test_cli_progress_lines_and_summary(tmp_path, mnist_dir):
    cfg = tmp_path / "two.toml"
    cfg.write_text(TINY_TOML.replace("n_temperatures = 6", "n_temperatures = 2"))
    res = CliRunner().invoke(main, ["anneal", str(cfg), "--out", str(tmp_path / "o")])
    assert res.exit_code == 0, res.output
    assert "T 1/2 = 3  acc" in res.output and "T 2/2 = 0.01  acc" in res.output
    s = json.loads((tmp_path / "o" / an.ANNEAL_JSON).read_text())
    assert s["status"] == "finished" and s["n_temperatures_done"] == 2
    assert f"test           error {100 * s['best']['test']['error']:.2f}%" in res.output
    # an anneal that is already complete resumes to its summary without running again
    res2 = CliRunner().invoke(main, ["anneal", str(cfg), "--out", str(tmp_path / "o"),
                                     "--resume", "--json"])
    assert res2.exit_code == 0 and json.loads(res2.stdout)["best"] == s["best"]


# --- regression sets: validation cases held out of the training set -------------------------

ARM = {
    "run": {"seed": 5},
    "data": {"name": "robot-arm"},
    "architecture": {"name": "mlp-regression", "hidden": [4], "noise_std": 0.05,
                     "hierarchical": False},
    "anneal": {"t_start": 20.0, "t_end": 0.05, "n_temperatures": 5, "n_trajectories": 6,
               "burn_in": 2, "patience": 2, "n_validation": 30, "adapt_every": 3},
    "sampler": {"n_leapfrog": 20},
}


def _arm_cfg(**anneal):
    raw = {k: dict(v) for k, v in ARM.items()}
    raw["anneal"].update(anneal)
    return an.resolve_config(raw)


def _arm_outputs(theta, x):
    """An independent NumPy 2-4-2 tanh network (weights in the architecture's order)."""
    w1, b1 = theta[:8].reshape(4, 2), theta[8:12]
    w2, b2 = theta[12:20].reshape(2, 4), theta[20:22]
    return np.tanh(x @ w1.T + b1) @ w2.T + b2


def test_regression_validation_is_held_out_of_the_training_set():
    from thermonet.data import load_data

    train = load_data("robot-arm").train
    seed = np.random.SeedSequence(5).spawn(3)[2]
    val, rest = an.hold_out(train, 30, seed)
    assert len(val) == 30 and len(rest) == len(train) - 30
    assert np.intersect1d(val.indices, rest.indices).size == 0
    np.testing.assert_array_equal(np.sort(np.concatenate([val.indices, rest.indices])),
                                  np.sort(train.indices))
    rows = {int(i): r for r, i in enumerate(train.indices)}
    np.testing.assert_array_equal(val.y, train.y[[rows[int(i)] for i in val.indices]])
    assert val.provenance["pool"] == "train" and val.task == "regression"
    again, _ = an.hold_out(train, 30, np.random.SeedSequence(5).spawn(3)[2])
    np.testing.assert_array_equal(again.indices, val.indices)          # seeded
    with pytest.raises(ThermonetError, match=r"n_validation = 200 .* expected 1 <= "):
        an.hold_out(train, 200, seed)
    with pytest.raises(ConfigError, match="use auto or train"):
        an.hold_out(train, 30, seed, "mnist")
    d50 = load_data("D50").train
    with pytest.raises(ConfigError, match="expected a multiple of 10"):
        an.make_validation(d50, 55, seed)
    with pytest.raises(ConfigError, match="use auto, mnist or embedded"):
        an.make_validation(d50, 50, seed, "train")


@pytest.fixture(scope="module")
def arm_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("anneal_arm") / "arm"
    ann = an.Annealer.create(_arm_cfg(), out).run()
    return out, ann


def test_regression_anneal_numbers_reproduce_independently(arm_run):
    """The robot arm: squared errors (summed over both outputs, mean over cases) and the
    likelihood energies -ln p(D|w) of the returned vector, recomputed with NumPy."""
    out, ann = arm_run
    s = ann.s
    assert ann.is_done and s.validation.task == "regression"
    assert len(s.split.train) == 170 and len(s.test) == 200
    theta = an.read_anneal(out)["theta"]
    np.testing.assert_array_equal(theta, ann.best_theta)
    tau = 1.0 / 0.05 ** 2

    def sq(data):
        return float(np.mean(np.sum((_arm_outputs(theta, data.x) - data.y) ** 2, axis=1)))

    def nll(data):
        r = _arm_outputs(theta, data.x) - data.y
        return tau * 0.5 * np.sum(r * r) + 0.5 * r.size * np.log(2 * np.pi / tau)

    v = s.validation
    assert ann.best["val_error"] == pytest.approx(sq(v), rel=1e-12)
    assert ann.best["val_energy_per_point"] == pytest.approx(nll(v) / len(v), rel=1e-12)
    assert ann.best["train_error"] == pytest.approx(sq(s.split.train), rel=1e-12)
    assert ann.best["train_energy"] == pytest.approx(nll(s.split.train), rel=1e-12)
    assert ann.best["test"]["error"] == pytest.approx(sq(s.test), rel=1e-12)
    assert ann.best["test"]["energy_per_point"] == pytest.approx(nll(s.test) / len(s.test),
                                                                 rel=1e-12)
    assert ann.best["val_error"] == min(ann.table["val_error_min"])
    summary = json.loads((out / an.ANNEAL_JSON).read_text())
    assert summary["error_kind"] == "squared" and summary["validation"]["pool"] == "train"


def test_regression_anneal_resumes_bit_for_bit(arm_run, tmp_path):
    _, straight = arm_run
    out = tmp_path / "r"
    an.Annealer.create(_arm_cfg(), out).run(max_temperatures=2)
    resumed = an.Annealer.open(out, _arm_cfg()).run()
    _assert_same(resumed, straight)


def test_regression_anneal_cli_prints_squared_errors(tmp_path):
    import tomli_w

    cfg = tmp_path / "arm.toml"
    cfg.write_bytes(tomli_w.dumps(ARM).encode())
    res = CliRunner().invoke(main, ["anneal", str(cfg), "--out", str(tmp_path / "a")])
    assert res.exit_code == 0, res.output
    assert "validation 30 cases (train pool)" in res.output
    test_line = next(ln for ln in res.output.splitlines() if ln.startswith("test "))
    assert "%" not in test_line and "robot-arm-test" in test_line
