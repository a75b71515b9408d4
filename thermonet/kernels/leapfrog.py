"""Velocity-Verlet (leapfrog) pieces and complete HMC trajectories in compiled code.

First-order building blocks (:func:`kick`, :func:`drift`, :func:`drift_reflect`), the one
L-step trajectory every compiled potential runs (:func:`trajectory_kernels`, which takes the
potential's gradient kernel), and :func:`mlp_trajectory`, that trajectory for the built-in MLP:
one gradient evaluation per step and no Python in the loop.

Grouped arguments
-----------------
A trajectory kernel takes ``(theta, p, grad, dyn, model)``: the integrator's settings
:class:`Dynamics` and the potential's arrays and scalars (``model``, a tuple whose fields the
potential's own NamedTuple names, e.g. :class:`MLPModel`), each passed as a *plain* tuple
(``tuple(Dynamics(...))``): Numba's dispatcher types a plain tuple in C but a NamedTuple in
Python, about 3 µs more per call. The Python entry points (:func:`mlp_trajectory`, ...) take
the NamedTuples and convert them.

Box walls
---------
``wall`` selects what happens at the prior box ``|theta_i| < a_i``:

* ``WALL_NONE`` (0): unbounded dynamics; the caller tests the end point (the paper's code). A
  trajectory that runs beyond ``runaway * a_i`` in any coordinate stops early (its end point is
  then outside the box and the proposal is rejected), as the original code's runaway guard.
* ``WALL_REFLECT`` (1): a coordinate crossing a wall is mirrored back into the box and its
  momentum negated (Neal 2011, Sec. 5.1). Reversible and volume-preserving, so the proposal
  stays exact, and the trajectory never leaves the box.
"""

from __future__ import annotations

import math
import types
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from thermonet.kernels import mlp
from thermonet.kernels.jit import kernel

WALL_NONE = 0
WALL_REFLECT = 1


class Dynamics(NamedTuple):
    """The integrator's settings for one trajectory (the kernels take ``tuple(dyn)``)."""

    #: ``1/m_i``, shape ``(n_params,)``
    inv_mass: np.ndarray
    step: float
    n_steps: int
    #: the box half-widths ``a_i``, shape ``(n_params,)``
    half_width: np.ndarray
    #: with WALL_NONE, stop when a coordinate reaches ``runaway * a_i``
    runaway: float


#: trajectory status codes
OK = 0
RUNAWAY = 1       # left runaway * box: stopped early, end point outside the box
NON_FINITE = 2    # energy or gradient became NaN/inf: stopped early, divergent


@kernel
def kick(p, grad, half_step):
    """``p <- p - half_step * grad``, in place."""
    for i in range(p.shape[0]):
        p[i] -= half_step * grad[i]


@kernel
def drift(theta, p, inv_mass, step):
    """``theta <- theta + step * inv_mass * p``, in place."""
    for i in range(theta.shape[0]):
        theta[i] += step * inv_mass[i] * p[i]


@kernel
def drift_check(theta, p, inv_mass, step, half_width, runaway):
    """Drift, and in the same pass test the runaway guard: returns True if some
    ``|theta_i| >= runaway * half_width_i`` (or theta is not finite) after the drift."""
    bad = False
    for i in range(theta.shape[0]):
        t = theta[i] + step * inv_mass[i] * p[i]
        theta[i] = t
        bad |= not (abs(t) < runaway * half_width[i])
    return bad


@kernel
def kick_drift_check(theta, p, grad, inv_mass, step, half_width, runaway):
    """A full kick then a drift, and the runaway test, in one pass over the parameters.

    The same floating-point operations as :func:`kick` with ``half_step = step`` followed by
    :func:`drift_check`, element by element, so the results are bitwise identical.
    """
    bad = False
    for i in range(theta.shape[0]):
        q = p[i] - step * grad[i]
        p[i] = q
        t = theta[i] + step * inv_mass[i] * q
        theta[i] = t
        bad |= not (abs(t) < runaway * half_width[i])
    return bad


#: most constant runs for which :func:`mlp_trajectory` uses per-run scalars (see :func:`runs`)
MAX_RUNS = 64


@kernel
def runs(inv_mass, half_width, max_runs):
    """Split the parameters into runs on which ``inv_mass`` and ``half_width`` are constant.

    Masses and box widths are set per layer, so the built-in networks have a handful of runs.
    Returns ``(bounds, inv_mass_r, half_width_r)``, run ``r`` covering
    ``bounds[r]:bounds[r + 1]``, or empty arrays when there are more than ``max_runs`` runs.
    """
    n = inv_mass.shape[0]
    count = 0
    for i in range(n):
        if i == 0 or inv_mass[i] != inv_mass[i - 1] or half_width[i] != half_width[i - 1]:
            count += 1
    if count > max_runs or n == 0:
        return np.empty(0, np.int64), np.empty(0), np.empty(0)
    bounds = np.empty(count + 1, np.int64)
    im = np.empty(count)
    hw = np.empty(count)
    r = 0
    for i in range(n):
        if i == 0 or inv_mass[i] != inv_mass[i - 1] or half_width[i] != half_width[i - 1]:
            bounds[r] = i
            im[r] = inv_mass[i]
            hw[r] = half_width[i]
            r += 1
    bounds[count] = n
    return bounds, im, hw


@kernel
def _kick_drift_count(theta, p, grad, step, a, limit):
    """One run of :func:`kick_drift_check` with scalar ``a = step * inv_mass`` and
    ``limit = runaway * half_width``; returns how many coordinates are not inside the limit."""
    n_bad = 0
    for i in range(theta.shape[0]):
        q = p[i] - step * grad[i]
        p[i] = q
        t = theta[i] + a * q
        theta[i] = t
        n_bad += not (abs(t) < limit)
    return n_bad


@kernel
def kick_drift_check_runs(theta, p, grad, step, bounds, inv_mass_r, half_width_r, runaway):
    """:func:`kick_drift_check` on constant runs (from :func:`runs`), bitwise identical to it.

    With the mass and width scalars per run the pass streams three arrays instead of five and
    vectorises without a reduction on a boolean (faster on M3: docs/performance.md).
    """
    n_bad = 0
    for r in range(bounds.shape[0] - 1):
        lo = bounds[r]
        hi = bounds[r + 1]
        n_bad += _kick_drift_count(theta[lo:hi], p[lo:hi], grad[lo:hi], step,
                                   step * inv_mass_r[r], runaway * half_width_r[r])
    return n_bad > 0


@kernel
def kick_drift_runaway(theta, p, grad, inv_mass, step, half_width, runaway, run):
    """A full kick, a drift and the runaway test: on constant runs when :func:`runs` found them
    (``run``, what it returned, with ``bounds`` not empty), else on the arrays. Both give the
    same bits."""
    bounds, im_r, hw_r = run
    if bounds.shape[0] > 0:
        return kick_drift_check_runs(theta, p, grad, step, bounds, im_r, hw_r, runaway)
    return kick_drift_check(theta, p, grad, inv_mass, step, half_width, runaway)


@kernel
def _drift_count(theta, p, a, limit):
    """One run of :func:`drift_check` with scalar ``a = step * inv_mass`` and
    ``limit = runaway * half_width``; returns how many coordinates are not inside the limit."""
    n_bad = 0
    for i in range(theta.shape[0]):
        t = theta[i] + a * p[i]
        theta[i] = t
        n_bad += not (abs(t) < limit)
    return n_bad


@kernel
def drift_runaway(theta, p, inv_mass, step, half_width, runaway, run):
    """:func:`drift_check` on constant runs when :func:`runs` found them (``run``, what it
    returned, with ``bounds`` not empty), else on the arrays; the same bits either way."""
    bounds, im_r, hw_r = run
    if bounds.shape[0] == 0:
        return drift_check(theta, p, inv_mass, step, half_width, runaway)
    n_bad = 0
    for r in range(bounds.shape[0] - 1):
        lo = bounds[r]
        hi = bounds[r + 1]
        n_bad += _drift_count(theta[lo:hi], p[lo:hi], step * im_r[r], runaway * hw_r[r])
    return n_bad > 0


#: most wall reflections of one coordinate in one drift. An ordinary step crosses a wall at most
#: once or twice; a step many box widths long would fold for ever (one fold per box width), so
#: the coordinate is set to NaN instead: the next energy is not finite and the trajectory ends
#: as a rejected divergence (status NON_FINITE) in every trajectory kernel.
MAX_REFLECTIONS = 64


@kernel
def drift_reflect(theta, p, inv_mass, step, half_width):
    """Drift with reflection at the walls ``|theta_i| = half_width_i``; returns the number of
    reflections. ``theta`` and ``p`` are overwritten. A coordinate that would need more than
    :data:`MAX_REFLECTIONS` folds becomes NaN (a divergence)."""
    n_ref = 0
    for i in range(theta.shape[0]):
        t = theta[i] + step * inv_mass[i] * p[i]
        a = half_width[i]
        # a long step may cross both walls: fold until inside
        n_fold = 0
        while t > a or t < -a:
            if n_fold == MAX_REFLECTIONS:
                t = math.nan
                break
            if t > a:
                t = 2.0 * a - t
            else:
                t = -2.0 * a - t
            p[i] = -p[i]
            n_ref += 1
            n_fold += 1
            if not math.isfinite(t):
                break
        theta[i] = t
    return n_ref


@kernel
def beyond(theta, half_width, factor):
    """True if ``|theta_i| >= factor * half_width_i`` for some i (or theta is not finite)."""
    for i in range(theta.shape[0]):
        v = abs(theta[i])
        if not (v < factor * half_width[i]):
            return True
    return False


@kernel
def kinetic(p, inv_mass):
    """``sum p_i^2 / (2 m_i)`` in float64."""
    k = 0.0
    for i in range(p.shape[0]):
        k += 0.5 * inv_mass[i] * p[i] * p[i]
    return k


@kernel
def all_finite(a):
    """True if every entry of the 1-D array ``a`` is finite."""
    for i in range(a.shape[0]):
        if not math.isfinite(a[i]):
            return False
    return True


@kernel
def _copy_cast(src, dst):
    for i in range(src.shape[0]):
        dst[i] = src[i]


def by_wall(make):
    """One kernel per wall mode: ``{WALL_NONE: kernel(make(False)), WALL_REFLECT:
    kernel(make(True))}``.

    ``make(reflect)`` returns a trajectory function whose body branches on the closure
    variable ``reflect`` itself (``if reflect:``, ``if not reflect:``). Numba takes a closure
    variable for a constant and prunes the other mode's branches before typing, so each kernel
    compiles only its own mode's helpers, and a run, which uses one mode, never compiles the
    other's (a runtime ``wall`` argument compiled both into every trajectory kernel:
    docs/performance.md). Numba does not prune a comparison with a module attribute such as
    ``lf.WALL_REFLECT``: test the bare variable. Each kernel is named ``<name>_endpoint`` or
    ``<name>_reflect``, which is also the name of its cache files.
    """
    kernels = {}
    for wall, label in ((WALL_NONE, "endpoint"), (WALL_REFLECT, "reflect")):
        f = make(wall == WALL_REFLECT)
        f.__name__ = f.__qualname__ = f"{f.__name__}_{label}"
        kernels[wall] = kernel(f)
    return kernels


def for_wall(kernels, wall):
    """The kernel of ``kernels`` (from :func:`by_wall`) for ``wall``: WALL_REFLECT's for
    WALL_REFLECT, WALL_NONE's for anything else (as the runtime test did)."""
    return kernels[WALL_REFLECT if wall == WALL_REFLECT else WALL_NONE]


def _bind(f: Callable[..., Any], name: str, constants: dict[str, Any]) -> Callable[..., Any]:
    """``f`` as a new function called ``name`` whose module globals also hold ``constants``.

    Numba takes a global for a compile-time constant, as it does a closure variable, but its
    cache keys a closure on its variables' pickled values, and a pickled kernel carries a
    random id: a kernel held in a closure would never be found in the cache again. A global is
    not part of the key (the stamp of :mod:`thermonet.kernels.jit` covers every kernel file).
    """
    g = dict(f.__globals__)
    g.update(constants)
    out = types.FunctionType(f.__code__, g, name, f.__defaults__, f.__closure__)
    out.__qualname__ = name
    out.__doc__ = f.__doc__
    return out


def _make_trajectory(reflect: bool, fused: bool) -> Callable[..., Any]:
    # _GRADIENT, _FUSED_READY and _FUSED_KICK are the globals _bind gives each kernel
    def trajectory(theta, p, grad, dyn, model):
        """L velocity-Verlet steps; see :func:`trajectory_kernels`."""
        inv_mass, step, n_steps, half_width, runaway = dyn
        e = np.nan
        aux = np.nan
        n_ref = 0
        if not reflect:
            run = runs(inv_mass, half_width, MAX_RUNS)
        direct = False
        if fused:
            direct = _FUSED_READY(theta, model)  # noqa: F821
        # Adjacent half-kicks are merged: a half kick, then per step (drift, gradient, full
        # kick) with a half kick at the end. Without walls the full kick and the next drift
        # (with the runaway test) are one fused pass over the parameters; in the direct mode
        # the full kick happens inside the gradient kernel and the pass only drifts.
        kick(p, grad, 0.5 * step)
        if reflect:
            n_ref += drift_reflect(theta, p, inv_mass, step, half_width)
        elif drift_check(theta, p, inv_mass, step, half_width, runaway):
            return e, aux, 1, RUNAWAY, n_ref
        for s in range(n_steps):
            last = s == n_steps - 1
            # the bare closure constant, alone, so that Numba prunes the branch (by_wall)
            if fused:  # noqa: SIM102
                if direct and not last:
                    e = _FUSED_KICK(theta, p, step, model)  # noqa: F821
                    aux = e
                    if not math.isfinite(e):
                        return e, aux, s + 1, NON_FINITE, n_ref
                    if reflect:
                        n_ref += drift_reflect(theta, p, inv_mass, step, half_width)
                    elif drift_runaway(theta, p, inv_mass, step, half_width, runaway, run):
                        return e, aux, s + 2, RUNAWAY, n_ref
                    continue
            e, aux = _GRADIENT(theta, grad, model)  # noqa: F821
            if not math.isfinite(e):
                return e, aux, s + 1, NON_FINITE, n_ref
            if last:
                kick(p, grad, 0.5 * step)
            elif reflect:
                kick(p, grad, step)
                n_ref += drift_reflect(theta, p, inv_mass, step, half_width)
            elif kick_drift_runaway(theta, p, grad, inv_mass, step, half_width, runaway, run):
                return e, aux, s + 2, RUNAWAY, n_ref
        return e, aux, n_steps, OK, n_ref

    return trajectory


def trajectory_kernels(name: str, gradient: Any, fused_ready: Any = None,
                       fused_kick: Any = None) -> dict[int, Any]:
    """The trajectory of one potential, compiled per wall mode (:func:`by_wall`).

    Each kernel is ``kernel(theta, p, grad, dyn, model) -> (e, aux, n_done, status,
    n_reflections)``: ``n_steps`` velocity-Verlet steps from ``theta`` with momentum ``p``,
    ``grad`` holding dE/dtheta at ``theta`` on entry; on exit all three hold the end point (after
    an early stop, status not OK, ``grad`` is not the gradient there). ``dyn`` is
    ``tuple(Dynamics(...))`` and ``model`` the potential's plain tuple.

    ``gradient(theta, grad, model) -> (e, aux)`` is the potential's kernel: it writes dE/dtheta
    to ``grad`` and returns the energy the trajectory tests for finiteness and returns, and
    one more float it passes through (the bridge's MLP energy; the energy again for others).
    ``fused_ready(theta, model) -> bool`` and ``fused_kick(theta, p, step, model) -> e``, both
    or neither, give the fused path: when ``fused_ready`` holds, every full kick but the last
    is ``fused_kick``, which puts ``p -= step * dE/dtheta`` straight into ``p`` without storing
    the gradient (the built-in MLP with its data in one float64 block: :func:`mlp_trajectory`).
    The kernels share one source; ``gradient`` and the fused pair reach them as compile-time
    constants, and the kernels' names (and cache files) are ``<name>_endpoint`` and
    ``<name>_reflect``.
    """
    fused = fused_ready is not None
    constants = {"_GRADIENT": gradient, "_FUSED_READY": fused_ready if fused else gradient,
                 "_FUSED_KICK": fused_kick if fused else gradient}
    return by_wall(lambda reflect: _bind(_make_trajectory(reflect, fused), name, constants))


class MLPModel(NamedTuple):
    """The built-in MLP's arguments of :func:`mlp_trajectory`."""

    #: the network and its data, as in :func:`thermonet.kernels.mlp.loss_and_grad`; ``x``,
    #: ``work`` and ``partial`` have the dtype of the gradient evaluation
    widths: np.ndarray
    out_act: int
    x: np.ndarray
    y: np.ndarray
    block: int
    #: the inputs transposed block by block, or empty (:class:`thermonet.kernels.mlp.Net`)
    xt: np.ndarray
    work: np.ndarray
    partial: np.ndarray
    #: buffers in the gradient dtype. With ``cast`` true (mixed precision, float32
    #: gradients) theta is copied into ``theta_g`` and the gradient computed into ``grad_g``,
    #: then widened into ``grad``; otherwise they are ``theta`` and ``grad`` themselves
    theta_g: np.ndarray
    grad_g: np.ndarray
    cast: bool


# inlined into the trajectory kernels: a kernel of its own around loss_and_grad cost about
# 1.5 CPU s to compile at a first run, for a call the trajectory makes anyway
@kernel(inline=True)
def _mlp_gradient(theta, grad, model):
    widths, out_act, x, y, block, xt, work, partial, theta_g, grad_g, cast = model
    # one code path for both precisions (Numba types every branch): with ``cast`` false,
    # theta_g and grad_g are theta and grad themselves
    if cast:
        _copy_cast(theta, theta_g)
    e = mlp.loss_and_grad(theta_g, (widths, out_act, x, y, block, xt), work, partial, grad_g)
    if cast:
        _copy_cast(grad_g, grad)
    return e, e


@kernel
def _mlp_fused_ready(theta, model):
    _, _, x, _, block, _, _, _, _, _, cast = model
    return not cast and theta.itemsize == 8 and mlp.n_blocks(x.shape[0], block) == 1


@kernel
def _mlp_fused_kick(theta, p, step, model):
    widths, out_act, x, y, _, xt, work, _, theta_g, _, _ = model
    # what mlp.loss_and_kick does with one block of float64 data, without compiling that
    # kernel into this one; theta_g is theta here (not cast), and passing it keeps the float32
    # kernels' typing of this untaken path (where kick_block does nothing) in one dtype
    _, e = mlp.kick_block(theta_g, (widths, out_act, x, y, xt), work, p, step)
    return e


#: :func:`mlp_trajectory` compiled for each wall mode (:func:`by_wall`)
MLP_TRAJECTORY = trajectory_kernels("mlp_trajectory", _mlp_gradient, _mlp_fused_ready,
                                    _mlp_fused_kick)


def mlp_trajectory(theta, p, grad, dyn, wall, model):
    """One HMC trajectory of the built-in MLP: ``dyn.n_steps`` velocity-Verlet steps.

    On entry ``grad`` holds dE/dtheta at ``theta``. On exit ``theta``, ``p`` and ``grad`` hold
    the end point. One gradient evaluation per step.

    ``theta``, ``p`` and ``grad`` (float64, shape ``(n_params,)``) are overwritten; ``dyn``
    is a :class:`Dynamics`, ``model`` an :class:`MLPModel`; ``wall`` (WALL_NONE or
    WALL_REFLECT) selects the kernel of :data:`MLP_TRAJECTORY` that runs the trajectory.
    Returns ``(energy, n_done, status, n_reflections)``: ``energy`` is E at the end point from
    the last gradient evaluation (in the gradient's precision); ``status`` is OK, RUNAWAY or
    NON_FINITE. After an early stop (status not OK) ``grad`` is not the gradient at ``theta``.

    With float64 gradients and the data in one block, the full kicks inside the trajectory
    put the gradient straight into ``p`` (``thermonet.kernels.mlp.kick_block``, as
    :func:`thermonet.kernels.mlp.loss_and_kick` does), so the gradient is never stored and the
    pass after it only drifts. The result then differs from separate gradient and kick steps
    by the rounding of the matrix products (a few ulp; none with the ``np.dot`` backend). The
    last step always computes ``grad``.
    """
    e, _, n_done, status, n_ref = for_wall(MLP_TRAJECTORY, wall)(theta, p, grad, tuple(dyn),
                                                                 tuple(model))
    return e, n_done, status, n_ref
