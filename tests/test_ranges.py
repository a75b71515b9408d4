"""One range check for a configuration key and the command-line option of the same meaning
(thermonet.ranges): out-of-range values are refused in one line that says so, not as a
wrong type, and never accepted silently."""

from __future__ import annotations

import math

import pytest
from click.testing import CliRunner

from tests.evidence.test_evidence_cli import MACKAY_CONFIG
from thermonet.cli import main
from thermonet.errors import ConfigError
from thermonet.ranges import COUNT, FRACTION, NON_NEGATIVE_INT, POSITIVE, Range


def _one_error_line(res) -> str:
    assert "Traceback" not in res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1, res.output
    return lines[0]


def test_ranges_hold_what_their_text_says():
    assert COUNT.text == "an integer >= 1" and NON_NEGATIVE_INT.text == "an integer >= 0"
    assert POSITIVE.text == "a finite number > 0" and FRACTION.text == "a finite number in [0, 1)"
    assert [COUNT.test(v) for v in (1, 0, 1.5, True, "1")] == [True, False, False, False, False]
    assert [POSITIVE.test(v) for v in (1e-300, 0, -1, math.nan, math.inf, 3)] == \
        [True, False, False, False, False, True]
    assert [FRACTION.test(v) for v in (0, 0.5, 1, -0.0)] == [True, True, False, True]
    assert Range(hi=2, hi_open=True).text == "a finite number < 2"
    with pytest.raises(ConfigError, match=r"^x = -1 is out of range; expected an integer >= 0; "
                                          r"fix it$"):
        NON_NEGATIVE_INT.check("x", -1, "fix it")


@pytest.mark.parametrize("option, value, expected", [
    ("--newton-steps", "-1", "--newton-steps = -1 is out of range; expected an integer >= 0"),
    ("--restarts", "0", "--restarts = 0 is out of range; expected an integer >= 1"),
    ("--max-iter", "0", "--max-iter = 0 is out of range; expected an integer >= 1"),
    ("--tol", "-1", "--tol = -1.0 is out of range; expected a finite number > 0"),
    ("--tol", "nan", "--tol = nan is out of range"),
])
def test_mackay_refuses_out_of_range_options_before_any_work(option, value, expected,
                                                             monkeypatch):
    import thermonet.data

    def no_work(*args, **kwargs):
        raise AssertionError("worked before checking the options")

    monkeypatch.setattr(thermonet.data, "load_data", no_work)
    args = ["mackay", "--hidden", "1", "--restarts", "1", option, value]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 1, res.output
    line = _one_error_line(res)
    assert expected in line and f"e.g. {option} " in line


def test_the_regression_sweep_refuses_a_classification_set():
    # it ran for minutes and printed log evidence nan, "conv no", exit 0
    res = CliRunner().invoke(main, ["-q", "mackay", "--hidden", "1", "--restarts", "1",
                                    "--data", "D50"])
    assert res.exit_code == 1, res.output
    line = _one_error_line(res)
    assert "classification set" in line and "robot-arm" in line and "--arch" in line


@pytest.fixture
def mackay_cfg(tmp_path):
    p = tmp_path / "E.toml"
    p.write_text(MACKAY_CONFIG)
    return p


@pytest.mark.parametrize("sets, expected", [
    (["mackay.tol=-1"], "mackay.tol = -1.0 is out of range; expected a finite number > 0"),
    (["data.name=none"], "data.name = 'none' (no data"),
])
def test_evidence_mackay_settings_are_refused_for_what_they_are(mackay_cfg, tmp_path, sets,
                                                                 expected):
    args = ["-q", "evidence", str(mackay_cfg), "--out", str(tmp_path / "out")]
    for s in ["evidence.method=mackay", *sets]:
        args += ["--set", s]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 1, res.output
    line = _one_error_line(res)
    assert expected in line and "wrong type" not in line and "unknown data set" not in line
    assert not (tmp_path / "out").exists()


def test_an_integer_is_a_number(mackay_cfg):
    from thermonet.evidence import config as evcfg

    cfg = evcfg.load(mackay_cfg, {"mackay.tol": 1})
    assert cfg["mackay"]["tol"] == 1.0 and isinstance(cfg["mackay"]["tol"], float)

