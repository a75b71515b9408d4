"""Every bad input ends in one line (a ThermonetError naming what was received, what was
expected and the fix), never a raw traceback, a hang or a silent fallback."""

from __future__ import annotations

import gzip
import json
import logging
import math
import os
import pathlib
import time
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from thermonet import config as cfgmod
from thermonet.api import Potential
from thermonet.architectures.mlp import M1, MLP
from thermonet.errors import (
    ConfigError,
    DataError,
    ParameterFileError,
    PluginError,
    ThermonetError,
)
from thermonet.kernels import leapfrog as lf
from thermonet.params import load_params
from thermonet.priors import BoxPrior
from thermonet.samplers.hmc import HMC, HMCConfig
from thermonet.tempering import Ladder, ReplicaExchange


def one_line(err: BaseException) -> str:
    msg = str(err)
    assert msg and "\n" not in msg, msg
    return msg


def refused(raw: dict[str, Any], overrides: dict[str, Any] | None = None) -> str:
    with pytest.raises(ThermonetError) as exc:
        cfgmod.resolve(raw, overrides)
    return one_line(exc.value)


# -- config files that are not UTF-8 -----------------------------------------------------------

@pytest.mark.parametrize("content", [b"\x89PNG\r\n\x1a\n\x00\xff\xfe garbage",
                                     b"[data]\nname = 'D50'  # caf\xe9\n"])
def test_config_not_utf8_run_and_evidence(tmp_path: pathlib.Path, content: bytes) -> None:
    from thermonet.evidence import config as evcfg

    path = tmp_path / "c.toml"
    path.write_bytes(content)
    for load in (cfgmod.load, evcfg.load):
        with pytest.raises(ConfigError) as exc:
            load(path)
        msg = one_line(exc.value)
        assert "not UTF-8" in msg and str(path) in msg and "re-save" in msg
    assert path.read_bytes() == content      # nothing the user wrote is changed


# -- wrong container types ---------------------------------------------------------------------

def test_sampler_inner_not_a_table() -> None:
    for raw, overrides in (({"sampler": {"inner": 5}}, None), ({}, {"sampler.inner": 5})):
        msg = refused(raw, overrides)
        assert "sampler.inner = 5" in msg and "table" in msg


@pytest.mark.parametrize("window, expect", [
    ([0.6], "has 1 value(s); expected 2"),
    ([0.6, 0.7, 0.8], "has 3 value(s); expected 2"),
    (["a", "b"], "accept_window[0] = 'a' has the wrong type"),
    (0.6, "expected a list of 2 values"),
])
def test_accept_window_shapes(window: Any, expect: str) -> None:
    msg = refused({"sampler": {"accept_window": window}})
    assert expect in msg and "accept_window = [0.6, 0.7]" in msg or expect in msg
    with pytest.raises(ConfigError):       # the Python API, without the TOML layer
        HMCConfig(accept_window=window)


def test_temperatures_wrong_types() -> None:
    msg = refused({"ladder": {"temperatures": 0.5}})
    assert "ladder.temperatures = 0.5" in msg and "temperatures = [0.5]" in msg
    msg = refused({"ladder": {"temperatures": ["a", "b"]}})
    assert "ladder.temperatures" in msg and "e.g. [0.5, 1.0, 2.0]" in msg


def test_empty_temperatures_means_unset_and_is_documented() -> None:
    # decision: [] is what every resolved config.toml records for "unset" (and resume reads
    # it back), so it cannot be refused; it is documented as the geometric ladder instead
    given = cfgmod.resolve({"ladder": {"temperatures": [], "n_temperatures": 3, "t_max": 4.0}})
    plain = cfgmod.resolve({"ladder": {"n_temperatures": 3, "t_max": 4.0}})
    np.testing.assert_array_equal(given.ladder.temperature_k, plain.ladder.temperature_k)
    assert "[] (the default" in cfgmod.LADDER_KEYS["temperatures"][3]


@pytest.mark.parametrize("t_max", [math.inf, math.nan])
def test_t_max_not_finite(t_max: float) -> None:
    msg = refused({"ladder": {"n_temperatures": 4, "t_max": t_max}})
    assert "ladder.t_max" in msg and "below" not in msg and "finite" in msg
    assert "prior_rung" in msg


def test_prior_scale_inf_names_the_key() -> None:
    msg = refused({"architecture": {"name": "M1", "prior_scale": math.inf}})
    assert "architecture.prior_scale = inf" in msg and "finite" in msg


# -- absurd sizes --------------------------------------------------------------------------------

@pytest.mark.parametrize("raw", [
    {"ladder": {"n_temperatures": 10**9, "t_max": 10.0}},
    {"architecture": {"name": "mlp", "hidden": [10**8]}},
])
def test_absurd_sizes_refused_before_allocating(raw: dict[str, Any]) -> None:
    t0 = time.monotonic()
    msg = refused(raw)
    assert time.monotonic() - t0 < 5
    assert "memory" in msg and "available" in msg and "needs about" in msg


def test_memory_estimate_parts() -> None:
    from thermonet.config import budget

    est = budget.memory_estimate(M1(), "D500", n_slots=4)
    assert est.replicas == 4 * M1().n_params * budget.ARRAYS_PER_REPLICA * 8
    assert est.data > 500 * 256 * 8 and est.total == est.replicas + est.scratch + est.data
    budget.check_memory(est, available=est.total)
    with pytest.raises(ConfigError, match="needs about"):
        budget.check_memory(est, available=est.total - 1)


def test_n_swaps_capped() -> None:
    msg = refused({"ladder": {"n_temperatures": 4, "t_max": 2.0, "n_swaps": 10**12}})
    assert "ladder.n_swaps" in msg and str(cfgmod.run.MAX_SWAPS) in msg


# -- an empty config file ------------------------------------------------------------------------

def test_empty_config_refused(tmp_path: pathlib.Path) -> None:
    for text in ("", "\n# nothing yet\n"):
        path = tmp_path / "empty.toml"
        path.write_text(text)
        with pytest.raises(ConfigError) as exc:
            cfgmod.load(path)
        msg = one_line(exc.value)
        assert "is empty" in msg and "[run]" in msg


def test_plan_is_stated_before_a_run(tmp_path: pathlib.Path) -> None:
    from click.testing import CliRunner

    from thermonet.cli import main

    path = tmp_path / "c.toml"
    path.write_text("[run]\nn_iterations = 7\n[ladder]\nn_temperatures = 3\nt_max = 2.0\n")
    text = cfgmod.plan(cfgmod.load(path))
    assert text is not None and "about to run M3" in text and "on D50" in text
    assert "3 rung(s) x 7 iterations x 1 trajectories x L = 100 = 2,100 gradients" in text
    quiet = CliRunner().invoke(main, ["run", str(path), "--out", str(tmp_path / "r"),
                                      "--quiet", "--set", "run.n_iterations=0"])
    assert "about to run" not in quiet.output


def test_plan_counts_the_warm_up(tmp_path: pathlib.Path) -> None:
    # ladder rounds 8 + 16 + 32 + 64, 200 mass iterations, 3 x 200 step-size corrections
    path = tmp_path / "c.toml"
    path.write_text("[run]\nn_iterations = 7\n[ladder]\nn_temperatures = 3\nt_max = 2.0\n"
                    "adapt_rounds = 4\nadapt_round_length = 8\nadapt_masses = 200\n"
                    "retune_iterations = 200\nretune_rounds = 3\n")
    text = cfgmod.plan(cfgmod.load(path))
    assert text is not None
    assert ("3 rung(s) x 7 iterations (+ 920 warm-up) x 1 trajectories x L = 100 = "
            f"{3 * (7 + 920) * 100:,} gradients") in text


# -- parameter files ----------------------------------------------------------------------------

def test_complex_npy_refused(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "p.npy"
    np.save(path, np.ones(5) + 1j)
    with pytest.raises(ParameterFileError) as exc:
        load_params(path, 5)
    assert "complex" in one_line(exc.value)


def test_pretty_printed_json_and_bare_list(tmp_path: pathlib.Path) -> None:
    theta = [0.5, -1.25, 3.0]
    pretty = tmp_path / "paper.json"
    pretty.write_text(json.dumps({"x": theta, "energy": 1.0}, indent=2))
    np.testing.assert_array_equal(load_params(pretty, 3), theta)
    bare = tmp_path / "bare.txt"
    bare.write_text(json.dumps(theta) + "\n")
    np.testing.assert_array_equal(load_params(bare, 3), theta)
    walkers = tmp_path / "walkers.txt"        # the paper's labelled lines still work
    walkers.write_text("".join(f"w{i} " + json.dumps({"x": theta}) + "\n" for i in range(2)))
    np.testing.assert_array_equal(load_params(walkers, 3), theta)


def test_multi_vector_file_says_how_for_a_config(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "many.npy"
    np.save(path, np.zeros((3, 4)))
    with pytest.raises(ParameterFileError) as exc:
        load_params(path, 4)
    msg = one_line(exc.value)
    assert "--index 0..2" in msg and "params_index = 0..2" in msg
    # and a run config can pick the row
    cfg = tmp_path / "c.toml"
    np.save(tmp_path / "many2.npy", np.stack([np.full(2, 0.1 * r) for r in range(3)]))
    cfg.write_text(f'[data]\nname = "none"\n[architecture]\nname = "gaussian"\n'
                   f'[init]\nparams = "{tmp_path / "many2.npy"}"\nparams_index = 2\n'
                   '[run]\nn_iterations = 1\n')
    from thermonet.runner import Run, detach_log

    run = Run.create(cfgmod.load(cfg), tmp_path / "r")
    run.close()
    detach_log()
    assert run.state.slots[0].theta.tolist() == [0.2, 0.2]


# -- plugins at the start of a run ----------------------------------------------------------------

class _Bad(Potential):
    n_params = 3

    def __init__(self, mode: str) -> None:
        self.mode = mode

    def energy(self, theta: Any) -> float:
        return self.energy_and_grad(theta)[0]

    def energy_and_grad(self, theta: Any, grad_out: Any = None) -> Any:
        if self.mode == "raise":
            raise ZeroDivisionError("division by zero")
        if self.mode == "string":
            return "1.0", np.zeros(3)
        if self.mode == "short":
            return 1.0, np.zeros(2)
        if self.mode == "nan-grad":
            return 1.0, np.full(3, np.nan)
        return 0.5 * float(theta @ theta), np.asarray(theta, dtype=float).copy()


@pytest.mark.parametrize("mode, expect", [("raise", "raised ZeroDivisionError"),
                                          ("string", "expected a real number"),
                                          ("short", "has shape (2,)"),
                                          ("nan-grad", "not finite in 3 of 3")])
def test_bad_potential_plugin_named(mode: str, expect: str) -> None:
    engine = ReplicaExchange(HMC, _Bad(mode), Ladder.single())
    for start in (lambda: engine.init(np.zeros(3)),
                  lambda: engine.burn_in(lambda rng: np.zeros(3), engine.make_streams(0),
                                         blocks=(1,))):
        with pytest.raises(PluginError) as exc:
            start()
        msg = one_line(exc.value)
        assert expect in msg and "_Bad" in msg


def test_nan_in_data_refused_at_potential() -> None:
    arch = MLP(4, (3,), 2)
    x = np.zeros((6, 4))
    x[2, 1] = np.nan
    x[5, 0] = np.inf
    with pytest.raises(DataError) as exc:
        arch.potential(x=x, y=np.zeros(6, dtype=np.int64))
    msg = one_line(exc.value)
    assert "2 of 6 rows" in msg and "rows 2, 5" in msg


def test_box_smaller_than_initial_draw() -> None:
    arch = M1(prior_scale=1e-300)
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(10, 256)), np.arange(10) % 10
    prior = BoxPrior.for_architecture(arch)
    engine = ReplicaExchange(HMC, arch.potential(x=x, y=y), Ladder.single(), prior=prior)
    with pytest.raises(ConfigError) as exc:
        engine.burn_in(arch.initial_draw, engine.make_streams(0), blocks=(1,))
    msg = one_line(exc.value)
    assert "outside the prior box" in msg and "prior_scale" in msg and "half-width" in msg


# -- reflections of a huge step -----------------------------------------------------------------

def test_reflect_huge_step_is_a_prompt_divergence() -> None:
    n = 4
    theta, p = np.zeros(n), np.ones(n)
    half = np.full(n, 1.0)
    t0 = time.monotonic()
    lf.drift_reflect(theta, p, np.ones(n), 1e10, half)   # ~1e10 folds before
    assert time.monotonic() - t0 < 1 and np.all(np.isnan(theta))
    # an ordinary step is unchanged: one reflection, bitwise the analytic fold
    theta, p = np.array([0.9]), np.array([1.0])
    assert lf.drift_reflect(theta, p, np.ones(1), 0.3, np.ones(1)) == 1
    assert theta[0] == 2.0 - 1.2 and p[0] == -1.0

    arch = MLP(4, (3,), 2)
    rng = np.random.default_rng(0)
    pot = arch.potential(x=rng.normal(size=(8, 4)), y=np.arange(8) % 2)
    sampler = HMC(pot, prior=BoxPrior.for_architecture(arch), wall="reflect",
                  step_size=1e10, step_size_max=1e300)
    state = sampler.init(arch.initial_draw(rng))
    sampler.step(state, rng)        # compiles the trajectory kernel
    t0 = time.monotonic()
    new, info = sampler.step(state, rng)
    assert time.monotonic() - t0 < 5
    assert info.is_divergent and not info.is_accepted and new is state


# -- data sets ---------------------------------------------------------------------------------

def test_subset_with_seed_usable_everywhere(tmp_path: pathlib.Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from thermonet.data import _datasets as datasets_mod
    from thermonet.data import load_data, make_subset
    from thermonet.data._mnist import MNIST_FILES, Mnist16

    monkeypatch.setenv("THERMONET_DATA_DIR", str(tmp_path / "userdata"))
    monkeypatch.setenv("THERMONET_MNIST_DIR", str(tmp_path / "no-mnist"))
    rng = np.random.default_rng(7)
    full = Mnist16(rng.integers(0, 256, (60000, 16, 16), dtype=np.uint8),
                   (np.arange(60000) % 10).astype(np.uint8),
                   rng.integers(0, 256, (10000, 16, 16), dtype=np.uint8),
                   (np.arange(10000) % 10).astype(np.uint8),
                   {k: "0" * 64 for k in MNIST_FILES}, {k: "/fake" for k in MNIST_FILES})
    monkeypatch.setattr(datasets_mod, "_full_mnist", lambda *a, **k: full)
    make_subset("D200", seed=1)
    split = load_data("D200")          # what run/evaluate/minimise ask for: no seed
    assert split.train.provenance["seed"] == 1 and len(split.train) == 200
    with pytest.raises(DataError, match="seed 1"):
        load_data("D200", seed=2)       # an explicit, different seed is still refused


def test_corrupt_raw_mnist_beside_intact_gz(tmp_path: pathlib.Path,
                                             caplog: pytest.LogCaptureFixture) -> None:
    from thermonet.data import data_info
    from thermonet.data._mnist import MNIST_FILES, find_mnist

    env = os.environ.get("THERMONET_MNIST_DIR")
    if not env or not (pathlib.Path(env) / "train-labels-idx1-ubyte.gz").is_file():
        pytest.skip("needs the real MNIST .gz files in THERMONET_MNIST_DIR")
    d = tmp_path / "mnist"
    d.mkdir()
    for spec in MNIST_FILES.values():
        (d / (spec.filename + ".gz")).symlink_to((pathlib.Path(env) / (spec.filename + ".gz"))
                                                 .resolve())
    corrupt = d / "train-labels-idx1-ubyte"
    corrupt.write_bytes(gzip.decompress((d / "train-labels-idx1-ubyte.gz").read_bytes())[:-7])
    with caplog.at_level(logging.WARNING, logger="thermonet"):
        files = find_mnist(d, verify=False)     # what loading uses
    assert files["train-labels"].name.endswith(".gz")
    assert "train-labels-idx1-ubyte" in caplog.text and "intact" in caplog.text
    info = data_info(d, verify=True)
    entry = next(f for f in info["mnist_files"] if f["file"] == "train-labels-idx1-ubyte")
    assert entry["status"] == "ok (corrupt copy ignored)" and str(corrupt) in entry["detail"]
    assert corrupt.is_file()       # reported, never deleted


def test_fetch_mirror_not_a_url(tmp_path: pathlib.Path) -> None:
    from thermonet.cli import main

    result = CliRunner().invoke(main, ["data", "fetch", "--dest", str(tmp_path / "m"),
                                       "--mirror", "not a url"])
    assert result.exit_code != 0
    assert "is not a URL" in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


# -- evidence directories ----------------------------------------------------------------------

def test_corrupt_result_json(tmp_path: pathlib.Path) -> None:
    from thermonet.evidence.tasks import read_json

    path = tmp_path / "result.json"
    path.write_text('{"method": "ti", "log_integral": 1.')
    with pytest.raises(DataError) as exc:
        read_json(path)
    msg = one_line(exc.value)
    assert str(path) in msg and "delete it" in msg


# -- fuzzing: only ThermonetError ever escapes -------------------------------------------------

def _fuzz_strategies() -> Any:
    from hypothesis import strategies as st

    scalars = st.one_of(st.booleans(), st.integers(-10**12, 10**12),
                        st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=6))
    values = st.recursive(scalars, lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=4), inner, max_size=3)),
        max_leaves=6)
    keys = {section: list(schema) for section, schema in (
        ("run", cfgmod.RUN_KEYS), ("data", cfgmod.DATA_KEYS), ("prior", cfgmod.PRIOR_KEYS),
        ("init", cfgmod.INIT_KEYS), ("ladder", cfgmod.LADDER_KEYS))}
    keys["sampler"] = ["name", "n_leapfrog", "step_size", "wall", "accept_window", "inner",
                       "temperature", "mass", "precision", "n_trajectories"]
    keys["architecture"] = ["name", "prior_scale", "hidden", "n_inputs", "n_outputs"]
    keys["minimiser"] = ["name", "max_iterations"]
    sections = st.sampled_from([*keys, "bogus"])

    @st.composite
    def doc(draw: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for section in draw(st.lists(sections, max_size=4, unique=True)):
            if draw(st.integers(0, 9)) == 0:
                out[section] = draw(values)
                continue
            names = keys.get(section, ["x"]) + ["nonsense"]
            table = {}
            for key in draw(st.lists(st.sampled_from(names), max_size=4, unique=True)):
                table[key] = draw(st.one_of(values, st.sampled_from(
                    ["M1", "mlp", "hmc", "reflect", "D50", "random-pairs", [0.6, 0.7],
                     [1, 2, 4], 10**9, 0, -1, 1e-300])))
            out[section] = table
        return out

    return doc(), values


def test_fuzz_run_configs_and_parameter_files(tmp_path: pathlib.Path) -> None:
    import warnings

    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    docs, values = _fuzz_strategies()

    # the example counts come from the tier's Hypothesis profile (tests/conftest.py)
    @settings(derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(docs)
    def fuzz_config(doc: dict[str, Any]) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                cfgmod.resolve(doc)
            except ThermonetError as err:
                one_line(err)

    @settings(max_examples=max(1, settings.default.max_examples // 2), derandomize=True,
              deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.one_of(values.map(lambda v: ("json", json.dumps(v, allow_nan=True).encode())),
                     st.binary(max_size=64).map(lambda b: ("txt", b)),
                     st.binary(max_size=200).map(lambda b: ("npy", b)),
                     st.binary(max_size=64).map(lambda b: ("h5", b))),
           st.integers(1, 4))
    def fuzz_params(content: tuple[str, bytes], n: int) -> None:
        path = tmp_path / f"p.{content[0]}"
        path.write_bytes(content[1])
        try:
            theta = load_params(path, n)
        except ThermonetError as err:
            one_line(err)
        else:
            assert theta.shape == (n,) and np.all(np.isfinite(theta))

    t0 = time.monotonic()
    fuzz_config()
    fuzz_params()
    assert time.monotonic() - t0 < 60


def test_a_refused_write_is_one_line(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
                                     ) -> None:
    """A read-only directory (simulated: the sandbox runs as root, which bypasses modes)."""
    from click.testing import CliRunner

    from thermonet.cli import main
    from thermonet.io import atomic

    cfg = tmp_path / "c.toml"
    cfg.write_text('[data]\nname = "none"\n[architecture]\nname = "gaussian"\n'
                   '[init]\nminimise = false\nburn_in = [1]\n[run]\nn_iterations = 2\n')
    assert CliRunner().invoke(main, ["-q", "run", str(cfg), "--out", str(tmp_path / "r")]
                              ).exit_code == 0

    def refuse(path: Any, write: Any) -> Any:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(atomic, "write_atomic", refuse)
    res = CliRunner().invoke(main, ["analyse", str(tmp_path / "r")])
    assert res.exit_code == 1
    last = res.output.strip().splitlines()[-1]
    assert last.startswith("Error: cannot write") and "Permission denied" in last
    assert "Traceback" not in res.output


# -- parameter files near 1 GB -------------------------------------------------------------------

def _peak_bytes(fn: Any) -> tuple[Any, int]:
    import tracemalloc

    tracemalloc.start()
    try:
        out = fn()
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_gigabyte_npy_file_is_not_read_for_one_row_or_a_refusal(tmp_path: pathlib.Path
                                                                  ) -> None:
    # sparse files: 1 GiB on paper, nothing on disk; loading used to read all of it (1.2 GB)
    many = np.lib.format.open_memmap(tmp_path / "many.npy", mode="w+", dtype=np.float64,
                                     shape=(8192, 16384))
    many[5, :3] = [1.0, 2.0, 3.0]
    many.flush()
    del many
    row, peak = _peak_bytes(lambda: load_params(tmp_path / "many.npy", 16384, index=5))
    assert row.flags.writeable and row.flags.owndata and row[:4].tolist() == [1, 2, 3, 0]
    assert peak < 16 << 20, peak
    one = np.lib.format.open_memmap(tmp_path / "one.npy", mode="w+", dtype=np.float64,
                                    shape=(2 ** 27,))
    del one
    with pytest.raises(ParameterFileError) as exc:
        _peak_bytes(lambda: load_params(tmp_path / "one.npy", 16384))
    assert "holds 134217728 parameters; expected 16384" in one_line(exc.value)
    _, peak = _peak_bytes(lambda: pytest.raises(ParameterFileError, load_params,
                                                tmp_path / "one.npy", 16384))
    assert peak < 16 << 20, peak


def test_a_large_walker_file_is_read_to_its_first_line_only(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "walkers.txt"
    walker = "config " + json.dumps({"x": [0.5, -0.25, 1.0]}) + "\n"
    path.write_text(walker + walker.replace("0.5", "9.0") * 400_000)     # ~16 MB
    theta, peak = _peak_bytes(lambda: load_params(path, 3))
    assert theta.tolist() == [0.5, -0.25, 1.0]
    assert peak < 4 << 20, peak
    path.write_text("x" * (3 << 20))                                      # one huge line
    with pytest.raises(ParameterFileError) as exc:
        load_params(path, 3)
    assert "save large or many vectors as .npy" in one_line(exc.value)
