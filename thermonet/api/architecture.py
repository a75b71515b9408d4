"""Architectures and potentials: the contract of the ``thermonet.architectures`` group.

A :class:`Potential` is an energy function ``E(theta)`` with its gradient, bound to fixed data:
for a network it is the summed cross-entropy ``E(D|w)`` on a training set; for an analytic test
system (a Gaussian, a double well) it needs no data at all. Samplers, minimisers and integrators
only ever see a :class:`Potential`.

An :class:`Architecture` is the factory registered under a name (``M1``, ``M3``, ``mlp``, or a
third party's ``mypkg.name``): it knows how many parameters there are, the fan-in ``k_i`` of the
neuron each one feeds into (which sets the paper's box prior and initial draws), and how to bind
itself to a data set.
"""

from __future__ import annotations

import abc
from typing import Any, ClassVar

import numpy as np

from thermonet._types import FloatArray, IntArray
from thermonet.errors import ParameterFileError, ThermonetError


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
            if not np.isfinite(e):
                return e, s + 1, lf.NON_FINITE, n_ref
            if s == n_steps - 1:
                lf.kick(p, grad, 0.5 * step)
            elif wall == lf.WALL_REFLECT:
                lf.kick(p, grad, step)
                n_ref += lf.drift_reflect(theta, p, inv_mass, step, half_width)
            elif lf.kick_drift_check(theta, p, grad, inv_mass, step, half_width, runaway):
                return e, s + 2, lf.RUNAWAY, n_ref
        return e, n_steps, lf.OK, n_ref


class Architecture(abc.ABC):
    """Base class of architecture plugins (entry-point group ``thermonet.architectures``).

    Class attributes
    ----------------
    name : str
        Registry name.
    api_version : int
        Version of this contract the plugin was written for (currently 1).
    default_prior_scale : float
        ``c`` in the box prior ``sigma_i = c / sqrt(k_i)`` (paper eq. 11): 100 for M(1)/M(3),
        2000 for M(3*).
    """

    name: ClassVar[str] = ""
    api_version: ClassVar[int] = 1
    default_prior_scale: ClassVar[float] = 100.0

    @property
    @abc.abstractmethod
    def n_params(self) -> int:
        """Number of parameters."""

    @abc.abstractmethod
    def fan_in(self) -> IntArray:
        """Fan-in ``k_i``, including the bias, of the neuron each parameter feeds into."""

    @abc.abstractmethod
    def potential(self, data: Any = None, **options: Any) -> Potential:
        """Bind to a data set (anything with ``.x`` and ``.y``, or None for data-free targets)."""

    def describe(self) -> dict[str, Any]:
        """A JSON-serialisable description (name and structural settings)."""
        return {"name": self.name, "n_params": self.n_params}

    def initial_draw(self, rng: np.random.Generator) -> FloatArray:
        """Standard initialisation: ``w_i ~ U(-1/sqrt(k_i), +1/sqrt(k_i))`` (paper Sec. 3.3.2)."""
        half = 1.0 / np.sqrt(self.fan_in().astype(np.float64))
        return rng.uniform(-half, half)

    def param_groups(self) -> dict[str, slice]:
        """Named contiguous groups of parameters (for per-group prior widths)."""
        return {"all": slice(0, self.n_params)}

    def predict_proba(self, theta: FloatArray, x: FloatArray) -> FloatArray:
        """Class probabilities ``prob(q | x, theta)``, shape ``(n_data, n_classes)``."""
        raise ThermonetError(f"architecture {self.name!r} is not a classifier: it has no "
                             "predict_proba()")
