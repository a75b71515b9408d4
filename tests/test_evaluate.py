"""``thermonet evaluate`` and parameter-file reading, on known parameter vectors."""

from __future__ import annotations

import json
import math

import h5py
import numpy as np
import pytest
from click.testing import CliRunner

from thermonet.architectures.mlp import M1, M3
from thermonet.cli import main
from thermonet.errors import ParameterFileError
from thermonet.params import load_params, save_params

KEYS = {"n_params", "train_energy", "train_energy_per_point", "test_energy",
        "test_energy_per_point", "train_error", "test_error", "max_abs_grad", "in_prior_box",
        "log_prior_volume"}


def _invoke(*args):
    result = CliRunner().invoke(main, list(args))
    return result


def test_evaluate_json_on_zero_vector(tmp_path):
    """w = 0: uniform prediction, so E = N ln 10 on both sets, gradient 0 on the balanced
    training set, argmax ties pick class 0 (error = 1 - fraction of zeros), inside the box."""
    path = save_params(tmp_path / "zero.npy", np.zeros(M3().n_params))
    res = _invoke("evaluate", "--arch", "M3", "--data", "D500", "--params", str(path),
                  "--test", "official", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert KEYS <= set(out)
    assert out["n_params"] == 13970
    assert out["train_energy"] == pytest.approx(500 * math.log(10), rel=1e-12)
    assert out["train_energy_per_point"] == pytest.approx(math.log(10), rel=1e-12)
    assert out["test_energy"] == pytest.approx(10000 * math.log(10), rel=1e-12)
    assert out["train_error"] == pytest.approx(0.9)
    from thermonet.data import load_data

    test_y = load_data("D500", test="official").test.y
    assert out["test_error"] == pytest.approx(np.mean(test_y != 0))
    assert out["max_abs_grad"] < 1e-10
    assert out["in_prior_box"] is True
    assert out["log_prior_volume"] == pytest.approx(28960.436, abs=5e-4)
    assert out["test_kind"] == "official"


def test_evaluate_paper_json_format_and_bias_vector(tmp_path, d50):
    """A JSON walker file {"x": [...], "pe": ..} as the paper's code wrote them; weights zero
    and output bias b give E = -sum log softmax(b)[y] exactly."""
    arch = M1()
    theta = np.zeros(arch.n_params)
    b = np.linspace(-1, 2, 10)
    theta[-10:] = b
    path = tmp_path / "localmin_test.txt"
    path.write_text(json.dumps({"x": theta.tolist(), "pe": 0.0, "ke": 0.0, "p": [0.0]}) + "\n")
    res = _invoke("evaluate", "--arch", "M1", "--data", "D50", "--params", str(path),
                  "--test", "official", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    logp = b - np.log(np.exp(b).sum())
    assert out["train_energy"] == pytest.approx(-logp[d50.y].sum(), rel=1e-12)
    assert out["train_error"] == pytest.approx(np.mean(d50.y != 9))   # argmax is class 9


def test_evaluate_reports_outside_box_and_text_output(tmp_path):
    theta = np.zeros(M3().n_params)
    theta[0] = 100.0                            # half-width of layer 1 is 50/sqrt(257) = 3.1
    path = save_params(tmp_path / "w.json", theta)
    res = _invoke("evaluate", "--arch", "M3", "--data", "D50", "--params", str(path),
                  "--test", "official")
    assert res.exit_code == 0, res.output
    assert "in prior box   no (1 outside)" in res.output
    assert "log prod sigma 28960.436" in res.output
    assert "mnist" in res.output.lower()       # says which test set was used


def test_evaluate_hdf5_with_index(tmp_path):
    arch = M3()
    with h5py.File(tmp_path / "ck.h5", "w") as fh:
        fh["state/theta"] = np.zeros((3, arch.n_params))
    res = _invoke("evaluate", "--arch", "M3", "--data", "D50", "--params",
                  str(tmp_path / "ck.h5"), "--test", "official", "--json")
    assert res.exit_code != 0 and "holds 3 parameter vectors" in res.output
    res = _invoke("evaluate", "--arch", "M3", "--data", "D50", "--params",
                  str(tmp_path / "ck.h5"), "--index", "2", "--test", "official", "--json")
    assert res.exit_code == 0, res.output


@pytest.mark.parametrize("content,match", [
    (np.zeros(100), "holds 100 parameters; expected 13970"),
    (np.full(13970, np.nan), "non-finite"),
])
def test_bad_parameter_files_get_one_line_errors(tmp_path, content, match):
    path = tmp_path / "bad.npy"
    np.save(path, content)
    res = _invoke("evaluate", "--arch", "M3", "--data", "D50", "--params", str(path))
    assert res.exit_code == 1
    assert match in res.output and str(path) in res.output
    assert "Traceback" not in res.output
    assert len(res.output.strip().splitlines()) == 1


def test_unreadable_parameter_files(tmp_path):
    n = M3().n_params
    (tmp_path / "a.json").write_text("{not json")
    (tmp_path / "b.json").write_text(json.dumps({"w": [1, 2]}))
    (tmp_path / "c.h5").write_bytes(b"not an hdf5 file")
    (tmp_path / "d.npy").write_bytes(b"garbage")
    with pytest.raises(ParameterFileError, match="not valid JSON"):
        load_params(tmp_path / "a.json", n)
    with pytest.raises(ParameterFileError, match=r"no key \"x\" \(found \['w'\]\)"):
        load_params(tmp_path / "b.json", n)
    with pytest.raises(ParameterFileError, match="not a readable HDF5"):
        load_params(tmp_path / "c.h5", n)
    with pytest.raises(ParameterFileError, match="cannot read"):
        load_params(tmp_path / "d.npy", n)
    with pytest.raises(ParameterFileError, match="does not exist"):
        load_params(tmp_path / "nope.npy", n)


def test_walker_line_with_label_is_accepted(tmp_path):
    theta = np.arange(10690) * 1e-5
    (tmp_path / "w.txt").write_text("config " + json.dumps({"x": theta.tolist(), "p": -1.0}))
    np.testing.assert_array_equal(load_params(tmp_path / "w.txt", 10690), theta)


def test_unknown_architecture_is_one_line_error(tmp_path):
    path = save_params(tmp_path / "z.npy", np.zeros(5))
    res = _invoke("evaluate", "--arch", "M7", "--data", "D50", "--params", str(path))
    assert res.exit_code == 1
    assert "no architecture named 'M7'; available:" in res.output and "M3" in res.output
