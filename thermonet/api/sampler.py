"""The contract of the ``thermonet.samplers`` group.

A sampler is a Markov kernel on parameter vectors at a temperature T, for the target
``prob(w|T) ∝ exp(-E(w)/T) prior(w)``. It follows the ``init``/``step`` pattern:

* ``state = sampler.init(theta0)``: a NamedTuple holding exactly what the next step needs
  (position, cached energy and gradient, adapted step size). Checkpoints store it.
* ``state, info = sampler.step(state, rng)``: one transition. ``info`` is a NamedTuple of
  diagnostics (accepted, ΔH, divergence, ...) that is recorded, never fed back.
* ``state = sampler.adapt(state, rng)``: tune the step size by extra trajectories that are not
  part of the chain. The runner calls it only at configured times, so the chain between
  adaptations is an exact Markov chain.

Randomness comes only from the ``rng`` argument (a ``numpy.random.Generator``), so a step is
deterministic given the state and the generator's state.

Contract version 2 (``api_version = 2``): a sampler that proposes by trajectories returns its
proposal from ``propose(state, rng)`` as a NamedTuple whose first five fields are those of
:class:`Proposal` (``theta``, ``energy``, ``grad``, ``info``, ``log_u``; a sampler may add
fields after them), and the base class holds the step-size cap :attr:`Sampler.step_size_max`
and the momentum scale :attr:`Sampler.momentum_scale`. A version-1 sampler (an anonymous tuple
from ``propose``) still loads, with one DeprecationWarning when its class is defined.
"""

from __future__ import annotations

import abc
import dataclasses
import math
import warnings
from collections.abc import Sequence
from typing import Any, ClassVar, NamedTuple

import numpy as np

from thermonet.api.settings import build_config
from thermonet.errors import ConfigError
from thermonet.types import FloatArray


class HMCTransition(NamedTuple):
    """One slot's HMC transition described as data (:meth:`Sampler.hmc_transition`), for
    engines that run the transitions of a whole ladder themselves (``[run] engine = "jax"``).

    A transition draws momenta ``p ~ N(0, m T)``, runs ``L`` velocity-Verlet steps of ``dt``
    (each jittered as :class:`thermonet.samplers.hmc.HMCConfig` says) with reflecting walls or
    the end-point test, and accepts with ``min(1, exp(-dH/T))``; its state is
    ``(theta, energy, grad, step_size)``.
    """

    n_leapfrog: int              #: L
    step_size_jitter: float      #: j: dt * U(1 - j, 1 + j) per trajectory
    n_leapfrog_jitter: float     #: j: L' uniform on [max(1, ceil((1 - j) L)), L]
    reflect: bool                #: reflecting walls (else the end-point test)
    runaway: float               #: the end-point mode's runaway guard, in box half-widths
    float32: bool                #: float32 gradients, end-point energy recomputed in float64
    temperature: float           #: T
    inv_mass: Any                #: (n_params,) 1/m
    half_width: Any              #: (n_params,) box half-widths (inf without a box)
    state_cls: Any               #: the state class, built from its four fields by name


class Proposal(NamedTuple):
    """One proposal of ``Sampler.propose`` (contract version 2), the Metropolis decision made
    (``info.is_accepted``)."""

    theta: FloatArray        #: (n_params,) the proposed position
    energy: float            #: E there
    grad: FloatArray         #: (n_params,) dE/dtheta there
    info: Any                #: the sampler's ``Info``
    log_u: float             #: log of the uniform draw the decision compared with


class Sampler(abc.ABC):
    """Base class of sampler plugins (entry-point group ``thermonet.samplers``).

    Parameters
    ----------
    potential : thermonet.api.Potential
        The energy ``E(w)`` (untempered, summed over the data).
    prior : BoxPrior, optional
        The box ``|w_i| < sigma_i/2`` (None: unbounded).
    temperature : float
        T > 0.
    masses : ndarray of float64, shape (n_params,), optional
        Per-parameter masses (default 1).
    config : the sampler's ``Config`` dataclass, or settings as keyword arguments.

    Attributes
    ----------
    step_size_max : float
        The cap on the step size: the config's ``step_size_max`` if it has one that is set,
        else the median box half-width with a prior, else inf.
    momentum_scale : ndarray of float64, shape (n_params,)
        ``sqrt(m T)``: momenta ``p ~ N(0, m T)`` are standard normals times it.
    """

    name: ClassVar[str] = ""
    api_version: ClassVar[int] = 2
    #: state fields the runner records at every iteration for every slot, as trace datasets
    #: ``<field>_k`` of shape (iterations, K, ...) (``hmc-gibbs``: its hyperparameters)
    recorded_fields: ClassVar[tuple[str, ...]] = ()
    Config: ClassVar[type]
    State: ClassVar[type]
    Info: ClassVar[type]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("api_version") == 1:
            warnings.warn(f"sampler {cls.__module__}.{cls.__qualname__} declares api_version 1; "
                          "version 1 is deprecated: return a NamedTuple from propose (thermonet"
                          ".api.Proposal) and declare api_version = 2 (docs/plugins.md)",
                          DeprecationWarning, stacklevel=2)

    def __init__(self, potential: Any, *, prior: Any = None, temperature: float = 1.0,
                 masses: Any = None, config: Any = None, **settings: Any) -> None:
        if config is None:
            config = build_config(self.Config, settings, f"sampler {self.name!r}")
        elif settings:
            config = dataclasses.replace(config, **settings)
        self.config = config
        if not (np.isfinite(temperature) and temperature > 0):
            raise ConfigError(f"temperature T = {temperature}; expected a positive finite "
                              "number")
        self.potential = potential
        self.prior = prior
        self.temperature = float(temperature)
        n = potential.n_params
        if masses is None:
            masses = np.ones(n)
        masses = np.ascontiguousarray(np.broadcast_to(masses, (n,)), dtype=np.float64)
        if not np.all(np.isfinite(masses)) or np.any(masses <= 0):
            raise ConfigError("masses must be positive finite numbers")
        self.set_masses(masses)
        if prior is None:
            self.half_width = np.full(n, np.inf)
        else:
            if prior.n_params != n:
                raise ConfigError(f"prior has {prior.n_params} parameters; the potential has "
                                  f"{n}")
            self.half_width = np.ascontiguousarray(prior.half_width)
        cap = getattr(config, "step_size_max", None)
        if cap is not None:
            self.step_size_max = float(cap)
        elif prior is not None:
            self.step_size_max = float(np.median(self.half_width))
        else:
            self.step_size_max = math.inf

    def set_masses(self, masses: FloatArray) -> None:
        """Set :attr:`masses` (positive, shape ``(n_params,)``), ``inv_mass`` and
        :attr:`momentum_scale` together."""
        self.masses = masses
        self.inv_mass = 1.0 / masses
        self.momentum_scale = np.sqrt(masses * self.temperature)

    @abc.abstractmethod
    def init(self, theta0: FloatArray) -> NamedTuple:
        """The initial state at ``theta0``."""

    @abc.abstractmethod
    def step(self, state: Any, rng: np.random.Generator) -> tuple[Any, Any]:
        """One transition: ``(new_state, info)``."""

    def adapt(self, state: Any, rng: np.random.Generator, **options: Any) -> Any:
        """Tune the step size by extra trajectories; default: no adaptation."""
        return state

    def adapt_transitions(self) -> int:
        """Transitions of the chain itself that :meth:`adapt` runs, if :meth:`adapt_part` can
        run them in parts (so an engine can checkpoint between parts); default 0: ``adapt``
        is one unit."""
        return 0

    def adapt_part(self, state: Any, rng: np.random.Generator, start: int, stop: int,
                   carry: FloatArray | None) -> tuple[Any, FloatArray | None]:
        """Transitions ``start .. stop - 1`` of the ``adapt_transitions()`` that :meth:`adapt`
        runs; ``carry`` is what the part before returned (None at ``start = 0``), a 1-D float64
        array the engine checkpoints as it is. Parts run in sequence give exactly
        ``adapt(state, rng)``. Default (``adapt_transitions() == 0``): the whole of
        :meth:`adapt` in the part that starts at 0."""
        return (self.adapt(state, rng) if start == 0 else state), None

    def correct_step_size(self, state: Any,
                          measured: Sequence[tuple[float, float, float]]) -> Any:
        """``state`` with its step size corrected towards the sampler's acceptance target.

        ``measured``: ``(step size, acceptance rate, transitions)`` of every correction round
        at this rung so far, oldest first, each measured over the frozen chain as in
        production (the warm-up's last stage); the last was measured at ``state``'s step size.
        :func:`thermonet.api.adaptation.corrected_step_size` and
        :func:`~thermonet.api.adaptation.law_order` do the arithmetic for HMC-like samplers.
        Default: ``state`` unchanged (no target)."""
        return state

    def state_energy(self, state: Any) -> float:
        """``E`` of ``state`` recomputed from its configuration (a resumed run compares it with
        the checkpointed ``state.energy``). Default: ``potential.energy(state.theta)``; a
        sampler whose energy depends on more of its state (hyperparameters) overrides it."""
        return float(self.potential.energy(state.theta))

    def swap_energy(self, state: Any) -> float:
        """The energy that the temperature divides in this slot's target, for the replica-
        exchange rule ``min(1, exp((beta_j - beta_k)(U_j - U_k)))``. Default: ``state.energy``
        (the target is ``exp(-E/T) prior``). A sampler whose state also carries untempered
        terms (a hierarchical prior with Gibbs-sampled hyperparameters) returns the tempered
        part only."""
        return float(state.energy)

    def take_configuration(self, state: Any, donor: Any, donor_temperature: float) -> Any:
        """The state of this slot after a replica exchange brings ``donor``'s configuration
        from a slot at ``donor_temperature``.

        The default takes the donor's whole state but keeps this slot's step size, which
        belongs to the temperature. Samplers with persistent momenta override it (e.g. to
        rescale the momenta by ``sqrt(T / donor_temperature)``).
        """
        return donor._replace(step_size=state.step_size)

    def hmc_transition(self) -> HMCTransition | None:
        """The sampler's transition as data, if it is a plain HMC transition that an engine
        may run itself (:class:`HMCTransition`); None (the default): only :meth:`step` can
        run it."""
        return None

    def with_temperature(self, temperature: float) -> Sampler:
        """The same sampler (same potential object, settings and masses) at another T."""
        return type(self)(self.potential, prior=self.prior, temperature=temperature,
                          masses=self.masses, config=self.config)
