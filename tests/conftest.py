"""Shared fixtures.

MNIST is located only through thermonet's own mechanism, the ``THERMONET_MNIST_DIR``
environment variable (CI sets it to ../shared/data/mnist). Tests that need the full MNIST files
are skipped without it, except under CI (``CI`` set), where a missing MNIST is a failure so that
nothing is skipped silently.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from tests.runs import TINY
from tests.source_plugins import source_entry_points, with_source_plugins

ROOT = Path(__file__).resolve().parents[1]


def _mnist_missing_reason() -> str | None:
    value = os.environ.get("THERMONET_MNIST_DIR")
    if value and Path(value).is_dir():
        return None
    return ("full MNIST not available: set THERMONET_MNIST_DIR to the directory holding the four "
            "IDX files")


def pytest_configure(config: pytest.Config) -> None:
    """Hypothesis's profile for the tier, and the kernels compiled once before xdist's workers
    start (each worker would otherwise compile the same kernels into the shared cache)."""
    from hypothesis import HealthCheck, settings

    common = {"deadline": None, "derandomize": True, "database": None,
              "suppress_health_check": list(HealthCheck)}
    settings.register_profile("full", max_examples=300, **common)
    settings.register_profile("dev", max_examples=40, **common)
    developer = "not slow" in (config.getoption("markexpr", "") or "")
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE",
                                         "dev" if developer else "full"))
    controller = not hasattr(config, "workerinput")
    if controller and (getattr(config.option, "numprocesses", None) or 0) > 0:
        _compile_kernels()


def _compile_kernels() -> None:
    """Run the embedded M(3) set-up for one iteration in a child process: it compiles the
    MLP, leapfrog and minimiser kernels into Numba's on-disk cache, which the workers then
    load. A failure here is left for the tests themselves to report."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "thermonet", "-q", "run",
                        str(ROOT / "tests" / "configs" / "re_small.toml"), "--out",
                        str(Path(tmp) / "run"), "--set", "run.n_iterations=1",
                        "--set", "minimiser.max_steps=2", "--set", "init.burn_in=[1, 1]"],
                       cwd=tmp, capture_output=True, check=False, timeout=900)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test that uses the ``mnist_dir`` fixture needs full MNIST: mark it ``mnist`` so that
    ``-m "not mnist"`` deselects it. An ``mpi`` test is also ``slow``.

    Files then run in the order pytest-xdist hands them out (``--no-loadscope-reorder``): those
    with the most slow tests first, then those with the most tests. Handed out by their number
    of tests alone, a file of two minute-long tests came last and kept one core busy while the
    other idled."""
    for item in items:
        if "mnist_dir" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.mnist)
        # an MPI test launches whole jobs under mpiexec: end to end, so in the full suite only
        if item.get_closest_marker("mpi") is not None:
            item.add_marker(pytest.mark.slow)
    tests = Counter(item.path for item in items)
    slow = Counter(item.path for item in items if item.get_closest_marker("slow") is not None)
    items.sort(key=lambda item: (-slow[item.path], -tests[item.path], str(item.path)))


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Tests marked ``mnist`` skip with a reason when the MNIST files are not there (and fail
    under CI, which must run every test)."""
    if item.get_closest_marker("mnist") is None:
        return
    reason = _mnist_missing_reason()
    if reason is None:
        return
    if os.environ.get("CI"):
        pytest.fail(reason + " (CI must run every test)")
    pytest.skip(reason)


@pytest.fixture(scope="session", autouse=True)
def source_tree_plugins():
    """Built-in plugins come only from entry-point metadata (thermonet.registry), and the
    shared environment's metadata is that of the checkout it was installed from, which may
    predate this tree's setup.cfg. So the tests register, through the registry's discovery
    seam, every built-in this setup.cfg declares and the installed metadata lacks. Nothing
    already installed is replaced; with current metadata this adds nothing."""
    from thermonet import registry

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(registry, "_entry_points", with_source_plugins(registry._entry_points))
        registry.refresh()
        yield source_entry_points()
    registry.refresh()


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20190410)


@pytest.fixture(scope="session")
def mnist_dir() -> Path:
    value = os.environ.get("THERMONET_MNIST_DIR")
    if value and Path(value).is_dir():
        return Path(value)
    msg = ("full MNIST not available: set THERMONET_MNIST_DIR to the directory holding the four "
           "IDX files")
    if os.environ.get("CI"):
        pytest.fail(msg + " (CI must run every test)")
    pytest.skip(msg)


@pytest.fixture(scope="session")
def d50():
    """The paper's D50 training set (available offline from the embedded data)."""
    from thermonet.data import load_dataset

    return load_dataset("D50")


@pytest.fixture(scope="session")
def d500():
    from thermonet.data import load_dataset

    return load_dataset("D500")


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory) -> Path:
    """The tiny run (tests/configs/tiny.toml) run once per session: a finished 12-iteration
    run directory. Read it only; a test that changes a run takes :func:`tiny_run_copy`."""
    from thermonet.config import load
    from thermonet.runner import Run, detach_log

    base = tmp_path_factory.mktemp("tiny")
    (base / "tiny.toml").write_text(TINY)
    try:
        Run.create(load(base / "tiny.toml"), base / "run").run(quiet=True)
    finally:
        detach_log()
    return base / "run"


@pytest.fixture
def tiny_run_copy(tiny_run, tmp_path) -> Path:
    """A copy of :func:`tiny_run` of this test's own."""
    return Path(shutil.copytree(tiny_run, tmp_path / "run"))
