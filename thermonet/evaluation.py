"""Evaluate a parameter vector: energies, errors, gradient size and prior membership."""

from __future__ import annotations

from typing import Any

import numpy as np

from thermonet.api import Architecture
from thermonet.priors import BoxPrior
from thermonet.types import FloatArray


def classification_error(arch: Architecture, theta: FloatArray, x: FloatArray,
                         y: np.ndarray) -> float:
    """Fraction of data points whose most probable class is not the label (ties: lowest)."""
    if len(y) == 0:
        return float("nan")
    p = arch.predict_proba(theta, x)
    return float(np.mean(np.argmax(p, axis=1) != y))


def squared_error(arch: Any, theta: FloatArray, data: Any) -> float:
    """Squared error of the network's outputs summed over the outputs, averaged over the cases
    of a regression set, in the data file's units (Neal 1993's measure). ``arch`` is a
    regression architecture (it has ``predict``)."""
    from thermonet.data import to_original_units

    if len(data) == 0:
        return float("nan")
    f, y = to_original_units(data, arch.predict(theta, data.x))
    return float(np.mean(np.sum((f - y) ** 2, axis=1)))


def prediction_error(arch: Architecture, theta: FloatArray, data: Any) -> float:
    """:func:`classification_error` on a classification set, :func:`squared_error` on a
    regression set."""
    if data.task == "regression":
        return squared_error(arch, theta, data)
    return classification_error(arch, theta, data.x, data.y)


def evaluate(arch: Architecture, split: Any, theta: FloatArray,
             prior: BoxPrior | None = None) -> dict[str, Any]:
    """Training and test energy (total and per point), errors, max |dE/dw| and the box.

    Parameters
    ----------
    arch : Architecture
    split : DataSplit (``.train``, ``.test``, ``.test_kind``)
    theta : ndarray of float64, shape (n_params,)
    prior : BoxPrior, optional
        Defaults to the paper's box for ``arch``.

    Returns
    -------
    dict
        JSON-serialisable: ``n_params``, ``train_energy``, ``train_energy_per_point``,
        ``test_energy``, ``test_energy_per_point``, ``train_error``, ``test_error`` (fractions
        misclassified, or squared errors of a regression set: ``error_kind``),
        ``max_abs_grad``, ``in_prior_box``, ``log_prior_volume`` (= sum ln sigma_i), and the data
        set names, sizes and test-set kind.
    """
    prior = BoxPrior.for_architecture(arch) if prior is None else prior
    train, test = split.train, split.test
    pot_train, pot_test = arch.potential(train), arch.potential(test)
    _, grad = pot_train.energy_and_grad(theta)
    # E(D|w): a regression network's potential also holds its Gaussian prior term
    e_train = getattr(pot_train, "likelihood_energy", pot_train.energy)(theta)
    e_test = getattr(pot_test, "likelihood_energy", pot_test.energy)(theta)
    n_tr, n_te = len(train.y), len(test.y)
    return {
        "architecture": arch.describe(),
        "n_params": int(arch.n_params),
        "train_set": train.name,
        "n_train": n_tr,
        "test_set": test.name,
        "test_kind": split.test_kind,
        "n_test": n_te,
        "train_energy": float(e_train),
        "train_energy_per_point": float(e_train / n_tr) if n_tr else float("nan"),
        "test_energy": float(e_test),
        "test_energy_per_point": float(e_test / n_te) if n_te else float("nan"),
        "error_kind": "squared" if train.task == "regression" else "classification",
        "train_error": prediction_error(arch, theta, train),
        "test_error": prediction_error(arch, theta, test),
        "max_abs_grad": float(np.max(np.abs(grad))) if grad.size else 0.0,
        "in_prior_box": prior.contains(theta),
        "n_outside_prior_box": prior.n_outside(theta),
        "log_prior_volume": prior.log_volume,
    }
