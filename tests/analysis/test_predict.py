"""``thermonet predict`` and ``RunRecord.predict``: the posterior predictive of a run's stored
samples on new data, checked against an independent NumPy computation from the stored
samples (a tiny regression run on a user's CSV file, standardised, with a sampled noise
level; a tiny classifier on D50), its files and its one-line refusals."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from click.testing import CliRunner
from scipy.stats import norm

from tests import reference
from tests.data.test_user_data import CFG, X, Y, write_csv
from tests.plotting.test_regression_plot import forward
from thermonet import config as cfgmod
from thermonet.cli import main
from thermonet.errors import ThermonetError
from thermonet.io.trace import read_trace

CLASSIFIER = """
[run]
seed = 4
n_iterations = 6
sample_every = 1
discard = 0.34
[data]
name = "D50"
test = "official"
[architecture]
name = "mlp"
hidden = [4]
[init]
minimise = false
burn_in = [1]
[sampler]
name = "hmc"
n_leapfrog = 4
step_size = 0.01
[ladder]
temperatures = [1.0, 2.0]
n_trajectories = 1
"""


def _make(tmp, toml, name):
    from thermonet.runner import Run, detach_log

    p = tmp / f"{name}.toml"
    p.write_text(toml)
    out = tmp / name
    Run.create(cfgmod.load(p), out).run()
    detach_log()
    return out


@pytest.fixture(scope="module")
def reg_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("predict_reg")
    (tmp / "sub").mkdir()
    write_csv(tmp / "sub" / "d.csv", ["a", "b", "c", "u", "v"], np.hstack([X, Y]).tolist())
    return _make(tmp, CFG, "r")


@pytest.fixture(scope="module")
def cls_run(tmp_path_factory):
    return _make(tmp_path_factory.mktemp("predict_cls"), CLASSIFIER, "c")


def _kept_samples(run_dir, first_iteration, slot=0, chains=1):
    """The trace, and the iteration, chain and parameters of every kept network of the
    ``chains`` slots from ``slot`` on (a one-rung run's chains), chain after chain."""
    tr = read_trace(run_dir, samples=True)
    keep = tr["samples_iteration"] >= first_iteration
    its, theta = tr["samples_iteration"][keep], tr["samples_theta"][keep]
    slots = range(slot, slot + chains)
    return (tr, np.concatenate([its for _ in slots]),
            np.concatenate([np.full(its.size, c) for c in slots]),
            np.concatenate([theta[:, c] for c in slots]))


def _invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def _one_line(res, *words):
    assert res.exit_code == 1, res.output
    (line,) = res.output.strip().splitlines()
    assert "Traceback" not in res.output
    for w in words:
        assert w in line, line
    return line


# --- regression -------------------------------------------------------------------------------

def test_regression_predictive_equals_numpy(reg_run, tmp_path):
    """Every per-case number and score from the stored samples, computed independently: the
    3-4-2 tanh network in NumPy, the noise level sqrt(T/tau) from the trace, the mixture's
    CDF from scipy."""
    import thermonet as tn

    # new cases: the file's rows in another column order, with an unused extra column
    new = write_csv(tmp_path / "new.csv", ["v", "extra", "c", "a", "u", "b"],
                    np.column_stack([Y[:, 1], np.zeros(40), X[:, 2], X[:, 0], Y[:, 0],
                                     X[:, 1]]).tolist())
    rec = tn.open_run(reg_run)
    pred = rec.predict(new, quantiles=(0.1, 0.5, 0.9))
    # discard 0.34 of 6 iterations; the run's 4 chains (run.chains) of 4 networks each
    tr, its, chain, thetas = _kept_samples(reg_run, 3, chains=4)
    assert pred.n_samples == len(thetas) == 4 * 4 and pred.temperature == 1.0
    st = rec.data().train.provenance["standardisation"]
    xz = (X - st["x_mean"]) / np.array(st["x_std"])
    f = np.array([forward(th, xz, st) for th in thetas])            # (S, n, 2), file units
    rows = np.searchsorted(tr["iteration"], its)
    tau = tr["hyper_k"][rows, chain, -1]                 # the noise precision: the last one
    sd = np.sqrt(1.0 / tau)[:, None, None] * np.array(st["y_std"])  # (S, 1, 2)
    a = pred.arrays
    assert np.allclose(a["f_mean"], f.mean(0), rtol=1e-10, atol=1e-12)
    assert np.allclose(a["f_sd"], f.std(0), rtol=1e-8, atol=1e-12)
    assert np.allclose(a["f_quantiles"], np.quantile(f, [0.1, 0.5, 0.9], axis=0), rtol=1e-10)
    assert np.allclose(a["y_sd"], np.sqrt((sd ** 2).mean(0) + f.var(0)), rtol=1e-10)
    for i, q in enumerate((0.1, 0.5, 0.9)):
        cdf = norm.cdf((a["y_quantiles"][i][None] - f) / sd).mean(0)
        assert np.allclose(cdf, q, atol=1e-9)
    assert np.allclose(a["targets"], Y, atol=1e-12)
    se = ((f.mean(0) - Y) ** 2).sum(1)
    assert pred.metrics["squared_error"]["mean"] == pytest.approx(se.mean(), rel=1e-10)
    assert pred.metrics["squared_error"]["se"] == pytest.approx(
        se.std(ddof=1) / math.sqrt(40), rel=1e-8)
    dens = norm.pdf(Y[None], f, sd).prod(axis=2).mean(0)             # (n,)
    assert pred.metrics["log_loss"]["mean"] == pytest.approx(-np.log(dens).mean(), rel=1e-10)
    assert set(pred.metrics) == {"squared_error", "log_loss"}


def test_regression_cli_files_and_json(reg_run, tmp_path):
    import arviz as az  # noqa: F401  (xarray for the .nc file)
    import xarray as xr

    new = write_csv(tmp_path / "new.csv", ["a", "b", "c", "u", "v"], np.hstack([X, Y]).tolist())
    res = _invoke("predict", reg_run, new, "--json", "--out", tmp_path / "p.csv")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["task"] == "regression" and doc["n_cases"] == 40 and doc["has_targets"]
    assert set(doc["metrics"]) == {"squared_error", "log_loss"}
    assert set(doc["metrics"]["squared_error"]) == {"mean", "se"}
    import thermonet as tn

    pred = tn.open_run(reg_run).predict(new)
    assert doc["metrics"]["squared_error"]["mean"] == pytest.approx(
        pred.metrics["squared_error"]["mean"], rel=1e-12)
    table = np.genfromtxt(tmp_path / "p.csv", delimiter=",", names=True)
    assert np.allclose(table["f_mean_u"], pred.arrays["f_mean"][:, 0], rtol=1e-15)
    assert np.allclose(table["y_q095_v"], pred.arrays["y_quantiles"][2][:, 1], rtol=1e-15)
    res = _invoke("predict", reg_run, new, "--out", tmp_path / "p.npz")
    assert res.exit_code == 0 and "squared error:" in res.output and "±" in res.output
    with np.load(tmp_path / "p.npz") as z:
        assert np.array_equal(z["f_sd"], pred.arrays["f_sd"])
        assert json.loads(str(z["summary"]))["n_samples"] == 4 * 4    # 4 chains
    assert _invoke("predict", reg_run, new, "--out", tmp_path / "p.nc").exit_code == 0
    with xr.open_dataset(tmp_path / "p.nc") as ds:
        assert np.array_equal(ds["y_mean"].values, pred.arrays["y_mean"])
        assert list(ds["output"].values) == ["u", "v"]


def test_inference_data_carries_the_posterior_predictive(reg_run, tmp_path):
    pytest.importorskip("arviz")
    import thermonet as tn

    new = write_csv(tmp_path / "new.csv", ["a", "b", "c", "u", "v"], np.hstack([X, Y]).tolist())
    rec = tn.open_run(reg_run)
    idata = rec.to_inference_data(new)
    _, _, _, thetas = _kept_samples(reg_run, 3, chains=4)
    st = rec.data().train.provenance["standardisation"]
    f = np.array([forward(th, (X - st["x_mean"]) / np.array(st["x_std"]), st) for th in thetas])
    pp = idata.posterior_predictive["f"]
    # the run's 4 chains are 4 ArviZ chains of 4 draws each
    assert pp.dims == ("chain", "draw", "case", "output") and pp.shape == (4, 4, 40, 2)
    assert np.allclose(pp.values.reshape(16, 40, 2), f, rtol=1e-10, atol=1e-12)
    assert np.allclose(idata.observed_data["y"].values, Y, atol=1e-12)
    assert list(idata.posterior["temperature"].values) == ["T=1"]


def test_regression_without_targets_predicts_only(reg_run, tmp_path):
    import thermonet as tn

    new = write_csv(tmp_path / "x.csv", ["a", "b", "c"], X[:5].tolist())
    pred = tn.open_run(reg_run).predict(new)
    assert pred.metrics == {} and "targets" not in pred.arrays
    assert pred.arrays["f_mean"].shape == (5, 2)
    assert "no targets" in pred.describe()


def test_regression_bad_input_is_one_line(reg_run, tmp_path):
    no_c = write_csv(tmp_path / "no_c.csv", ["a", "b", "u", "v"],
                     np.hstack([X[:, :2], Y]).tolist())
    _one_line(_invoke("predict", reg_run, no_c), "no_c.csv", "['a', 'b', 'c']",
              "it has ['a', 'b', 'u', 'v']")
    images = tmp_path / "img.npz"
    np.savez(images, images=np.zeros((3, 28, 28), np.uint8), labels=np.zeros(3, np.int64))
    _one_line(_invoke("predict", reg_run, images), "holds images", "regression")
    _one_line(_invoke("predict", reg_run, tmp_path / "absent.csv"), "does not exist")
    _one_line(_invoke("predict", reg_run, no_c, "--temperature", "2"),
              "temperature 2 is not on the ladder", "T=1")
    _one_line(_invoke("predict", reg_run, no_c, "--out", tmp_path / "p.txt"),
              "expected .csv, .npz or .nc")


# --- classification ---------------------------------------------------------------------------

def _probabilities(thetas, x):
    lp = []
    for th in thetas:
        z = reference.logits(th, [256, 4, 10], x)
        lp.append(z - np.log(np.exp(z - z.max(1, keepdims=True)).sum(1, keepdims=True))
                  - z.max(1, keepdims=True))
    return np.exp(np.array(lp)).mean(0)


def test_classification_predictive_equals_numpy(cls_run, tmp_path):
    import thermonet as tn
    from thermonet.data import official_test

    test = official_test()
    x, y = test.x[:60], test.y[:60]
    data = tmp_path / "cases.npz"
    np.savez(data, x=x, labels=y)
    rec = tn.open_run(cls_run)
    tr, _, _, _ = _kept_samples(cls_run, rec.first_kept_iteration)
    first = int(tr["iteration"][math.floor(0.34 * len(tr["iteration"]))])
    assert rec.first_kept_iteration == first
    for temperature, slot in ((None, 0), (2.0, 1)):
        pred = rec.predict(data, temperature)
        thetas = _kept_samples(cls_run, first, slot)[3]
        p = _probabilities(thetas, x)
        assert pred.n_samples == len(thetas) > 0
        assert np.allclose(pred.arrays["probabilities"], p, rtol=1e-9, atol=1e-15)
        assert np.array_equal(pred.arrays["predicted"], np.argmax(p, axis=1))
        onehot = np.eye(10)[y]
        for name, per_case in (("log_loss", -np.log(p[np.arange(60), y])),
                               ("error_rate", (np.argmax(p, 1) != y).astype(float)),
                               ("brier_score", ((p - onehot) ** 2).sum(1))):
            assert pred.metrics[name]["mean"] == pytest.approx(per_case.mean(), rel=1e-9)
            assert pred.metrics[name]["se"] == pytest.approx(
                per_case.std(ddof=1) / math.sqrt(60), rel=1e-7)


def test_classification_reads_idx_and_named_sets(cls_run, tmp_path):
    """An IDX image file (labels from the labels-idx1 file beside it) is preprocessed as the
    package preprocesses MNIST; the embedded official test set is read by name."""
    import thermonet as tn
    from thermonet.data import preprocess

    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(7, 28, 28), dtype=np.uint8)
    labels = rng.integers(0, 10, size=7).astype(np.uint8)
    img = tmp_path / "my-images-idx3-ubyte"
    img.write_bytes(b"\x00\x00\x08\x03" + np.array([7, 28, 28], ">i4").tobytes()
                    + images.tobytes())
    (tmp_path / "my-labels-idx1-ubyte").write_bytes(
        b"\x00\x00\x08\x01" + np.array([7], ">i4").tobytes() + labels.tobytes())
    npz = tmp_path / "same.npz"
    np.savez(npz, x=preprocess(images), labels=labels.astype(np.int64))
    rec = tn.open_run(cls_run)
    a, b = rec.predict(img), rec.predict(npz)
    assert np.array_equal(a.arrays["probabilities"], b.arrays["probabilities"])
    assert np.array_equal(a.arrays["targets"], labels)
    res = _invoke("predict", cls_run, "mnist-t10k", "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["n_cases"] == 10000 and set(doc["metrics"]) == {"log_loss", "error_rate",
                                                                "brier_score"}


def test_classification_bad_input_is_one_line(cls_run, tmp_path):
    table = write_csv(tmp_path / "t.csv", ["a", "b"], [[1.0, 2.0]])
    _one_line(_invoke("predict", cls_run, table), "regression run", "classifier")
    odd = tmp_path / "odd.npz"
    np.savez(odd, images=np.zeros((2, 20, 20), np.uint8))
    _one_line(_invoke("predict", cls_run, odd), "(2, 20, 20)", "expected (n, 28, 28)")
    wrong = tmp_path / "wrong.npz"
    np.savez(wrong, x=np.zeros((2, 5)))
    _one_line(_invoke("predict", cls_run, wrong), "width 5", "takes 256")
    _one_line(_invoke("predict", cls_run, "test", "-T", "0.5"), "not on the ladder",
              "T=1, T=2")
    with pytest.raises(ThermonetError, match="not on the ladder"):
        import thermonet as tn

        tn.open_run(cls_run).predict("test", 1.5)


def test_readme_open_run_example_runs(cls_run, capsys):
    """The README's ``tn.open_run`` block runs as written on a finished classifier run (its
    path put in for ``runs/quickstart``) and prints the error rate that ``predict`` reports."""
    import re
    from pathlib import Path

    import thermonet as tn

    text = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    (block,) = re.findall(r"```py\n(.*?)```", text, flags=re.S)
    assert block.count('"runs/quickstart"') == 1
    exec(compile(block.replace('"runs/quickstart"', repr(str(cls_run))), "README.md", "exec"),
         {"tn": tn})
    out = capsys.readouterr().out
    rec = tn.open_run(cls_run)
    expected = rec.predict("mnist-t10k").metrics["error_rate"]
    assert out == f"{rec.verdict}\n{expected}\n"
    assert 0.0 < expected["mean"] < 1.0 and expected["se"] > 0.0
