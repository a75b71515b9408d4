"""Bad input, fuzzed: every command's options and every configuration key (wrong types, values
out of range, unknown keys, conflicting keys) end in one error line, a non-zero exit, no
traceback and no change to any file that existed (docs/runs.md, "Your files").

In-process (Click's CliRunner) and small (a few dozen examples per test), so that it runs in
every tier. A refusal by Click itself (a value that is not a number, an unknown option: exit
status 2) keeps Click's usage lines above its one ``Error:`` line; thermonet's own refusals
(exit status 1) are the one line alone.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from tests.annealing.test_annealing import TINY_TOML
from tests.evidence.test_evidence_cli import MACKAY_CONFIG
from tests.runs import TINY as GAUSS
from thermonet import config as cfgmod
from thermonet.cli import COMMANDS, main
from thermonet.samplers.hmc import HMCConfig

REGRESSION = """
[run]
n_iterations = 4
[data]
path = "good.csv"
inputs = ["x1", "x2"]
outputs = ["y"]
[architecture]
name = "mlp-regression"
n_inputs = 2
hidden = [3]
[init]
minimise = false
burn_in = [1]
[sampler]
name = "hmc-gibbs"
"""

# half the tier's example count (the Hypothesis profile of tests/conftest.py): each example
# runs a command
FUZZ = settings(max_examples=max(1, settings.default.max_examples // 2), deadline=None,
                derandomize=True,
                suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> dict[str, Any]:
    """A finished run, a config of each kind and a user's data file: the files that no
    refused command may change."""
    base = tmp_path_factory.mktemp("fuzz")
    configs = {}
    for name, body in (("run", GAUSS), ("evidence", MACKAY_CONFIG), ("anneal", TINY_TOML)):
        configs[name] = base / f"{name}.toml"
        configs[name].write_text(body)
    res = CliRunner().invoke(main, ["-q", "run", str(configs["run"]), "--out",
                                    str(base / "R")])
    assert res.exit_code == 0, res.output
    (base / "good.csv").write_text("x1,x2,y\n" + "".join(f"{k},{k % 3},{k * 0.5}\n"
                                                         for k in range(20)))
    configs["file"] = base / "file.toml"        # the F: a regression on good.csv
    configs["file"].write_text(REGRESSION)
    return {"base": base, "configs": configs, "run": base / "R"}


def _snapshot(base: Path) -> dict[str, bytes]:
    return {str(p.relative_to(base)): p.read_bytes() for p in sorted(base.rglob("*"))
            if p.is_file()}


def _refused(world: dict[str, Any], args: list[str]) -> str:
    """Invoke ``thermonet ARGS``; check the refusal; return its error line."""
    before = _snapshot(world["base"])
    res = CliRunner().invoke(main, args)
    assert res.exit_code in (1, 2), (args, res.exit_code, res.output)
    assert res.exception is None or isinstance(res.exception, SystemExit), (args, res.exception)
    assert "Traceback" not in res.output, (args, res.output)
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("Error")]
    assert len(errors) == 1, (args, res.output)
    if res.exit_code == 1:
        assert lines == errors, (args, res.output)
    assert _snapshot(world["base"]) == before, args
    assert not (world["base"] / "out").exists(), args
    return errors[0]


# -- every option of every command -----------------------------------------------------------

def _commands() -> list[tuple[list[str], click.Command]]:
    ctx = click.Context(main)
    out = []
    for name in sorted(COMMANDS):
        cmd = main.get_command(ctx, name)
        assert cmd is not None
        if isinstance(cmd, click.Group):
            out += [([name, sub], c) for sub, c in sorted(cmd.commands.items())]
        else:
            out.append(([name], cmd))
    return out


def _bad_values(param: click.Parameter) -> list[str]:
    """Values ``param`` must refuse: not numbers, numbers out of its range, not a choice."""
    t = param.type
    rng = getattr(param.callback, "range", None)
    if isinstance(t, click.Choice):
        return ["no-such-choice", ""]
    if t not in (click.INT, click.FLOAT) and not isinstance(t, (click.IntRange,
                                                                  click.FloatRange)):
        return []
    bad = ["abc", "1,5", "--"] + (["1.5", "1e3"] if t is click.INT else [])
    if isinstance(t, click.IntRange | click.FloatRange) and t.min is not None:
        bad.append(str(t.min - 1))
    if rng is not None:
        if rng.lo is not None:
            bad += [str(rng.lo - 1), str(-(10 ** 12))] + ([str(rng.lo)] if rng.lo_open else [])
        if rng.hi is not None:
            bad += [str(rng.hi + 1)] + ([str(rng.hi)] if rng.hi_open else [])
        if t is click.FLOAT:
            bad += ["nan", "inf", "-inf"]
    return bad


def _option_cases() -> list[tuple[list[str], str, str]]:
    cases = []
    for path, cmd in _commands():
        cases.append((path, "--no-such-option", "1"))
        for p in cmd.params:
            if isinstance(p, click.Option) and not p.is_flag and p.nargs == 1:
                cases += [(path, max(p.opts, key=len), v) for v in _bad_values(p)]
    return cases


OPTION_CASES = _option_cases()


def test_every_numeric_option_is_bounded_and_fuzzed():
    # mackay --newton-steps -1 was accepted: every number an option takes has its range
    for path, cmd in _commands():
        for p in cmd.params:
            if isinstance(p, click.Option) and p.type in (click.INT, click.FLOAT) \
                    and p.nargs == 1:
                assert getattr(p.callback, "range", None) is not None, (path, p.opts)
    named = {(" ".join(path), opt) for path, opt, _ in OPTION_CASES}
    for expected in (("mackay", "--newton-steps"), ("mackay", "--tol"), ("resume", "--workers"),
                     ("analyse", "--discard"), ("plot", "--dpi"), ("baseline", "--draws")):
        assert (expected[0], expected[1]) in named, expected
    assert len(OPTION_CASES) > 100


def test_every_bad_option_value_is_refused_in_one_line(world):
    # every case, not a sample: each is a parse error, milliseconds
    for path, option, value in OPTION_CASES:
        # the option first: Click checks parameters in the order given, so it is this one
        # that is refused, before any argument or work
        line = _refused(world, [*path, f"{option}={value}"])
        assert option in line or "no-such-option" in line, line


# -- every configuration key ------------------------------------------------------------------

def _schemas() -> list[tuple[str, str, str, tuple]]:
    from thermonet.annealing import config as ancfg
    from thermonet.evidence import config as evcfg

    out = []
    for section, keys in (("run", cfgmod.RUN_KEYS), ("data", cfgmod.DATA_KEYS),
                          ("init", cfgmod.INIT_KEYS), ("prior", cfgmod.PRIOR_KEYS),
                          ("sampler", cfgmod.SAMPLER_RUNNER_KEYS),
                          ("ladder", cfgmod.LADDER_KEYS)):
        out += [("run", section, k, v) for k, v in keys.items()]
    for section, keys in (("evidence", evcfg.EVIDENCE_KEYS), ("mackay", evcfg.MACKAY_KEYS),
                          ("data", evcfg.DATA_KEYS), ("laplace", evcfg.LAPLACE_KEYS)):
        out += [("evidence", section, k, v) for k, v in keys.items()]
    for section, keys in (("run", ancfg.ANNEAL_RUN_KEYS), ("anneal", ancfg.ANNEAL_KEYS)):
        out += [("anneal", section, k, v) for k, v in keys.items()]
    # the settings of the run's sampler plugin, by their annotations (types only: a plugin
    # checks its own ranges)
    kinds = {"int": (int,), "float": (float, int), "str": (str,), "bool": (bool,)}
    for f in dataclasses.fields(HMCConfig):
        ann = str(f.type).replace(" | None", "")
        types = (list,) if ann.startswith("tuple") else kinds.get(ann)
        if types is not None:
            out.append(("run", "sampler", f.name, (f.default, types, None, "")))
    return out


SCHEMAS = _schemas()

VALUES = st.one_of(
    st.integers(-(2 ** 63), 2 ** 63 - 1), st.sampled_from([0, -1, 1, 10 ** 9]),
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([math.nan, math.inf, -0.0]),
    st.text(alphabet="abcxyzD05", min_size=0, max_size=6), st.booleans(),
    st.lists(st.integers(-3, 3), max_size=3), st.lists(st.text("ab", max_size=2), max_size=2))


def _valid(value: Any, types: tuple[type, ...], check: Any) -> bool:
    if isinstance(value, bool) and bool not in types:
        return False
    if not (isinstance(value, types) or (float in types and isinstance(value, int))):
        return False
    if check is None:
        return True
    try:
        return bool(check[0](float(value) if float in types and isinstance(value, int)
                             and not isinstance(value, bool) else value))
    except (TypeError, ValueError, OverflowError):
        return False


def _invoke_config(world: dict[str, Any], command: str, sets: list[str]) -> str:
    runs = "run" if command == "file" else command
    args = ["-q", runs, str(world["configs"][command]), "--out", str(world["base"] / "out")]
    for item in sets:
        args += ["--set", item]
    return _refused(world, args)


def _entry(command: str, section: str, key: str) -> tuple[str, str, str, tuple]:
    return next(e for e in SCHEMAS if e[:3] == (command, section, key))


@FUZZ
@given(entry=st.sampled_from(SCHEMAS), value=VALUES)
@example(entry=_entry("evidence", "mackay", "tol"), value=-1)      # was "the wrong type"
@example(entry=_entry("run", "data", "standardise"), value="yes")
def test_a_bad_config_value_is_refused_in_one_line(world, entry, value):
    command, section, key, (_default, types, check, _help) = entry
    assume(not _valid(value, types, check))
    line = _invoke_config(world, command, [f"{section}.{key}={cfgmod.schema.toml_value(value)}"])
    assert f"{section}.{key}" in line or "data" in line, line
    if _valid(value, types, None):      # a value of the right type: out of range, not "wrong"
        assert "wrong type" not in line, line


@FUZZ
@given(command=st.sampled_from(["run", "evidence", "anneal"]),
       where=st.sampled_from(["run", "data", "ladder", "evidence", "mackay", "anneal",
                              "nosuchsection"]),
       key=st.text(alphabet="abcxyz_", min_size=1, max_size=8))
def test_an_unknown_config_key_is_refused_in_one_line(world, command, where, key):
    known = {(c, s, k) for c, s, k, _ in SCHEMAS}
    assume((command, where, key) not in known and key not in ("seed", "name"))
    line = _invoke_config(world, command, [f"{where}.{key}=1"])
    assert key in line or where in line, line


CONFLICTS = [
    ("file", ["data.name=D500"], "both name the training data"),
    ("file", ["data.test_path=GOOD", "data.split_column=x2"], "keep one"),
    ("file", ["data.test=official"], "data.test is for the named sets"),
    ("file", ["data.sha256=" + "0" * 64], "does not match"),
    ("run", ["data.outputs=[\"y\"]"], "data.path is not"),
    ("run", ["data.path=GOOD"], "both name the training data"),
    ("evidence", ["data.name=none"], "data.name = 'none'"),
]


@pytest.mark.parametrize("command, sets, expected", CONFLICTS)
def test_conflicting_config_keys_are_refused_in_one_line(world, command, sets, expected):
    good = str(world["base"] / "good.csv")
    line = _invoke_config(world, command, [s.replace("GOOD", good) for s in sets])
    assert expected in line, line
