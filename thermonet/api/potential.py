"""The :class:`Potential` contract: an energy with its gradient, and optional capabilities.

A :class:`Potential` is an energy function ``E(theta)`` with its gradient, bound to fixed data:
for a network it is the summed cross-entropy ``E(D|w)`` on a training set; for an analytic test
system (a Gaussian, a double well) it needs no data at all. Samplers, minimisers and integrators
only ever see a :class:`Potential`; every potential subclasses it (the contract is nominal).

Besides the two required methods, a potential may implement capabilities that other code
calls through the contract instead of switching on concrete classes: a compiled
:meth:`~Potential.trajectory`, exact :meth:`~Potential.hvp`/:meth:`~Potential.hessian`
(announced by :attr:`~Potential.hessian_method`), :meth:`~Potential.flat_coordinates` and a
compiled :meth:`~Potential.bridge_trajectory` for thermodynamic integration.
"""

from __future__ import annotations

import abc
import math
from typing import Any, NamedTuple

import numpy as np

from thermonet.errors import ParameterFileError
from thermonet.types import FloatArray


def as_theta(theta: Any, n_params: int, *, what: str = "parameter vector",
             dtype: Any = np.float64, finite: bool = True) -> FloatArray:
    """Return ``theta`` as a C-contiguous 1-D array of ``dtype``, or raise a one-line error.

    The error names the length found and the length expected, and (with ``finite=True``) flags
    non-finite entries.
    """
    if np.ndim(theta) != 1:
        raise ParameterFileError(
            f"{what} has shape {np.shape(theta)}; expected a flat vector of {n_params} values")
    try:
        arr = np.ascontiguousarray(theta, dtype=dtype)
    except (TypeError, ValueError) as err:
        raise ParameterFileError(f"{what} is not numeric ({err}); expected {n_params} "
                                 "floating-point values") from None
    if arr.shape[0] != n_params:
        raise ParameterFileError(
            f"{what} has {arr.shape[0]} values; expected {n_params} for this architecture "
            "(check that the file matches --arch)")
    if finite and not np.all(np.isfinite(arr)):
        bad = int(np.count_nonzero(~np.isfinite(arr)))
        raise ParameterFileError(f"{what} contains {bad} non-finite value(s) (NaN or inf); "
                                 "expected finite numbers")
    return arr


class NetworkSpec(NamedTuple):
    """A fully connected network bound to data, described as data (no code), so that another
    engine (:mod:`thermonet.accel`) can evaluate the same energy: the parameter layout is
    :mod:`thermonet.kernels.mlp`'s (per layer ``W`` of shape ``(out, in)`` row-major, then
    ``b``).

    The energy is ``E = tau D(w) + const + sum_i prec_i w_i^2 / 2`` with the data term ``D``
    the summed softmax cross-entropy (``loss = "cross_entropy"``, integer labels ``y``) or half
    the summed squared error (``"half_sse"``, real targets ``y`` of shape ``(n, n_out)``).
    ``terms()`` returns the current ``(tau, prec, const)`` (``prec`` of shape ``(n_params,)``):
    a classifier's is ``(1, 0, 0)``, a regression network's follows its hyperparameters.
    """

    widths: tuple[int, ...]     #: layer widths, inputs first
    hidden: str                 #: "logistic" or "tanh"
    output: str                 #: "linear" or "logistic"
    loss: str                   #: "cross_entropy" or "half_sse"
    x: Any                      #: (n_data, n_inputs) float64 inputs
    y: Any                      #: (n_data,) int64 labels or (n_data, n_out) float64 targets
    terms: Any                  #: () -> (tau, prec, const), read at each evaluation


class Potential(abc.ABC):
    """An energy ``E(theta)`` (float64, nats) and its gradient.

    Subclasses implement :meth:`energy` and :meth:`energy_and_grad`. The batched methods
    evaluate many parameter vectors (e.g. replicas); the default loops over rows.

    A non-finite energy is a legitimate return value (the sampler rejects it); methods must not
    raise for it.
    """

    #: number of parameters
    n_params: int

    @abc.abstractmethod
    def energy(self, theta: FloatArray) -> float:
        """Return ``E(theta)``."""

    @abc.abstractmethod
    def energy_and_grad(self, theta: FloatArray,
                        grad_out: FloatArray | None = None) -> tuple[float, FloatArray]:
        """Return ``(E(theta), dE/dtheta)``; the gradient is written to ``grad_out`` if given."""

    def energy_batch(self, theta_kp: FloatArray) -> FloatArray:
        """Energies of the rows of ``theta_kp`` (shape ``(K, n_params)``), shape ``(K,)``."""
        return np.array([self.energy(t) for t in theta_kp], dtype=np.float64)

    def energy_and_grad_batch(self, theta_kp: FloatArray, grad_kp: FloatArray | None = None
                              ) -> tuple[FloatArray, FloatArray]:
        """Energies ``(K,)`` and gradients ``(K, n_params)`` of the rows of ``theta_kp``."""
        if grad_kp is None:
            grad_kp = np.empty_like(theta_kp, dtype=np.float64)
        e_k = np.empty(theta_kp.shape[0])
        for k in range(theta_kp.shape[0]):
            e_k[k], _ = self.energy_and_grad(theta_kp[k], grad_kp[k])
        return e_k, grad_kp

    def copy(self) -> Potential:
        """A potential sharing the data but owning its scratch space (one per thread)."""
        return self

    def trajectory(self, theta: FloatArray, p: FloatArray, grad: FloatArray,
                   inv_mass: FloatArray, step: float, n_steps: int, wall: int,
                   half_width: FloatArray, runaway: float,
                   precision: str = "float64") -> tuple[float, int, int, int]:
        """Run ``n_steps`` velocity-Verlet steps in place; see
        :func:`thermonet.kernels.leapfrog.mlp_trajectory` for the arguments and the returned
        ``(energy, n_done, status, n_reflections)``.

        This default drives :meth:`energy_and_grad` from Python, one call per step. Potentials
        with a compiled gradient (the built-in MLP) override it with a kernel that runs the
        whole trajectory without returning to Python. ``precision`` is a hint: potentials
        without a float32 path ignore it.
        """
        from thermonet.kernels import leapfrog as lf

        e = float("nan")
        n_ref = 0
        lf.kick(p, grad, 0.5 * step)
        if wall == lf.WALL_REFLECT:
            n_ref += lf.drift_reflect(theta, p, inv_mass, step, half_width)
        elif lf.drift_check(theta, p, inv_mass, step, half_width, runaway):
            return e, 1, lf.RUNAWAY, n_ref
        for s in range(n_steps):
            e, _ = self.energy_and_grad(theta, grad)
            if not math.isfinite(e):
                return e, s + 1, lf.NON_FINITE, n_ref
            if s == n_steps - 1:
                lf.kick(p, grad, 0.5 * step)
            elif wall == lf.WALL_REFLECT:
                lf.kick(p, grad, step)
                n_ref += lf.drift_reflect(theta, p, inv_mass, step, half_width)
            elif lf.kick_drift_check(theta, p, grad, inv_mass, step, half_width, runaway):
                return e, s + 2, lf.RUNAWAY, n_ref
        return e, n_steps, lf.OK, n_ref

    # -- optional capabilities: the evidence code calls these, never a concrete class --------

    #: the exact Hessian scheme this potential implements in :meth:`hvp`/:meth:`hessian`:
    #: ``"rop"`` (compiled R-operator), ``"analytic"`` (closed form), or None (the defaults
    #: below: finite differences, NOT exact)
    hessian_method: str | None = None

    def hvp(self, theta: FloatArray, v_kp: FloatArray, *, threads: int | None = None
            ) -> FloatArray:
        """Hessian-vector products ``H @ v`` for the rows of ``v_kp`` (shape ``(K, n)``).

        The default takes central differences of the gradient with one Richardson step,
        ``(4 D(h/2) - D(h)) / 3`` (error O(h^4)) along each unit direction, with
        ``h = 1e-3 max(1, max|theta|)``. Override it with an exact product and set
        :attr:`hessian_method`. ``threads`` is a hint for compiled implementations.
        """
        th = np.asarray(theta, dtype=np.float64)
        v = np.asarray(v_kp, dtype=np.float64)
        out = np.empty_like(v)
        h = 1e-3 * max(1.0, float(np.max(np.abs(th)))) if th.size else 1e-3
        for i in range(v.shape[0]):
            nv = float(np.linalg.norm(v[i]))
            if nv == 0.0:
                out[i] = 0.0
                continue
            out[i] = nv * self._fd_hvp(th, v[i] / nv, h)
        return out

    def hessian(self, theta: FloatArray, *, index: Any = None, column_block: int = 128,
                threads: int | None = None) -> FloatArray:
        """The Hessian ``d^2 E / dtheta^2`` (float64, not symmetrised), or only its rows and
        columns ``index``.

        The default differentiates the gradient along each coordinate ``j`` with the step
        ``1e-3 max(1, |theta_j|)`` (see :meth:`hvp`). ``column_block`` and ``threads`` are hints
        for compiled implementations.
        """
        th = np.asarray(theta, dtype=np.float64)
        d = self.n_params
        idx = np.arange(d) if index is None else np.asarray(index, dtype=np.int64)
        steps = 1e-3 * np.maximum(1.0, np.abs(th))
        h = np.empty((idx.shape[0], idx.shape[0]))
        for jj, j in enumerate(idx):
            v = np.zeros(d)
            v[j] = 1.0
            h[jj] = self._fd_hvp(th, v, float(steps[j]))[idx]
        return h

    def _fd_hvp(self, theta: FloatArray, v: FloatArray, h: float) -> FloatArray:
        def gradient(point: FloatArray) -> FloatArray:
            _, g = self.energy_and_grad(point)
            return np.array(g, dtype=np.float64)

        def d(step: float) -> FloatArray:
            return (gradient(theta + step * v) - gradient(theta - step * v)) / (2.0 * step)

        return (4.0 * d(0.5 * h) - d(h)) / 3.0

    def flat_coordinates(self) -> tuple[Any, Any]:
        """Two boolean masks of shape ``(n_params,)`` marking coordinates along which ``E`` is
        flat by construction (the Laplace evidence integrates them over the box exactly):
        ``(constant-input weights, softmax-shift directions)``. The default: none."""
        return np.zeros(self.n_params, dtype=bool), np.zeros(self.n_params, dtype=bool)

    def network_spec(self) -> NetworkSpec | None:
        """The network and data as plain arrays (:class:`NetworkSpec`), for engines that
        evaluate the energy themselves (``[run] engine = "jax"``); None (the default): the
        energy exists only as this class's code, and such engines refuse the potential."""
        return None

    def prior_sample(self, rng: np.random.Generator, hyper: FloatArray | None = None
                     ) -> FloatArray | None:
        """An exact draw from a proper prior that the potential's own energy carries, for a
        prior rung (``beta = 0``) of a ladder whose temperature tempers only the likelihood
        (a sampler's ``swap_energy``): the weights at the hyperparameters ``hyper`` (drawn
        from their own priors by the caller, :meth:`thermonet.api.hyper.HyperModel.sample`)
        or, for a prior without hyperparameters, at the fixed ones. None (the default) when
        the prior is the run's box, which the prior rung then draws from."""
        return None

    def bridge_trajectory(self, theta: FloatArray, p: FloatArray, grad: FloatArray,
                          inv_mass: FloatArray, step: float, n_steps: int, wall: int,
                          half_width: FloatArray, runaway: float, lam: float,
                          w0: FloatArray, k: FloatArray, e0: float, scratch: FloatArray
                          ) -> tuple[float, float, int, int, int] | None:
        """A compiled trajectory on the TI bridge ``J = E0 + (1-lam)(E - E0) + lam Q`` with
        ``Q = sum_i k_i (w_i - w0_i)^2 / 2``, returning ``(J, E, n_steps, status,
        n_reflections)``; or None (the default) when the potential has no such kernel, in which
        case the bridge drives :meth:`energy_and_grad` from Python."""
        return None
