"""Full-batch simulated annealing with early stopping on a validation set.

Baldock & Marzari (arXiv:1904.04154, Secs. 3 and 5) observe a minimum of the test error at
T > 0 and propose: "cool until the average validation error starts to increase, then revert to
the parameters with the lowest validation error". This module implements that procedure:

1. start hot from a standard initial draw (or its minimum, or a parameter file);
2. visit a decreasing schedule of temperatures T_0 > T_1 > ... (geometric by default). At each
   temperature: adapt the HMC step size (:meth:`thermonet.samplers.hmc.HMC.adapt`, extra
   trajectories that are not part of the chain; again every ``adapt_every`` trajectories if
   set), then run ``n_trajectories`` HMC trajectories (Algorithm 1, box prior) on the full
   training set, and after each one evaluate the classification error and energy of the
   current parameters on a **validation set**;
3. record at each temperature the average validation error over its trajectories (after the
   first ``burn_in``), the average training energy E(D|w), and the best single parameter vector;
4. stop when the average validation error "starts to increase" (:func:`stop_index`: ``patience``
   temperatures in a row without improving on the best running average of ``window``
   temperatures by more than ``min_delta``), or at the end of the schedule;
5. return the parameter vector with the lowest validation error seen at any trajectory (ties:
   the lower validation energy, then the earlier one), and report its test error and energy.

The validation set
------------------
``n_validation`` images, ``n_validation/10`` per class, drawn (seeded by ``run.seed``) from the
MNIST training images that are not in the training set: the full MNIST training set if the
MNIST files are found (``validation_pool = "mnist"``), else the training images embedded in
thermonet (the union of D50, D500 and D5000; ``"embedded"``). The default ``"auto"`` takes the
first that is available. The validation set never overlaps the test set: the official test set
holds no MNIST training image, and when the test set is the complement of the training set the
validation images are removed from it (the test set is then ``complement(D500) - validation``).
On a regression set (the robot arm) the validation set is ``n_validation`` cases held out of
the training set by a seeded permutation (:func:`hold_out`; ``validation_pool = "train"`` or
``"auto"``), the anneal samples on the rest, and the errors are squared errors summed over the
outputs and averaged over the cases (Neal 1993's measure).

Reproducibility
---------------
Every random stream comes from ``SeedSequence(run.seed).spawn(3)``: child 0 draws the initial
parameters, child 1 drives the chain (momenta, accept/reject, adaptation), child 2 selects the
validation images. The state of the chain, its random generator and the per-temperature table
are written atomically to ``DIR/anneal.h5`` after every temperature, so an interrupted anneal
resumes bit for bit.

The package: :mod:`.config` (the anneal configuration), :mod:`.schedule` (temperatures and the
stopping rule), :mod:`.validation` (the validation set), :mod:`.store` (``anneal.h5``) and
:mod:`.annealer` (:class:`Annealer`).
"""

from __future__ import annotations

from thermonet.annealing.annealer import (
    TABLE_COLUMNS,
    Annealer,
    AnnealResult,
    Setup,
    build,
    log,
)
from thermonet.annealing.config import (
    ANNEAL_KEYS,
    ANNEAL_RUN_KEYS,
    ANNEAL_SECTIONS,
    STARTS,
    VALIDATION_POOLS,
    load_config,
    resolve_config,
    sampler_config,
)
from thermonet.annealing.schedule import (
    best_index,
    geometric_schedule,
    running_average,
    schedule_of,
    stop_index,
)
from thermonet.annealing.store import (
    ANNEAL_FORMAT,
    ANNEAL_FORMAT_VERSION,
    ANNEAL_H5,
    ANNEAL_JSON,
    chain_state,
    read_anneal,
    read_chain,
    write_chain,
)
from thermonet.annealing.validation import (
    hold_out,
    make_validation,
    validation_pool_images,
    without,
)

__all__ = [
    "ANNEAL_FORMAT",
    "ANNEAL_FORMAT_VERSION",
    "ANNEAL_H5",
    "ANNEAL_JSON",
    "ANNEAL_KEYS",
    "ANNEAL_RUN_KEYS",
    "ANNEAL_SECTIONS",
    "STARTS",
    "TABLE_COLUMNS",
    "VALIDATION_POOLS",
    "AnnealResult",
    "Annealer",
    "Setup",
    "best_index",
    "build",
    "chain_state",
    "geometric_schedule",
    "hold_out",
    "load_config",
    "log",
    "make_validation",
    "read_anneal",
    "read_chain",
    "resolve_config",
    "running_average",
    "sampler_config",
    "schedule_of",
    "stop_index",
    "validation_pool_images",
    "without",
    "write_chain",
]
