"""Velocity-Verlet (leapfrog) pieces and complete HMC trajectories in compiled code.

First-order building blocks (:func:`kick`, :func:`drift`, :func:`drift_reflect`) shared by every
trajectory kernel, and :func:`mlp_trajectory`, the whole L-step trajectory of the built-in MLP
with one gradient evaluation per step and no Python in the loop.

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

import numpy as np

from thermonet.kernels import mlp
from thermonet.kernels.jit import kernel

WALL_NONE = 0
WALL_REFLECT = 1

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
def kick_drift_runaway(theta, p, grad, inv_mass, step, half_width, runaway, bounds, im_r, hw_r):
    """A full kick, a drift and the runaway test: on constant runs when :func:`runs` found them
    (``bounds`` not empty), else on the arrays. Both give the same bits."""
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
def drift_runaway(theta, p, inv_mass, step, half_width, runaway, bounds, im_r, hw_r):
    """:func:`drift_check` on constant runs when :func:`runs` found them (``bounds`` not
    empty), else on the arrays; the same bits either way."""
    if bounds.shape[0] == 0:
        return drift_check(theta, p, inv_mass, step, half_width, runaway)
    n_bad = 0
    for r in range(bounds.shape[0] - 1):
        lo = bounds[r]
        hi = bounds[r + 1]
        n_bad += _drift_count(theta[lo:hi], p[lo:hi], step * im_r[r], runaway * hw_r[r])
    return n_bad > 0


@kernel
def draw_momenta(rng, scale, inv_mass, p):
    """``p_i = z_i * scale_i`` with ``z = rng.standard_normal(n)``; returns ``kinetic(p)``.

    Numba's Generator methods use NumPy's algorithms on the same bit generator, so ``p`` and
    the state ``rng`` is left in are exactly those of the NumPy expression (tested), at about a
    third of the cost.
    """
    k = 0.0
    for i in range(p.shape[0]):
        v = rng.standard_normal() * scale[i]
        p[i] = v
        k += 0.5 * inv_mass[i] * v * v
    return k


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


def _make_mlp_trajectory(reflect):
    def mlp_trajectory(theta, p, grad, inv_mass, step, n_steps, half_width, runaway, widths,
                       out_act, x, y, block, work, partial, theta_g, grad_g, cast):
        e = np.nan
        n_ref = 0
        if not reflect:
            bounds, im_r, hw_r = runs(inv_mass, half_width, MAX_RUNS)
        direct = not cast and theta.itemsize == 8 and mlp.n_blocks(x.shape[0], block) == 1
        # Adjacent half-kicks are merged: a half kick, then per step (drift, gradient, full
        # kick) with a half kick at the end. Without walls the full kick and the next drift
        # (with the runaway test) are one fused pass over the parameters; in the direct mode
        # the full kick happens inside the gradient kernel and the pass only drifts.
        kick(p, grad, 0.5 * step)
        if reflect:
            n_ref += drift_reflect(theta, p, inv_mass, step, half_width)
        elif drift_check(theta, p, inv_mass, step, half_width, runaway):
            return e, 1, RUNAWAY, n_ref
        for s in range(n_steps):
            last = s == n_steps - 1
            if direct and not last:
                # what mlp.loss_and_kick does with one block of float64 data, without
                # compiling that kernel into this one; theta_g is theta here (not cast), and
                # passing it keeps the float32 kernels' typing of this untaken branch (where
                # kick_block does nothing) in one dtype
                _, e = mlp.kick_block(theta_g, widths, out_act, x, y, work, p, step)
                if not math.isfinite(e):
                    return e, s + 1, NON_FINITE, n_ref
                if reflect:
                    n_ref += drift_reflect(theta, p, inv_mass, step, half_width)
                elif drift_runaway(theta, p, inv_mass, step, half_width, runaway, bounds, im_r,
                                   hw_r):
                    return e, s + 2, RUNAWAY, n_ref
                continue
            # one code path for both precisions (Numba types every branch): with ``cast``
            # false, theta_g and grad_g are theta and grad themselves
            if cast:
                _copy_cast(theta, theta_g)
            e = mlp.loss_and_grad(theta_g, widths, out_act, x, y, block, work, partial, grad_g)
            if cast:
                _copy_cast(grad_g, grad)
            if not math.isfinite(e):
                return e, s + 1, NON_FINITE, n_ref
            if last:
                kick(p, grad, 0.5 * step)
            elif reflect:
                kick(p, grad, step)
                n_ref += drift_reflect(theta, p, inv_mass, step, half_width)
            elif kick_drift_runaway(theta, p, grad, inv_mass, step, half_width, runaway,
                                    bounds, im_r, hw_r):
                return e, s + 2, RUNAWAY, n_ref
        return e, n_steps, OK, n_ref

    return mlp_trajectory


#: :func:`mlp_trajectory` compiled for each wall mode (:func:`by_wall`)
MLP_TRAJECTORY = by_wall(_make_mlp_trajectory)


def mlp_trajectory(theta, p, grad, inv_mass, step, n_steps, wall, half_width, runaway,
                   widths, out_act, x, y, block, work, partial, theta_g, grad_g, cast):
    """One HMC trajectory of the built-in MLP: ``n_steps`` velocity-Verlet steps.

    On entry ``grad`` holds dE/dtheta at ``theta``. On exit ``theta``, ``p`` and ``grad`` hold
    the end point. One gradient evaluation per step.

    Parameters
    ----------
    theta, p, grad : ndarray of float64, shape (n_params,)
        Overwritten.
    inv_mass : ndarray of float64, shape (n_params,)
    step : float
    n_steps : int
    wall : int
        WALL_NONE or WALL_REFLECT: selects the kernel compiled for that mode
        (:data:`MLP_TRAJECTORY`), which runs the trajectory.
    half_width : ndarray of float64, shape (n_params,)
        Box half-widths ``a_i = sigma_i / 2``.
    runaway : float
        With WALL_NONE, stop when a coordinate reaches ``runaway * a_i``.
    widths, out_act, x, y, block, work, partial
        The MLP and its data, as in :func:`thermonet.kernels.mlp.loss_and_grad`; ``x``,
        ``work`` and ``partial`` have the dtype of the gradient evaluation.
    theta_g, grad_g : ndarray, shape (n_params,)
        Buffers in the gradient dtype. With ``cast`` true (mixed precision, float32
        gradients), theta is copied into ``theta_g`` and the gradient computed into ``grad_g``
        then widened into ``grad``; otherwise pass ``theta`` and ``grad`` themselves.

    Returns
    -------
    (energy, n_done, status, n_reflections)
        ``energy`` is E at the end point from the last gradient evaluation (in the gradient's
        precision); ``status`` is OK, RUNAWAY or NON_FINITE. After an early stop (status not
        OK) ``grad`` is not the gradient at ``theta``.

    Notes
    -----
    With float64 gradients and the data in one block, the full kicks inside the trajectory
    put the gradient straight into ``p`` (``thermonet.kernels.mlp.kick_block``, as
    :func:`thermonet.kernels.mlp.loss_and_kick` does), so the gradient is never stored and the
    pass after it only drifts. The result then differs
    from separate gradient and kick steps by the rounding of the matrix products (a few ulp;
    none with the ``np.dot`` backend). The last step always computes ``grad``.
    """
    return for_wall(MLP_TRAJECTORY, wall)(
        theta, p, grad, inv_mass, step, n_steps, half_width, runaway, widths, out_act, x, y,
        block, work, partial, theta_g, grad_g, cast)
