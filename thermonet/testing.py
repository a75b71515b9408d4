"""Conformance checks: does a sampler, minimiser or architecture plugin keep its contract.

Each ``check_*`` function exercises one plugin class through the public contract only, on
analytic targets with known answers, and raises :class:`ConformanceError` naming the first
broken promise. Use them in a plugin's own test suite::

    from thermonet.testing import check_sampler

    def test_my_sampler_keeps_the_contract():
        check_sampler(MySampler)

``thermonet plugins --check`` runs them on every installed plugin. The built-in plugins are
checked with the same functions (tests/test_testing.py).

What is checked
---------------
* every plugin: it subclasses its group's base class, declares a supported ``api_version`` and
  a ``name``, and (samplers, minimisers) a frozen-dataclass ``Config`` whose defaults build;
* architectures: ``n_params``, ``fan_in`` (positive integers, one per parameter),
  ``initial_draw`` (finite, inside the default box), the potential's gradient against central
  finite differences at a standard draw, ``energy`` equal to ``energy_and_grad``'s energy,
  batched methods equal to row-by-row calls, and an explicit ``prior_scale`` taking effect;
* samplers: ``State``/``Info`` types, ``init``/``step``/``adapt``/``with_temperature``/
  ``take_configuration`` returning what the engine expects, ``propose`` (where there is one,
  contract version 2) returning a NamedTuple that begins with ``thermonet.api.Proposal``'s
  fields, bit-for-bit reproducibility from a seed, every state inside the box, and
  ``<E> = n T / 2`` on a Gaussian (tolerance: 5 standard errors of the batch-means estimate,
  from a fixed seed);
* minimisers: ``minimise`` returns a :class:`~thermonet.api.MinimiseResult` whose energy is
  that of its ``theta``, no higher than the start, close to the analytic minimum of a
  well-conditioned quadratic, and leaves ``theta0`` untouched.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from thermonet.api import (
    Architecture,
    Minimiser,
    MinimiseResult,
    Potential,
    Proposal,
    Sampler,
)
from thermonet.errors import ThermonetError


class ConformanceError(ThermonetError):
    """A plugin breaks its group's contract (the message says which promise and how)."""


def _require(ok: bool, who: str, message: str) -> None:
    if not ok:
        raise ConformanceError(f"{who}: {message}")


def _who(cls: Any) -> str:
    return f"{getattr(cls, '__module__', '?')}.{getattr(cls, '__qualname__', repr(cls))}"


def _check_class(cls: Any, base: type, who: str) -> None:
    from thermonet.registry import SUPPORTED_API_VERSIONS

    _require(isinstance(cls, type) and issubclass(cls, base), who,
             f"is not a subclass of thermonet.api.{base.__name__}")
    _require(getattr(cls, "api_version", None) in SUPPORTED_API_VERSIONS, who,
             f"api_version = {getattr(cls, 'api_version', None)!r}; supported: "
             f"{sorted(SUPPORTED_API_VERSIONS)}")


def _check_config(cls: Any, who: str) -> None:
    config = getattr(cls, "Config", None)
    _require(dataclasses.is_dataclass(config) and isinstance(config, type), who,
             "has no Config dataclass (a frozen @dataclass of its settings, with defaults)")
    assert isinstance(config, type)  # checked by the _require above
    params = getattr(config, "__dataclass_params__", None)
    _require(bool(getattr(params, "frozen", False)), who,
             "Config is not frozen (use @dataclass(frozen=True): settings must not change "
             "under a running chain)")
    try:
        config()
    except Exception as err:
        raise ConformanceError(f"{who}: Config() with its defaults fails: "
                               f"{type(err).__name__}: {err}") from err


# --- architectures ------------------------------------------------------------------------------

def check_architecture(cls: Any, settings: dict[str, Any] | None = None, data: Any = None, *,
                       seed: int = 0, n_fd: int = 8, rtol: float = 1e-5) -> None:
    """Check an :class:`~thermonet.api.Architecture` plugin built with ``settings`` (default: none).

    ``data`` (anything with ``.x`` and ``.y``) is bound when given; otherwise the architecture
    must accept ``potential()`` without data. ``n_fd`` gradient components are compared with
    central finite differences to relative tolerance ``rtol``.
    """
    from thermonet.priors import BoxPrior

    who = _who(cls)
    _check_class(cls, Architecture, who)
    arch = cls(**(settings or {}))
    n = arch.n_params
    _require(isinstance(n, (int, np.integer)) and bool(n >= 1), who,
             f"n_params = {n!r}; expected a positive integer")
    k = np.asarray(arch.fan_in())
    _require(k.shape == (n,) and k.dtype.kind in "iu" and bool(np.all(k >= 1)), who,
             f"fan_in() has shape {k.shape} and dtype {k.dtype}; expected {n} integers >= 1")
    scale = (settings or {}).get("prior_scale")
    if scale is not None:
        _require(float(arch.default_prior_scale) == float(scale), who,
                 f"prior_scale = {scale!r} was given but default_prior_scale = "
                 f"{arch.default_prior_scale!r}: the box prior would ignore the setting")
    box = BoxPrior.for_architecture(arch)
    rng = np.random.default_rng(seed)
    theta = np.asarray(arch.initial_draw(rng), dtype=np.float64)
    _require(theta.shape == (n,) and bool(np.all(np.isfinite(theta))), who,
             f"initial_draw() gave shape {theta.shape}; expected {n} finite numbers")
    _require(box.contains(theta), who, "initial_draw() lies outside the default box prior")
    pot = arch.potential(data) if data is not None else arch.potential()
    _require(isinstance(pot, Potential), who,
             f"potential() returned {type(pot).__name__}, not a thermonet.api.Potential")
    _require(int(pot.n_params) == n, who,
             f"potential has n_params = {pot.n_params}; the architecture has {n}")
    check_potential(pot, theta, who=who, n_fd=n_fd, rtol=rtol, seed=seed)


def check_potential(pot: Potential, theta: Any, *, who: str = "potential", n_fd: int = 8,
                    rtol: float = 1e-5, seed: int = 0) -> None:
    """Check one :class:`~thermonet.api.Potential` at ``theta``: energies agree, the gradient
    matches central finite differences, batched calls match row-by-row ones."""
    theta = np.array(theta, dtype=np.float64)
    n = theta.shape[0]
    before = theta.copy()
    e = pot.energy(theta)
    e2, g = pot.energy_and_grad(theta)
    _require(np.array_equal(theta, before), who, "energy/energy_and_grad modified theta")
    _require(isinstance(e, (float, np.floating)) and math.isfinite(e), who,
             f"energy() returned {e!r}; expected a finite float at a standard draw")
    _require(abs(float(e2) - float(e)) <= 1e-12 * max(1.0, abs(e)), who,
             f"energy() = {e!r} but energy_and_grad() gives {e2!r}")
    g = np.asarray(g)
    _require(g.shape == (n,) and g.dtype == np.float64, who,
             f"gradient has shape {g.shape}, dtype {g.dtype}; expected ({n},) float64")
    out = np.full(n, np.nan)
    pot.energy_and_grad(theta, out)
    _require(np.array_equal(out, g), who, "energy_and_grad(theta, grad_out) did not write the "
             "gradient into grad_out")
    rng = np.random.default_rng(seed)
    for i in rng.choice(n, size=min(n_fd, n), replace=False):
        h = 1e-5 * max(1.0, abs(theta[i]))
        tp, tm = theta.copy(), theta.copy()
        tp[i] += h
        tm[i] -= h
        fd = (pot.energy(tp) - pot.energy(tm)) / (2 * h)
        scale = max(1.0, float(np.max(np.abs(g))))
        _require(abs(fd - g[i]) <= rtol * scale, who,
                 f"dE/dw[{i}] = {g[i]!r} but central finite differences give {fd!r}")
    rows = np.stack([theta, theta + 0.01 * rng.standard_normal(n)])
    e_k, g_k = pot.energy_and_grad_batch(rows)
    for r in range(2):
        er, gr = pot.energy_and_grad(rows[r])
        _require(float(e_k[r]) == float(er) and np.array_equal(g_k[r], gr), who,
                 "energy_and_grad_batch differs from energy_and_grad row by row")
    _require(np.array_equal(pot.energy_batch(rows), e_k), who,
             "energy_batch differs from energy_and_grad_batch")


# --- samplers -----------------------------------------------------------------------------------

def _gaussian(n: int, prior_scale: float) -> tuple[Any, Any, np.ndarray]:
    from thermonet.priors import BoxPrior
    from thermonet.testsystems import Gaussian

    stiffness = np.linspace(1.0, 4.0, n)
    arch = Gaussian(n, stiffness=list(stiffness), prior_scale=prior_scale)
    return arch.potential(), BoxPrior.for_architecture(arch), stiffness


def _batch_mean_sem(x: np.ndarray, n_batches: int = 20) -> tuple[float, float]:
    b = np.array_split(x, n_batches)
    means = np.array([c.mean() for c in b])
    return float(x.mean()), float(means.std(ddof=1) / math.sqrt(n_batches))


def check_sampler(cls: Any, settings: dict[str, Any] | None = None, *, n: int = 4,
                  temperature: float = 0.5, n_steps: int = 4000, seed: int = 1,
                  z: float = 5.0) -> None:
    """Check a :class:`~thermonet.api.Sampler` plugin built with ``settings``.

    Samples an ``n``-dimensional Gaussian (stiffness 1 to 4) at ``temperature`` inside a box
    that it does not reach in practice, after one ``adapt`` call, and requires
    ``|<E> - n T/2| < z`` standard errors (batch means over ``n_steps`` transitions).
    """
    who = _who(cls)
    _check_class(cls, Sampler, who)
    _check_config(cls, who)
    for attr in ("State", "Info"):
        _require(isinstance(getattr(cls, attr, None), type), who,
                 f"has no {attr} class (a NamedTuple; see docs/plugins.md, 'Samplers')")
    pot, box, _ = _gaussian(n, prior_scale=40.0)
    settings = settings or {}
    s = cls(pot, prior=box, temperature=temperature, **settings)
    state = s.init(np.full(n, 0.1))
    _require(isinstance(state, cls.State), who,
             f"init() returned {type(state).__name__}, not {cls.State.__name__}")
    for field in ("theta", "energy", "step_size"):
        _require(hasattr(state, field), who, f"State has no field {field!r} (the engine reads "
                 "theta, energy and step_size)")
    rng = np.random.default_rng(seed)
    state = s.adapt(state, rng)
    _require(isinstance(state, cls.State), who, "adapt() did not return a State")
    _require(math.isfinite(state.step_size) and state.step_size > 0, who,
             f"adapt() gave step_size = {state.step_size!r}")

    def chain(rng: np.random.Generator, start: Any, steps: int) -> tuple[Any, np.ndarray, int]:
        st, energies, accepted = start, np.empty(steps), 0
        for t in range(steps):
            st, info = s.step(st, rng)
            _require(isinstance(info, cls.Info), who, "step() did not return (State, Info)")
            accepted += bool(info.is_accepted)
            _require(bool(box.contains(st.theta)), who, f"step {t} left the box prior")
            energies[t] = st.energy
        return st, energies, accepted

    _check_proposal(s, cls, state, np.random.default_rng(seed + 3), who)
    a_end, a_e, _ = chain(np.random.default_rng(seed + 1), state, 50)
    b_end, b_e, _ = chain(np.random.default_rng(seed + 1), state, 50)
    _require(np.array_equal(a_e, b_e) and np.array_equal(a_end.theta, b_end.theta), who,
             "two chains from the same state and seed differ (all randomness must come from "
             "the rng passed to step())")
    _, energies, accepted = chain(np.random.default_rng(seed + 2), a_end, n_steps)
    _require(accepted > 0, who, f"accepted none of {n_steps} transitions after adapt()")
    mean, sem = _batch_mean_sem(energies)
    exact = 0.5 * n * temperature
    _require(abs(mean - exact) < z * sem + 1e-12, who,
             f"<E> = {mean:.4f} +- {sem:.4f} on a {n}-D Gaussian at T = {temperature}; "
             f"exact n T/2 = {exact:.4f} ({abs(mean - exact) / sem:.1f} standard errors off)")
    hot = s.with_temperature(2 * temperature)
    _require(isinstance(hot, cls) and hot.temperature == 2 * temperature, who,
             "with_temperature() did not return the same sampler at the new temperature")
    taken = s.take_configuration(state, a_end, 2 * temperature)
    _require(isinstance(taken, cls.State) and np.array_equal(taken.theta, a_end.theta)
             and taken.step_size == state.step_size, who,
             "take_configuration() must return a State at the donor's theta with this "
             "slot's step size")


def _check_proposal(s: Any, cls: Any, state: Any, rng: np.random.Generator, who: str) -> None:
    """Contract version 2: ``propose``, where a sampler has one, returns a NamedTuple that
    begins with :class:`~thermonet.api.Proposal`'s fields."""
    propose = getattr(s, "propose", None)
    if propose is None or getattr(cls, "api_version", None) == 1:
        return
    prop = propose(state, rng)
    fields = tuple(getattr(prop, "_fields", ()))[:len(Proposal._fields)]
    _require(isinstance(prop, tuple) and fields == Proposal._fields, who,
             f"propose() returned {type(prop).__name__} with fields {fields}; api_version 2 "
             f"expects a NamedTuple beginning with {Proposal._fields} (thermonet.api.Proposal)")
    _require(isinstance(prop.info, cls.Info), who, "propose().info is not the sampler's Info")


# --- minimisers ---------------------------------------------------------------------------------

def check_minimiser(cls: Any, settings: dict[str, Any] | None = None, *, n: int = 6,
                    tol: float = 1e-3) -> None:
    """Check a :class:`~thermonet.api.Minimiser` plugin built with ``settings``.

    Minimises ``E = sum k_i w_i^2 / 2`` (k from 1 to 4) from ``w = 1`` and requires the result
    within ``tol`` of the minimum at 0 (in max norm), with the energy of its own ``theta``.
    """
    who = _who(cls)
    _check_class(cls, Minimiser, who)
    _check_config(cls, who)
    pot, box, _ = _gaussian(n, prior_scale=40.0)
    theta0 = np.ones(n)
    keep = theta0.copy()
    res = cls(**(settings or {})).minimise(pot, theta0, prior=box)
    _require(isinstance(res, MinimiseResult), who,
             f"minimise() returned {type(res).__name__}, not thermonet.api.MinimiseResult")
    _require(np.array_equal(theta0, keep), who, "minimise() modified theta0")
    _require(res.energy == pot.energy(res.theta), who,
             f"result energy {res.energy!r} is not E(result.theta) = {pot.energy(res.theta)!r}")
    _require(res.energy <= pot.energy(theta0), who, "result energy is above the start's")
    err = float(np.max(np.abs(res.theta)))
    _require(err < tol, who, f"stopped {err:.3g} from the minimum of a quadratic "
             f"(reason {res.reason!r}); expected < {tol}")


def check(role: str, cls: Any) -> None:
    """Run the check of ``role`` (``sampler``, ``minimiser``, ``architecture``,
    ``integrator``) on ``cls`` with its default settings (``thermonet plugins --check``).

    An architecture whose ``potential()`` needs data is bound to the training set its
    ``example_data`` names (the embedded D50 by default).
    """
    if role == "sampler":
        check_sampler(cls)
    elif role == "minimiser":
        check_minimiser(cls)
    elif role == "architecture":
        data = None
        try:
            cls().potential()
        except Exception:
            from thermonet.data import load_data

            data = load_data(getattr(cls, "example_data", "D50"), test="official").train
        check_architecture(cls, data=data)
    elif role == "integrator":
        from thermonet.api import Integrator

        _check_class(cls, Integrator, _who(cls))
    else:
        raise ValueError(f"unknown plugin role {role!r}")


__all__ = ["ConformanceError", "check", "check_architecture", "check_minimiser",
           "check_potential", "check_sampler"]
