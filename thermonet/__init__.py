"""thermonet: Bayesian neural networks at finite temperature.

Samples the temperature-adjusted posterior prob(w | T, D) ∝ exp(-E(D|w)/T) prior(w) of
neural networks (Baldock & Marzari 2019, arXiv:1904.04154).

Importing this package is cheap: it compiles nothing and imports no Numba code. The public
surface is imported lazily on first use::

    import thermonet as tn
    split = tn.load_data("D50")                        # training and test set
    arch = tn.get_architecture("M3")                   # 256-40-40-40-10
    pot = arch.potential(split.train)                  # E(D|w) and its gradient
    prior = tn.BoxPrior.for_architecture(arch)         # the paper's box prior
    ladder = tn.Ladder.geometric(t_min=0.1, t_max=10.0, n=8)
    engine = tn.ReplicaExchange(tn.HMC, pot, ladder, prior=prior)
    streams = engine.make_streams(seed=1)
    state = engine.burn_in(arch.initial_draw, streams, blocks=(5, 5))
    for state, info in tn.sample(engine, state, streams, n=10):
        ...
    tn.run("sample_runs/quickstart.toml", out="runs/quickstart")   # = thermonet run
    rec = tn.open_run("runs/quickstart")               # the run, read back
    pred = rec.predict("mnist-t10k")                   # posterior predictive on new data

Plugin authors use :mod:`thermonet.api`; the workflows live in :mod:`thermonet.analysis`,
:mod:`thermonet.evidence`, :mod:`thermonet.annealing` and :mod:`thermonet.plotting`.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_LAZY = {
    # data and models
    "load_data": "thermonet.data",
    "load_dataset": "thermonet.data",
    "Dataset": "thermonet.data",
    "DataSplit": "thermonet.data",
    "get_architecture": "thermonet.registry",
    "get_sampler": "thermonet.registry",
    "get_minimiser": "thermonet.registry",
    "MLP": "thermonet.architectures.mlp",
    "BoxPrior": "thermonet.priors",
    "GaussianPrior": "thermonet.priors",
    # sampling
    "HMC": "thermonet.samplers.hmc",
    "Ladder": "thermonet.tempering",
    "ReplicaExchange": "thermonet.tempering",
    "sample": "thermonet.tempering",
    # runs
    "Run": "thermonet.runner",
    "run": "thermonet.runner",
    "evaluate": "thermonet.evaluation",
    # finished runs, read back
    "open_run": "thermonet.analysis.run_record",
    "RunRecord": "thermonet.analysis.run_record",
}

__all__ = ["__version__", *sorted(_LAZY)]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'thermonet' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
