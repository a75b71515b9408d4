"""A user's regression data from CSV/NPZ files: columns, splits, standardisation in the
file's units, one-line errors for bad files, and the configuration's recorded checksum."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from thermonet import config as cfgmod
from thermonet.data import load_file_split, to_original_units
from thermonet.errors import ConfigError, DataError, ThermonetError
from thermonet.io import trace as iotrace

RNG = np.random.default_rng(11)
X = RNG.normal(size=(40, 3)) * [1.0, 5.0, 0.1] + [0.0, 10.0, -2.0]
Y = np.stack([X[:, 0] + 0.1 * X[:, 1], np.sin(X[:, 2])], axis=1) * 3.0 + 7.0


def write_csv(path, header, rows):
    path.write_text(",".join(header) + "\n"
                    + "".join(",".join(f"{v!r}" for v in r) + "\n" for r in rows))
    return path


@pytest.fixture
def csv_file(tmp_path):
    return write_csv(tmp_path / "d.csv", ["a", "b", "c", "u", "v"], np.hstack([X, Y]).tolist())


def test_csv_columns_and_fraction_split(csv_file):
    s = load_file_split(csv_file, outputs=["u", "v"], test_fraction=0.25, seed=4)
    assert (len(s.train), len(s.test)) == (30, 10)
    rows = np.concatenate([s.train.indices, s.test.indices])
    assert sorted(rows.tolist()) == list(range(40))      # a partition of the file's rows
    assert np.array_equal(s.train.x, X[s.train.indices])  # exact: repr round-trips floats
    assert np.array_equal(s.test.y, Y[s.test.indices])
    again = load_file_split(csv_file, outputs=["u", "v"], test_fraction=0.25, seed=4)
    assert np.array_equal(again.test.indices, s.test.indices)
    other = load_file_split(csv_file, outputs=["u", "v"], test_fraction=0.25, seed=5)
    assert not np.array_equal(other.test.indices, s.test.indices)
    picked = load_file_split(csv_file, inputs=["c", "a"], outputs=["v"], seed=4)
    assert np.array_equal(picked.train.x, X[picked.train.indices][:, [2, 0]])
    assert picked.train.y.shape == (32, 1)


def test_csv_with_a_byte_order_mark_and_crlf_lines(tmp_path):
    p = tmp_path / "w.csv"
    p.write_bytes(b"\xef\xbb\xbfx,u\r\n1,2\r\n3,4\r\n5,6\r\n7,8\r\n# a comment\r\n9,10\r\n")
    s = load_file_split(p, outputs=["u"], split_column="", test_fraction=0.2, seed=0)
    rows = np.concatenate([s.train.x[:, 0], s.test.x[:, 0]])
    assert sorted(rows.tolist()) == [1, 3, 5, 7, 9] and len(s.test) == 1


def test_npz_arrays_test_file_and_split_column(tmp_path):
    np.savez(tmp_path / "tr.npz", x=X[:30], y=Y[:30], flag=(np.arange(30) % 3 == 0) * 1)
    np.savez(tmp_path / "te.npz", x=X[30:], y=Y[30:])
    s = load_file_split(tmp_path / "tr.npz", inputs=["x"], outputs=["y"],
                        test_path=tmp_path / "te.npz")
    assert np.array_equal(s.train.x, X[:30]) and np.array_equal(s.test.y, Y[30:])
    col = load_file_split(tmp_path / "tr.npz", inputs=["x[1]"], outputs=["y[0]"],
                          split_column="flag")
    assert np.array_equal(col.test.indices, np.arange(0, 30, 3))
    assert np.array_equal(col.train.x[:, 0], X[:30][np.arange(30) % 3 != 0, 1])


def test_standardisation_by_training_set_and_back(csv_file):
    s = load_file_split(csv_file, outputs=["u", "v"], standardise=True, seed=1)
    xtr, ytr = X[s.train.indices], Y[s.train.indices]
    assert np.allclose(s.train.x.mean(axis=0), 0, atol=1e-12)
    assert np.allclose(s.train.x.std(axis=0), 1, atol=1e-12)
    assert np.allclose(s.test.x, (X[s.test.indices] - xtr.mean(0)) / xtr.std(0), atol=1e-12)
    f = RNG.normal(size=s.test.y.shape)
    f_orig, y_orig = to_original_units(s.test, f)
    assert np.allclose(y_orig, Y[s.test.indices], atol=1e-12)
    assert np.allclose(f_orig, f * ytr.std(0) + ytr.mean(0), atol=1e-12)


def test_standardising_values_near_the_float_limit_keeps_the_column(tmp_path):
    # x1 around 1e307: sum(x**2) overflowed, sd became inf and x1 became 0 for every case
    big = np.hstack([X[:, :1] * 1e306 + 1e307, X[:, 1:2], Y[:, :1]])
    p = write_csv(tmp_path / "big.csv", ["x1", "x2", "y"], big.tolist())
    with np.errstate(all="raise"):            # and no NumPy overflow warning either
        s = load_file_split(p, outputs=["y"], standardise=True, seed=1)
    assert np.allclose(s.train.x.mean(axis=0), 0, atol=1e-9)
    assert np.allclose(s.train.x.std(axis=0), 1, atol=1e-9)
    xtr = big[s.train.indices, 0] / 1e307          # the reference, computed without overflow
    assert np.allclose(s.train.x[:, 0], (xtr - xtr.mean()) / xtr.std(), atol=1e-9)


def test_a_column_that_cannot_be_standardised_is_refused(tmp_path):
    # centring overflows: -1.7e308 minus a mean near +1.3e308 is -inf
    col = [1.7e308] * 9 + [-1.7e308]
    p = write_csv(tmp_path / "huge.csv", ["x1", "x2", "y"],
                  [[c, float(k), float(k)] for k, c in enumerate(col * 2)])
    with pytest.raises(DataError) as exc:
        load_file_split(p, outputs=["y"], standardise=True, seed=1)
    msg = str(exc.value)
    assert "'x1'" in msg and "cannot be standardised" in msg and "standardise = false" in msg
    s = load_file_split(p, outputs=["y"], standardise=False, seed=1)    # without: fine
    assert np.all(np.isfinite(s.train.x))


def test_regression_errors_are_in_the_files_units(csv_file):
    from thermonet.analysis.samples import evaluate_regression
    from thermonet.architectures.regression import RegressionMLP

    s = load_file_split(csv_file, outputs=["u", "v"], standardise=True, seed=1)
    arch = RegressionMLP(n_inputs=3, hidden=[4], n_outputs=2)
    thetas = RNG.normal(size=(3, arch.n_params))
    ev = evaluate_regression(arch, thetas, train=s.train, test=s.test)
    st = s.test.provenance["standardisation"]
    ystd, ymean = np.array(st["y_std"]), np.array(st["y_mean"])
    xz = (X[s.test.indices] - st["x_mean"]) / np.array(st["x_std"])

    def forward(theta):                                 # independent NumPy 3-4-2 tanh net
        w1, b1 = theta[:12].reshape(4, 3), theta[12:16]
        w2, b2 = theta[16:24].reshape(2, 4), theta[24:26]
        return (np.tanh(xz @ w1.T + b1) @ w2.T + b2) * ystd + ymean

    f = np.array([forward(th) for th in thetas])
    y = Y[s.test.indices]
    assert np.allclose(ev.test_error, np.mean(np.sum((f - y) ** 2, axis=2), axis=1), rtol=1e-10)
    assert ev.predictive_test_error == pytest.approx(
        np.mean(np.sum((f.mean(0) - y) ** 2, axis=1)), rel=1e-10)


BAD = [
    ("x.txt", "a,b\n1,2\n", {}, "expected .csv"),
    ("x.csv", "", {}, "is empty"),
    ("x.csv", "1,2\n3,4\n", {}, "header row"),
    ("x.csv", "a,u\n1,2\n3\n", {}, "data row 2: 1 fields; expected 2"),
    ("x.csv", "a,u\n1,2\n3,oops\n", {}, "'oops' is not a number"),
    ("x.csv", "a,u\n1,2\n3,nan\n", {}, "non-finite value"),
    ("x.csv", "a,u\n1,2\n3,4\n", {"outputs": ["w"]}, "no column 'w'"),
    ("x.csv", "a,u\n1,2\n3,4\n", {"outputs": []}, "data.outputs is empty"),
    ("x.csv", "a,u\n1,2\n3,4\n", {"inputs": ["u"]}, "both inputs and outputs"),
    ("x.csv", "a,u\n1,2\n3,4\n", {"test_fraction": 0.1}, "leaves 0 test"),
    ("x.csv", "a,a,u\n1,2,3\n", {}, "repeated"),
]


@pytest.mark.parametrize("name, text, kw, match", BAD)
def test_bad_files_get_one_line_errors(tmp_path, name, text, kw, match):
    p = tmp_path / name
    p.write_text(text)
    with pytest.raises(DataError, match=match) as err:
        load_file_split(p, **{"outputs": ["u"], **kw})
    assert "\n" not in str(err.value) and str(p) in str(err.value)


def test_bad_npz_files(tmp_path):
    cases = [({"x": np.zeros((4, 2, 2)), "u": np.zeros(4)}, r"expected \(n,\) or \(n, k\)"),
             ({"x": np.zeros(4), "u": np.zeros(5)}, "different lengths"),
             ({"x": np.array(["a", "b"]), "u": np.zeros(2)}, "expected numbers")]
    for arrays, match in cases:
        np.savez(tmp_path / "b.npz", **arrays)
        with pytest.raises(DataError, match=match):
            load_file_split(tmp_path / "b.npz", outputs=["u"])
    (tmp_path / "c.npz").write_bytes(b"not a zip")
    with pytest.raises(DataError, match="cannot read data file"):
        load_file_split(tmp_path / "c.npz", outputs=["u"])
    with pytest.raises(DataError, match="does not exist"):
        load_file_split(tmp_path / "none.csv", outputs=["u"])


CFG = """
[run]
seed = 2
n_iterations = 6
sample_every = 1
discard = 0.34
[data]
path = "sub/d.csv"
outputs = ["u", "v"]
standardise = true
[architecture]
name = "mlp-regression"
n_inputs = 3
hidden = [4]
[init]
minimise = false
burn_in = [1]
[sampler]
name = "hmc-gibbs"
n_leapfrog = 8
step_size = 0.01
adapt_method = "fixed"
"""


@pytest.fixture
def file_cfg(tmp_path):
    (tmp_path / "sub").mkdir()
    write_csv(tmp_path / "sub" / "d.csv", ["a", "b", "c", "u", "v"], np.hstack([X, Y]).tolist())
    (tmp_path / "cfg").mkdir()
    p = tmp_path / "cfg" / "run.toml"
    p.write_text(CFG.replace("sub/d.csv", "../sub/d.csv"))
    return p


def test_config_resolves_the_path_and_records_the_checksum(file_cfg, tmp_path):
    import hashlib

    cfg = cfgmod.load(file_cfg)
    d = cfg["data"]
    assert d["path"] == str((tmp_path / "sub" / "d.csv").resolve())
    assert d["name"] == "file" and d["inputs"] == ["a", "b", "c"]
    assert d["sha256"] == hashlib.sha256((tmp_path / "sub" / "d.csv").read_bytes()).hexdigest()
    again = cfgmod.resolve(cfgmod.schema.parse_toml(cfg.to_toml()))   # as a resume reads it
    assert again["data"] == d
    with (tmp_path / "sub" / "d.csv").open("a") as fh:
        fh.write("1,2,3,4,5\n")
    with pytest.raises(ConfigError, match="has changed since the run recorded it"):
        cfgmod.resolve(cfgmod.schema.parse_toml(cfg.to_toml()))


@pytest.mark.parametrize("doc, match", [
    ({"data": {"outputs": ["u"]}}, "data.outputs is set but data.path is not"),
    ({"data": {"path": "PATH", "outputs": ["u"], "test": "official"}}, "data.test is for"),
    ({"data": {"path": "PATH", "outputs": ["u"], "test_path": "PATH", "split_column": "a"}},
     "keep one"),
    ({"data": {"path": "PATH", "outputs": ["nope"]}}, r"\[data\] data file .* no column"),
])
def test_config_errors(csv_file, doc, match):
    for v in doc["data"].values():
        if v == "PATH":
            doc = {"data": {k: (str(csv_file) if x == "PATH" else x)
                            for k, x in doc["data"].items()}}
    with pytest.raises(ConfigError, match=match):
        cfgmod.resolve({**doc, "architecture": {"name": "mlp-regression"}})


def test_run_and_analyse_a_csv_file_in_its_units(file_cfg, tmp_path):
    from thermonet.analysis import read_analysis
    from thermonet.cli import main
    from thermonet.runner import Run, detach_log

    out = tmp_path / "r"
    Run.create(cfgmod.load(file_cfg), out).run()
    detach_log()
    assert "standardised by the training set" in (out / "thermonet.log").read_text()
    res = CliRunner().invoke(main, ["analyse", str(out)])
    assert res.exit_code == 0, res.output
    a = read_analysis(out / "analysis.h5")
    tr = iotrace.read_trace(out, samples=True)
    kept = tr["samples_theta"][tr["samples_iteration"] >= 3]       # (S, chains, P)
    thetas = np.concatenate(list(kept.transpose(1, 0, 2)))        # every chain's networks
    split = load_file_split(tmp_path / "sub" / "d.csv", outputs=["u", "v"], standardise=True,
                            seed=2)
    st = split.test.provenance["standardisation"]
    xz = (X[split.test.indices] - st["x_mean"]) / np.array(st["x_std"])
    f = np.array([(np.tanh(xz @ th[:12].reshape(4, 3).T + th[12:16])
                   @ th[16:24].reshape(2, 4).T + th[24:26]) * st["y_std"] + st["y_mean"]
                  for th in thetas])
    y = Y[split.test.indices]
    assert a.table["predictive_test_error"][0] == pytest.approx(
        np.mean(np.sum((f.mean(0) - y) ** 2, axis=1)), rel=1e-10)
    base = np.mean(np.sum((y - Y[split.train.indices].mean(0)) ** 2, axis=1))
    assert a.references["uninformed_error"] == pytest.approx(base, rel=1e-10)


def test_file_errors_reach_the_command_line_as_one_line(file_cfg, tmp_path):
    from thermonet.cli import main

    (tmp_path / "sub" / "d.csv").write_text("a,b,c,u,v\n1,2,3,x,5\n")
    res = CliRunner().invoke(main, ["run", str(file_cfg), "--out", str(tmp_path / "o")])
    assert res.exit_code == 1
    assert "'x' is not a number" in res.output and len(res.output.strip().splitlines()) == 1
    assert issubclass(ConfigError, ThermonetError)


def write_h5(path, **datasets):
    import h5py

    with h5py.File(path, "w") as fh:
        for name, arr in datasets.items():
            fh.create_dataset(name, data=arr)
    return path


def test_hdf5_default_and_named_datasets(tmp_path):
    p = write_h5(tmp_path / "d.h5", inputs=X, targets=Y, meta=np.array([b"a", b"b"]))
    s = load_file_split(p, outputs=[], test_fraction=0.25, seed=4)
    ref = load_file_split(write_csv(tmp_path / "d.csv", ["a", "b", "c", "u", "v"],
                                    np.hstack([X, Y]).tolist()),
                          outputs=["u", "v"], test_fraction=0.25, seed=4)
    assert np.array_equal(s.test.indices, ref.test.indices)   # the same split as the CSV
    assert np.array_equal(s.train.x, X[s.train.indices]) and np.array_equal(s.test.y, ref.test.y)
    assert s.train.provenance["inputs"] == ["inputs"]
    assert s.train.provenance["outputs"] == ["targets"]
    q = write_h5(tmp_path / "g.hdf5", **{"grp/x": X[:30], "grp/y": Y[:30, 1],
                                         "grp/flag": (np.arange(30) % 3 == 0) * 1})
    col = load_file_split(q, inputs=["grp/x[2]"], outputs=["grp/y"], split_column="grp/flag")
    assert np.array_equal(col.test.indices, np.arange(0, 30, 3))
    assert np.array_equal(col.train.x[:, 0], X[:30][np.arange(30) % 3 != 0, 2])
    assert np.array_equal(col.test.y[:, 0], Y[:30:3, 1])
    t = write_h5(tmp_path / "t.h5", inputs=X[30:], targets=Y[30:])
    two = load_file_split(write_h5(tmp_path / "tr.h5", inputs=X[:30], targets=Y[:30]),
                          outputs=[], test_path=t)
    assert np.array_equal(two.test.x, X[30:]) and np.array_equal(two.train.y, Y[:30])


def test_bad_hdf5_files(tmp_path):
    nan_y = Y.copy()
    nan_y[5, 1] = np.nan
    cases = [({"inputs": X, "targets": Y[:39]}, {}, "different lengths"),
             ({"inputs": X.reshape(40, 3, 1), "targets": Y}, {},
              r"'inputs' has shape \(40, 3, 1\); expected \(n,\) or \(n, k\)"),
             ({"inputs": X, "targets": nan_y}, {},
              "data.outputs has 1 non-finite value.*first nan in row 6"),
             ({"inputs": X, "y": Y}, {}, r"'targets' \(from data.outputs\) does not exist; "
              r"the file has datasets \['inputs', 'y'\]"),
             ({"inputs": X, "targets": Y}, {"inputs": ["x"]}, "'x' .from data.inputs. does not"),
             ({"g/inputs": X, "targets": Y}, {"inputs": ["g"]}, "is a group, not a dataset"),
             ({"inputs": np.array([b"a"] * 40), "targets": Y}, {}, "expected numbers")]
    for i, (arrays, kw, match) in enumerate(cases):
        p = write_h5(tmp_path / f"b{i}.h5", **arrays)
        with pytest.raises(DataError, match=match) as err:
            load_file_split(p, **{"outputs": [], **kw})
        assert "\n" not in str(err.value) and str(p) in str(err.value)
    (tmp_path / "c.h5").write_bytes(b"not an HDF5 file")
    with pytest.raises(DataError, match="cannot read data file .* as HDF5"):
        load_file_split(tmp_path / "c.h5", outputs=[])


def test_config_records_the_hdf5_default_datasets(tmp_path):
    p = write_h5(tmp_path / "d.h5", inputs=X, targets=Y)
    cfg = cfgmod.resolve({"data": {"path": str(p)},
                          "architecture": {"name": "mlp-regression", "n_inputs": 3}})
    assert (cfg["data"]["inputs"], cfg["data"]["outputs"]) == (["inputs"], ["targets"])
    again = cfgmod.resolve(cfgmod.schema.parse_toml(cfg.to_toml()))
    assert again["data"] == cfg["data"]


def test_a_named_set_and_a_file_together_are_refused(file_cfg, tmp_path):
    # the name was ignored (the run trained on the file) yet recorded as `name = "D500"  # set`
    out = tmp_path / "r"
    res = CliRunner().invoke(main_cli(), ["-q", "run", str(file_cfg), "--out", str(out),
                                          "--set", "data.name=D500"])
    assert res.exit_code == 1, res.output
    (line,) = [ln for ln in res.output.splitlines() if ln.strip()]
    assert "data.name = 'D500' (from --set)" in line and "both name the training data" in line
    assert "--set data.path=\"\"" in line
    assert not out.exists()
    with pytest.raises(ConfigError, match="from the configuration file"):
        cfgmod.resolve({"data": {"name": "D50", "path": str(tmp_path / "sub" / "d.csv"),
                                 "outputs": ["u"]},
                        "architecture": {"name": "mlp-regression"}})
    resolved = cfgmod.load(file_cfg)                 # a run's own record says name = "file"
    again = cfgmod.resolve(cfgmod.schema.parse_toml(resolved.to_toml()))
    assert again["data"]["name"] == "file"


def test_a_checksum_given_by_hand_is_not_said_to_be_a_runs(file_cfg, tmp_path):
    res = CliRunner().invoke(main_cli(), ["-q", "run", str(file_cfg), "--out",
                                          str(tmp_path / "r"), "--set", "data.sha256=" + "0" * 64])
    assert res.exit_code == 1, res.output
    (line,) = [ln for ln in res.output.splitlines() if ln.strip()]
    assert "since the run recorded it" not in line
    assert "data.sha256 = 000000000000... (from --set) does not match" in line
    assert "drop the --set data.sha256" in line
    assert not (tmp_path / "r").exists()


def main_cli():
    from thermonet.cli import main

    return main
