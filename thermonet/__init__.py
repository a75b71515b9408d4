"""thermonet: Bayesian neural networks at finite temperature.

Samples the temperature-adjusted posterior prob(w | T, D) ∝ exp(-E(D|w)/T) prior(w) of
neural-network classifiers (Baldock & Marzari 2019, arXiv:1904.04154).

Importing this package is cheap: it compiles nothing and imports no Numba code. The public
entry points are imported lazily on first use::

    import thermonet as tn
    split = tn.load_data("D500")            # training set and test set
    arch = tn.get_architecture("M3")         # 256-40-40-40-10, linear output
    pot = arch.potential(split.train)        # E(D|w) and its gradient
    prior = tn.BoxPrior.for_architecture(arch)
    w = prior.initial_draw(np.random.default_rng(0))
    e, g = pot.energy_and_grad(w)
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "load_data": "thermonet.data",
    "load_dataset": "thermonet.data",
    "Dataset": "thermonet.data",
    "DataSplit": "thermonet.data",
    "get_architecture": "thermonet.architectures",
    "MLP": "thermonet.architectures.mlp",
    "BoxPrior": "thermonet.priors",
    "GaussianPrior": "thermonet.priors",
    "evaluate": "thermonet.evaluation",
}

__all__ = ["__version__", *sorted(_LAZY)]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'thermonet' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
