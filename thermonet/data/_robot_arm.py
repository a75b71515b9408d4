"""The robot-arm regression problem (MacKay 1992; Neal 1993, Sec. 3, eqs. 17-18).

Two joint angles to the two coordinates of the arm's end:

    y1 = 2.0 cos(x1) + 1.3 cos(x1 + x2) + e1,    y2 = 2.0 sin(x1) + 1.3 sin(x1 + x2) + e2,

with Gaussian noise e of standard deviation 0.05, x1 uniform on [-1.932, -0.453] u
[+0.453, +1.932] and x2 uniform on [0.534, 3.142]; 200 training and 200 test cases. MacKay's
own draws are not published, so thermonet draws its set once from a seed
(:func:`generate`) and ships it (``embedded/robot_arm.h5``) with its provenance; loading
reads the file, and a test checks that the generator still reproduces it.

A 200-case test set measures a predictive error only to about ±0.0005 (its own noise), so
:func:`large_test` draws 10,000 more test cases from the same generator and a fixed seed of
its own (:data:`LARGE_TEST_SEED`), with their noise-free targets; a test pins their checksum.
Neal's own 10,000-case test set is not published either.
"""

from __future__ import annotations

import functools
import json
import pathlib
from typing import Any

import h5py
import numpy as np

from thermonet.errors import DataError

ROBOT_ARM_PATH = pathlib.Path(__file__).resolve().parent / "embedded" / "robot_arm.h5"
NAME = "robot-arm"
SEED = 1993
NOISE_STD = 0.05
N_CASES = 200
X1_RANGE = (0.453, 1.932)        # |x1|, either sign
X2_RANGE = (0.534, 3.142)
#: the seed of the 10,000-case test set (:func:`large_test`): a stream apart from ``SEED``'s
LARGE_TEST_SEED = 19930
LARGE_TEST_N = 10_000
LARGE_TEST_COLUMNS = ("x1", "x2", "y1", "y2", "f1", "f2")


def arm(x: np.ndarray) -> np.ndarray:
    """The noise-free positions ``(y1, y2)`` of inputs ``x`` of shape ``(n, 2)``."""
    x1, x2 = x[:, 0], x[:, 1]
    return np.stack([2.0 * np.cos(x1) + 1.3 * np.cos(x1 + x2),
                     2.0 * np.sin(x1) + 1.3 * np.sin(x1 + x2)], axis=1)


def _draw(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    sign = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    x1 = sign * rng.uniform(*X1_RANGE, size=n)
    x2 = rng.uniform(*X2_RANGE, size=n)
    x = np.stack([x1, x2], axis=1)
    return x, arm(x) + NOISE_STD * rng.standard_normal((n, 2))


def generate(seed: int = SEED, n: int = N_CASES) -> dict[str, np.ndarray]:
    """Training then test cases from ``numpy.random.default_rng(seed)`` (PCG64): for each
    set, n signs of x1, n |x1|, n x2 and n x 2 noise normals, in that order."""
    rng = np.random.default_rng(seed)
    x_tr, y_tr = _draw(rng, n)
    x_te, y_te = _draw(rng, n)
    return {"x_train": x_tr, "y_train": y_tr, "x_test": x_te, "y_test": y_te}


def large_test(n: int = LARGE_TEST_N) -> dict[str, np.ndarray]:
    """``n`` test cases (default 10,000) from ``numpy.random.default_rng(LARGE_TEST_SEED)``,
    drawn as :func:`generate` draws a set: ``{"x", "y", "f"}``, ``f`` the noise-free targets
    :func:`arm` of ``x``. A case's draws depend on ``n``; 10,000 is the shipped set."""
    x, y = _draw(np.random.default_rng(LARGE_TEST_SEED), n)
    return {"x": x, "y": y, "f": arm(x)}


def write_large_test(path: str | pathlib.Path, n: int = LARGE_TEST_N) -> pathlib.Path:
    """:func:`large_test` as a CSV file with the columns x1, x2, y1, y2 (noisy targets) and
    f1, f2 (noise-free), 17 significant digits."""
    cases = large_test(n)
    table = np.concatenate([cases["x"], cases["y"], cases["f"]], axis=1)
    out = pathlib.Path(path)
    np.savetxt(out, table, delimiter=",", fmt="%.17g", header=",".join(LARGE_TEST_COLUMNS),
               comments="")
    return out


def provenance(seed: int = SEED, n: int = N_CASES) -> dict[str, Any]:
    return {"source": "generated", "problem": "robot arm (MacKay 1992; Neal 1993 eqs. 17-18)",
            "seed": seed, "n_train": n, "n_test": n, "noise_std": NOISE_STD,
            "x1_abs_range": list(X1_RANGE), "x2_range": list(X2_RANGE),
            "generator": "thermonet.data._robot_arm.generate (numpy PCG64)",
            "numpy": np.__version__}


def write(path: pathlib.Path = ROBOT_ARM_PATH, seed: int = SEED) -> None:
    """Write the stored set (run once by the maintainers; the file is shipped)."""
    arrays = generate(seed)
    with h5py.File(path, "w") as fh:
        fh.attrs["format"] = "thermonet.robot_arm"
        fh.attrs["format_version"] = 1
        fh.attrs["provenance"] = json.dumps(provenance(seed))
        for key, arr in arrays.items():
            fh.create_dataset(key, data=arr)


@functools.cache
def read(path: pathlib.Path = ROBOT_ARM_PATH) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The stored arrays and their provenance."""
    try:
        with h5py.File(path, "r") as fh:
            if fh.attrs.get("format") != "thermonet.robot_arm":
                raise DataError(f"{path} is not a thermonet robot-arm file (format "
                                f"{fh.attrs.get('format')!r}); reinstall thermonet")
            arrays = {k: np.asarray(fh[k][()], dtype=np.float64)
                      for k in ("x_train", "y_train", "x_test", "y_test")}
            prov = json.loads(fh.attrs["provenance"])
    except (OSError, KeyError) as err:
        raise DataError(f"cannot read the robot-arm data {path}: {err}; reinstall thermonet "
                        "or regenerate it with thermonet.data.write_robot_arm()") from None
    return arrays, prov
