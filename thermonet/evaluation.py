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
        ``test_energy``, ``test_energy_per_point``, ``train_error``, ``test_error`` (fractions),
        ``max_abs_grad``, ``in_prior_box``, ``log_prior_volume`` (= sum ln sigma_i), and the data
        set names, sizes and test-set kind.
    """
    prior = BoxPrior.for_architecture(arch) if prior is None else prior
    train, test = split.train, split.test
    pot_train = arch.potential(train)
    e_train, grad = pot_train.energy_and_grad(theta)
    e_test = arch.potential(test).energy(theta)
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
        "train_error": classification_error(arch, theta, train.x, train.y),
        "test_error": classification_error(arch, theta, test.x, test.y),
        "max_abs_grad": float(np.max(np.abs(grad))) if grad.size else 0.0,
        "in_prior_box": prior.contains(theta),
        "n_outside_prior_box": prior.n_outside(theta),
        "log_prior_volume": prior.log_volume,
    }
