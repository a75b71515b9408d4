"""Shared fixtures.

MNIST is located only through thermonet's own mechanism, the ``THERMONET_MNIST_DIR``
environment variable (CI sets it to ../shared/data/mnist). Tests that need the full MNIST files
are skipped without it, except under CI (``CI`` set), where a missing MNIST is a failure so that
nothing is skipped silently.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from tests.source_plugins import source_entry_points, with_source_plugins


def _mnist_missing_reason() -> str | None:
    value = os.environ.get("THERMONET_MNIST_DIR")
    if value and Path(value).is_dir():
        return None
    return ("full MNIST not available: set THERMONET_MNIST_DIR to the directory holding the four "
            "IDX files")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test that uses the ``mnist_dir`` fixture needs full MNIST: mark it ``mnist`` so that
    ``-m "not mnist"`` deselects it."""
    for item in items:
        if "mnist_dir" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.mnist)


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
