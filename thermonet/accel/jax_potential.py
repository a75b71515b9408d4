"""A potential whose energy, gradient and trajectories run in JAX, batched across the ladder.

:class:`JaxPotential` wraps a potential that describes its network as data
(:meth:`thermonet.api.Potential.network_spec`) and answers the same contract: the samplers
call it exactly as they call the compiled one. Its evaluations go through a shared
:class:`~thermonet.accel.batcher.Batcher`, so the trajectories of all slots of an iteration
run as one batched call (:mod:`thermonet.accel.jax_network`). Everything else (the
hyperparameters of a regression network, the prior draws, the Hessian) is the wrapped
potential's own.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from thermonet.accel.batcher import Batcher
from thermonet.api import Potential, as_theta
from thermonet.errors import ConfigError
from thermonet.kernels import leapfrog as lf
from thermonet.types import FloatArray

#: the precisions of the gradients that drive a trajectory
PRECISIONS = ("float64", "float32")


class JaxPotential(Potential):
    """``inner``'s energy evaluated in JAX (module docstring); one per slot, all sharing
    ``batcher`` and the compiled functions."""

    def __init__(self, inner: Potential, batcher: Batcher,
                 networks: dict[str, Any] | None = None) -> None:
        spec = inner.network_spec()
        if spec is None:
            raise ConfigError(f"engine = 'jax' evaluates a network described as data, but "
                              f"{type(inner).__name__} has no network_spec(); use "
                              "engine = 'numba' for it")
        self.inner = inner
        self.spec = spec
        self.batcher = batcher
        self.n_params = inner.n_params
        #: the compiled functions per dtype, shared by every slot's copy
        self.networks = networks if networks is not None else {}

    def network(self, dtype: str) -> Any:
        """The batched functions in ``dtype`` (built and compiled on first use)."""
        net = self.networks.get(dtype)
        if net is None:
            from thermonet.accel.jax_network import BatchedNetwork

            net = self.networks[dtype] = BatchedNetwork(self.spec, dtype)
        return net

    def __getattr__(self, name: str) -> Any:
        # hyperparameters, prior draws, outputs: the wrapped potential's own
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def copy(self) -> JaxPotential:
        """A wrapper around the inner potential's copy (its own hyperparameters), sharing the
        batcher and the compiled functions."""
        return type(self)(self.inner.copy(), self.batcher, self.networks)

    def _terms(self) -> tuple[float, FloatArray, float]:
        tau, prec, const = self.spec.terms()
        prec = np.asarray(prec, dtype=np.float64)
        # a classifier has no Gaussian term: one zero, broadcast, instead of n to transfer
        return float(tau), prec if prec.any() else np.zeros(1), float(const)

    # -- the contract ------------------------------------------------------------------------

    def energy(self, theta: FloatArray) -> float:
        th = as_theta(theta, self.n_params, finite=False)
        net = self.network("float64")

        def run(rows: list[Any]) -> list[Any]:
            th_k, tau, prec, const = (np.stack(c) for c in zip(*rows, strict=True))
            return list(net.energy(th_k, tau, prec, const))

        return float(self.batcher.call(("energy",), (th, *self._terms()), run))

    def energy_and_grad(self, theta: FloatArray, grad_out: FloatArray | None = None
                        ) -> tuple[float, FloatArray]:
        th = as_theta(theta, self.n_params, finite=False)
        net = self.network("float64")

        def run(rows: list[Any]) -> list[Any]:
            th_k, tau, prec, const = (np.stack(c) for c in zip(*rows, strict=True))
            e, g = net.energy_and_grad(th_k, tau, prec, const)
            return list(zip(e, g, strict=True))

        e, g = self.batcher.call(("energy_and_grad",), (th, *self._terms()), run)
        if grad_out is None:
            grad_out = np.empty(self.n_params)
        grad_out[:] = g
        return float(e), grad_out

    def energy_and_grad_batch(self, theta_kp: FloatArray, grad_kp: FloatArray | None = None
                              ) -> tuple[FloatArray, FloatArray]:
        """Energies and gradients of the rows of ``theta_kp`` in one batched call."""
        th = np.ascontiguousarray(theta_kp, dtype=np.float64)
        tau, prec, const = self._terms()
        n_k = th.shape[0]
        e, g = self.network("float64").energy_and_grad(
            th, np.full(n_k, tau), np.broadcast_to(prec, th.shape), np.full(n_k, const))
        if grad_kp is None:
            return e, g
        grad_kp[:] = g
        return e, grad_kp

    def trajectory(self, theta: FloatArray, p: FloatArray, grad: FloatArray,
                   inv_mass: FloatArray, step: float, n_steps: int, wall: int,
                   half_width: FloatArray, runaway: float,
                   precision: str = "float64") -> tuple[float, int, int, int]:
        """One trajectory, batched with the other slots' (see the base class for the
        arguments; ``precision = "float32"``: float32 gradients, the caller recomputes the end
        point's energy in float64)."""
        dtype = "float32" if precision == "float32" else "float64"
        reflect = wall == lf.WALL_REFLECT
        net = self.network(dtype)

        def run(rows: list[Any]) -> list[Any]:
            cols = list(zip(*rows, strict=True))
            out = net.trajectories(*(np.stack(c) for c in cols[:6]), reflect,
                                   *(np.stack(c) for c in cols[6:]))
            return list(zip(*out, strict=True))

        row = (theta, p, grad, inv_mass, np.float64(step), np.int64(n_steps),
               np.asarray(half_width, dtype=np.float64), np.float64(runaway), *self._terms())
        th, pp, g, e, n_done, status, n_ref = self.batcher.call(("trajectory", dtype, reflect),
                                                                row, run)
        theta[:] = th
        p[:] = pp
        grad[:] = g
        return float(e), int(n_done), int(status), int(n_ref)

    # -- the wrapped potential's capabilities --------------------------------------------------

    @property
    def hessian_method(self) -> str | None:  # type: ignore[override]
        """The wrapped potential's."""
        return self.inner.hessian_method

    def hvp(self, theta: FloatArray, v_kp: FloatArray, *, threads: int | None = None
            ) -> FloatArray:
        """The wrapped potential's."""
        return self.inner.hvp(theta, v_kp, threads=threads)

    def hessian(self, theta: FloatArray, *, index: Any = None, column_block: int = 128,
                threads: int | None = None) -> FloatArray:
        """The wrapped potential's."""
        return self.inner.hessian(theta, index=index, column_block=column_block,
                                  threads=threads)

    def flat_coordinates(self) -> tuple[Any, Any]:
        """The wrapped potential's."""
        return self.inner.flat_coordinates()

    def network_spec(self) -> Any:
        """The wrapped potential's."""
        return self.spec


class JaxPotentialWithPrior(JaxPotential):
    """A :class:`JaxPotential` around a potential with a proper prior of its own (a regression
    network's), which a prior rung draws from."""

    def prior_sample(self, rng: np.random.Generator, hyper: FloatArray | None = None
                     ) -> FloatArray | None:
        """The wrapped potential's."""
        return self.inner.prior_sample(rng, hyper)


def wrap(potential: Potential, batcher: Batcher) -> JaxPotential:
    """``potential`` evaluated in JAX through ``batcher``."""
    own_prior = type(potential).prior_sample is not Potential.prior_sample
    cls = JaxPotentialWithPrior if own_prior else JaxPotential
    return cls(potential, batcher)
