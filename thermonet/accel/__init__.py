"""Engines that advance the replicas somewhere other than thermonet's compiled CPU kernels.

``[run] engine = "numba"`` (the default) runs each slot's trajectories in the compiled kernels,
slots spread over threads or MPI ranks. ``engine = "jax"`` evaluates the network in JAX and
advances every slot of the ladder at once as batched arrays (:mod:`thermonet.accel.batcher`,
:mod:`thermonet.accel.jax_potential`): on a GPU the whole ladder is one batched computation.
The samplers, the warm-up, the swaps and the files are the same for both engines.
"""

from __future__ import annotations

import logging
from typing import Any

from thermonet.errors import ConfigError

#: the ``[run] engine`` values
ENGINES = ("numba", "jax")


def require_jax() -> Any:
    """The ``jax`` module, or a one-line error saying how to install it."""
    # JAX logs at INFO every platform it could not open (TPU on a GPU machine): not news here
    logging.getLogger("jax._src.xla_bridge").setLevel(logging.WARNING)
    try:
        import jax
    except ImportError as err:
        raise ConfigError(f"engine = 'jax' needs JAX, which is not importable here ({err}); "
                          "install it with `pip install thermonet[jax]` (a GPU build: "
                          "`pip install jax[cuda12]`), or use engine = 'numba'") from None
    return jax


def jax_engine_parts(potential: Any, n_slots: int) -> tuple[Any, Any]:
    """The JAX engine's potential (``potential`` evaluated in JAX) and the executor that
    batches the ``n_slots`` slots' requests."""
    require_jax()
    from thermonet.accel.batcher import Batcher, BatchingExecutor
    from thermonet.accel.jax_potential import wrap

    batcher = Batcher(n_slots)
    return wrap(potential, batcher), BatchingExecutor(batcher)


def device_description() -> str:
    """What JAX computes on, in words (``cpu``, or the GPU's name)."""
    jax = require_jax()
    dev = jax.devices()[0]
    return f"{dev.platform}: {getattr(dev, 'device_kind', dev.platform)}"
