"""The robot arm's 10,000-case test set: pinned draws, the generator's law, the CSV writer and
`thermonet data robot-arm-test`."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
from click.testing import CliRunner

from thermonet.cli import main
from thermonet.data import (
    ROBOT_ARM_LARGE_TEST_COLUMNS,
    ROBOT_ARM_LARGE_TEST_SEED,
    load_data,
    robot_arm_function,
    robot_arm_large_test,
)

#: SHA-256 of the inputs and noisy targets (float64, C order, [x1 x2 y1 y2] per case): a
#: change of NumPy's PCG64 stream or of the draw order changes the shipped set and fails here
CHECKSUM = "dc823b68cd943c09b48914a3a074e06fd94342be85318c7a680ba97a79c36b15"


@pytest.fixture(scope="module")
def cases():
    return robot_arm_large_test()


def test_the_draws_are_pinned(cases):
    table = np.concatenate([cases["x"], cases["y"]], axis=1)
    assert table.shape == (10_000, 4) and table.dtype == np.float64
    assert hashlib.sha256(np.ascontiguousarray(table).tobytes()).hexdigest() == CHECKSUM
    assert ROBOT_ARM_LARGE_TEST_SEED == 19930


def test_the_cases_follow_the_generator_and_differ_from_the_stored_set(cases):
    x, y, f = cases["x"], cases["y"], cases["f"]
    np.testing.assert_array_equal(f, robot_arm_function(x))
    assert np.all((np.abs(x[:, 0]) >= 0.453) & (np.abs(x[:, 0]) <= 1.932))
    assert np.all((x[:, 1] >= 0.534) & (x[:, 1] <= 3.142))
    # the noise: 20,000 N(0, 0.05^2) draws; the summed square per case has mean 0.005 and sd
    # 0.005 (chi-square with 2 degrees of freedom), so its mean over 10,000 cases has se 5e-5
    per_case = np.sum((y - f) ** 2, axis=1)
    assert abs(per_case.mean() - 0.005) < 4 * 5e-5
    assert abs(np.mean(x[:, 0] < 0) - 0.5) < 4 * 0.005             # either sign of x1
    split = load_data("robot-arm")
    stored = np.concatenate([split.train.x, split.test.x])
    assert not np.isin(x[:, 1], stored[:, 1]).any()                  # a stream of its own


def test_the_csv_and_the_command_write_the_same_cases(cases, tmp_path):
    out = tmp_path / "ra.csv"
    res = CliRunner().invoke(main, ["data", "robot-arm-test", str(out)])
    assert res.exit_code == 0, res.output
    assert res.output.startswith(f"wrote {out}: 10,000 cases")
    header = out.read_text().splitlines()[0]
    assert header == ",".join(ROBOT_ARM_LARGE_TEST_COLUMNS) == "x1,x2,y1,y2,f1,f2"
    table = np.loadtxt(out, delimiter=",", skiprows=1)
    np.testing.assert_array_equal(table, np.concatenate([cases["x"], cases["y"], cases["f"]],
                                                        axis=1))     # %.17g round-trips
    bad = CliRunner().invoke(main, ["data", "robot-arm-test", str(tmp_path / "ra.npz")])
    assert bad.exit_code == 1 and "expected a .csv file name" in bad.output
