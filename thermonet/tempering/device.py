"""Replica exchange with the whole ladder on one device (``[run] engine = "jax"``).

:class:`DeviceReplicaExchange` is :class:`~thermonet.tempering.ReplicaExchange` whose
iterations run as one compiled function on the device when every slot's transition can be
described as data (:meth:`thermonet.api.Sampler.hmc_transition`; a prior rung drawing from the
box) and the potential is evaluated in JAX (:mod:`thermonet.accel`). The state then stays on
the device between iterations; the slots' states are copied back only when something reads
them (a stored sample, a checkpoint, an adaptation). Anything else (the warm-up's step-size
adaptation, samplers with windows or hyperparameters) runs through the inherited code, slot by
slot, with the slots' potential evaluations batched (:mod:`thermonet.accel.batcher`).

Random numbers: each device iteration draws two 32-bit words from the swap stream (so a
checkpoint holds everything it needs) and keys JAX's generator with them and the iteration
number. The chain is therefore not the CPU engine's chain draw for draw, but it has the same
transition kernel: the two engines agree in distribution (tests/accel/test_accel.py).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from thermonet.tempering.exchange import REInfo, ReplicaExchange, REState, Streams
from thermonet.tempering.ladder import Ladder
from thermonet.tempering.prior_rung import PriorRung
from thermonet.tempering.swaps import RandomPairs


class DeviceSlots(Sequence[Any]):
    """The slots' sampler states, copied from the device on first access."""

    def __init__(self, device: Any, state_cls_k: Sequence[type]) -> None:
        self.device = device
        self._cls = list(state_cls_k)
        self._host: tuple[Any, ...] | None = None

    def _states(self) -> tuple[Any, ...]:
        if self._host is None:
            d = self.device
            theta, grad = np.asarray(d.theta), np.asarray(d.grad)
            energy, dt = np.asarray(d.energy), np.asarray(d.step_size)
            self._host = tuple(
                cls(theta=np.ascontiguousarray(theta[k]), energy=float(energy[k]),
                    grad=np.ascontiguousarray(grad[k]), step_size=float(dt[k]))
                for k, cls in enumerate(self._cls))
        return self._host

    def __len__(self) -> int:
        return len(self._cls)

    def __getitem__(self, k: Any) -> Any:
        return self._states()[k]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._states())


class DeviceReplicaExchange(ReplicaExchange):
    """:class:`ReplicaExchange` with iterations on the device where possible (module
    docstring); the arguments are :class:`ReplicaExchange`'s."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._kernels: dict[Any, Any] = {}
        self._prepared: tuple[Any, Any, Any] | None = None
        self._last: tuple[REState, Any] | None = None
        super().__init__(*args, **kwargs)

    def _build_samplers(self, ladder: Ladder) -> None:
        super()._build_samplers(ladder)
        self._prepared = None          # temperatures or masses changed: new constants

    # -- what the device can run ---------------------------------------------------------------

    def device_settings(self) -> Any:
        """The ladder's :class:`thermonet.accel.jax_ladder.LadderSettings`, or None when some
        part of an iteration cannot run on the device (it then runs slot by slot)."""
        from thermonet.accel.jax_ladder import SCHEMES, LadderSettings

        spec = getattr(self.potential, "spec", None)
        if spec is None or not hasattr(self.potential, "network"):
            return None
        if self.swap.name not in SCHEMES:
            return None
        transitions, prior_k, potentials = [], [], []
        for sampler in self.samplers:
            if isinstance(sampler, PriorRung):
                if not sampler.draws_from_box:
                    return None
                transitions.append(sampler.inner.hmc_transition())
                prior_k.append(True)
            else:
                transitions.append(sampler.hmc_transition())
                prior_k.append(False)
            potentials.append(sampler.potential)
        if any(t is None for t in transitions):
            return None
        first = transitions[0]
        shared = {(t.n_leapfrog, t.step_size_jitter, t.n_leapfrog_jitter, t.reflect, t.runaway,
                   t.float32) for t in transitions}
        if len(shared) != 1:
            return None
        terms = [p.spec.terms() for p in potentials]
        prec = np.stack([np.asarray(t[1], dtype=np.float64) for t in terms])
        if not np.any(prec):
            prec = np.zeros((len(terms), 1))
        n_swaps = (self.n_slots if isinstance(self.swap, RandomPairs) and self.swap.n_swaps
                   is None else int(getattr(self.swap, "n_swaps", 0) or 0))
        return LadderSettings(
            first.n_leapfrog, first.step_size_jitter, first.n_leapfrog_jitter, first.reflect,
            first.float32, self.swap.name, n_swaps, self.ladder.temperature_k,
            self.n_trajectories_k, np.stack([t.inv_mass for t in transitions]),
            np.asarray(first.half_width, dtype=np.float64), first.runaway,
            np.array(prior_k), np.array([float(t[0]) for t in terms]), prec,
            np.array([float(t[2]) for t in terms]))

    def _prepare(self) -> tuple[Any, Any, Any] | None:
        if self._prepared is None:
            settings = self.device_settings()
            if settings is None:
                self._prepared = (None, None, None)
            else:
                from thermonet.accel.jax_ladder import LadderKernel, constants

                key = settings.static()
                kernel = self._kernels.get(key)
                if kernel is None:
                    pot = self.potential
                    dynamics = pot.network("float32" if settings.float32 else "float64")
                    kernel = self._kernels[key] = LadderKernel(dynamics, pot.network("float64"),
                                                               settings)
                classes = [s.hmc_transition().state_cls if not isinstance(s, PriorRung)
                           else s.inner.hmc_transition().state_cls for s in self.samplers]
                self._prepared = (kernel, constants(settings), classes)
        return None if self._prepared[0] is None else self._prepared

    @property
    def on_device(self) -> bool:
        """Whether the iterations run on the device (else slot by slot)."""
        return self._prepare() is not None

    # -- one iteration -----------------------------------------------------------------------

    def step(self, state: REState, streams: Streams, *, iteration: int | None = None
             ) -> tuple[REState, REInfo]:
        """One iteration (:meth:`ReplicaExchange.step`), on the device where it can run."""
        prepared = self._prepare()
        if prepared is None:
            return super().step(state, streams, iteration=iteration)
        kernel, consts, classes = prepared
        if self._last is not None and self._last[0] is state:
            device = self._last[1]
        else:
            slots = list(state.slots)
            device = kernel.upload(np.stack([s.theta for s in slots]),
                                   [s.energy for s in slots], np.stack([s.grad for s in slots]),
                                   [s.step_size for s in slots], state.replica_k)
        swap_rng = streams.swap if isinstance(streams, Streams) else streams[self.n_slots]
        words = swap_rng.integers(0, 2**32, size=2, dtype=np.uint64)
        device, raw = kernel.step(device, 0 if iteration is None else int(iteration), words,
                                  consts)
        info = REInfo(**{name: np.asarray(raw[name]) for name in REInfo._fields})
        new = REState(DeviceSlots(device, classes), info.replica_k.copy())  # type: ignore[arg-type]
        self._last = (new, device)
        return new, info

