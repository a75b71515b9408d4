"""A network's energy, gradient and whole HMC trajectories in JAX, batched over replicas.

The functions here evaluate what :mod:`thermonet.kernels.mlp` and
:mod:`thermonet.kernels.leapfrog` evaluate, on many parameter vectors at once (``vmap`` over
rows, one ``jit``-compiled loop for the trajectories of a whole ladder): the same parameter
layout, the same activations, energies accumulated in float64, the same box walls (reflection,
or the end-point test with the runaway guard), status codes and step counts. They differ from
the compiled kernels in the last bits only (another order of summation; tested to rounding in
tests/accel/test_accel.py), so the two engines give chains that agree in distribution, not bit for
bit.

``dtype = "float32"``: the forward and backward passes in float32 (the data term still summed
in float64 from float64 copies of the outputs); the caller recomputes the end point's energy
in float64 before accepting (the sampler's ``precision = "mixed"``).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from thermonet.api import NetworkSpec
from thermonet.kernels import leapfrog as lf

jax.config.update("jax_enable_x64", True)

#: most wall reflections of one coordinate in one drift, as the compiled kernels
MAX_REFLECTIONS = lf.MAX_REFLECTIONS


def device_kind() -> str:
    """The platform JAX computes on (``cpu``, ``gpu``, ...)."""
    return str(jax.default_backend())


def _layers(widths: tuple[int, ...]) -> list[tuple[int, int, int]]:
    """``(offset, n_out, n_in)`` of each layer's weights in the flat parameter vector."""
    out, pos = [], 0
    for n_in, n_out in itertools.pairwise(widths):
        out.append((pos, n_out, n_in))
        pos += (n_in + 1) * n_out
    return out


def make_outputs(spec: NetworkSpec, dtype: Any) -> Callable[[Any, Any], Any]:
    """``outputs(theta, x)``: the network's last layer (before the softmax) for one vector."""
    layers = _layers(spec.widths)
    hidden = jax.nn.sigmoid if spec.hidden == "logistic" else jnp.tanh
    logistic_out = spec.output == "logistic"

    def outputs(theta: Any, x: Any) -> Any:
        h = x
        th = theta.astype(dtype)
        for i, (pos, n_out, n_in) in enumerate(layers):
            w = th[pos:pos + n_out * n_in].reshape(n_out, n_in)
            b = th[pos + n_out * n_in:pos + (n_in + 1) * n_out]
            z = h @ w.T + b
            last = i == len(layers) - 1
            h = hidden(z) if not last else (jax.nn.sigmoid(z) if logistic_out else z)
        return h

    return outputs


def make_energy(spec: NetworkSpec, dtype: Any) -> Callable[..., Any]:
    """``energy(theta, x, y, tau, prec, const)`` in float64 (see :class:`NetworkSpec`)."""
    outputs = make_outputs(spec, dtype)

    def energy(theta: Any, x: Any, y: Any, tau: Any, prec: Any, const: Any) -> Any:
        z = outputs(theta, x).astype(jnp.float64)
        if spec.loss == "cross_entropy":
            data = jnp.sum(jax.nn.logsumexp(z, axis=1)
                           - jnp.take_along_axis(z, y[:, None], axis=1)[:, 0])
        else:
            data = 0.5 * jnp.sum((z - y) ** 2)
        return tau * data + const + 0.5 * jnp.sum(prec * theta * theta)

    return energy


class BatchedNetwork:
    """The jitted, replica-batched functions of one network on one data set and dtype."""

    def __init__(self, spec: NetworkSpec, dtype: str = "float64") -> None:
        self.spec = spec
        self.dtype = jnp.float32 if dtype == "float32" else jnp.float64
        self.x = jnp.asarray(np.asarray(spec.x), dtype=self.dtype)
        y = np.asarray(spec.y)
        self.y = jnp.asarray(y, dtype=jnp.int64 if spec.loss == "cross_entropy"
                             else jnp.float64)
        energy = make_energy(spec, self.dtype)
        value_and_grad = jax.value_and_grad(energy)

        def e_and_g(theta: Any, x: Any, y: Any, tau: Any, prec: Any, const: Any) -> Any:
            e, g = value_and_grad(theta, x, y, tau, prec, const)
            return e, g.astype(jnp.float64)

        rows = (0, None, None, 0, 0, 0)
        self._energy = jax.jit(jax.vmap(energy, in_axes=rows))
        self._energy_and_grad = jax.jit(jax.vmap(e_and_g, in_axes=rows))
        #: one row's ``energy(theta, x, y, tau, prec, const)`` and ``(energy, float64
        #: gradient)``, to build other compiled functions from
        self.energy_row = energy
        self.energy_and_grad_row = e_and_g
        self._trajectories: dict[bool, Any] = {}

    # -- evaluations over rows ---------------------------------------------------------------

    def energy(self, theta_kp: Any, tau_k: Any, prec_kp: Any, const_k: Any) -> np.ndarray:
        """Energies ``(K,)`` of the rows of ``theta_kp``."""
        return np.asarray(self._energy(jnp.asarray(theta_kp), self.x, self.y,
                                       jnp.asarray(tau_k), jnp.asarray(prec_kp),
                                       jnp.asarray(const_k)), dtype=np.float64)

    def energy_and_grad(self, theta_kp: Any, tau_k: Any, prec_kp: Any, const_k: Any
                        ) -> tuple[np.ndarray, np.ndarray]:
        """Energies ``(K,)`` and float64 gradients ``(K, n_params)``."""
        e, g = self._energy_and_grad(jnp.asarray(theta_kp), self.x, self.y, jnp.asarray(tau_k),
                                     jnp.asarray(prec_kp), jnp.asarray(const_k))
        return np.asarray(e, dtype=np.float64), np.asarray(g, dtype=np.float64)

    def trajectories(self, theta: Any, p: Any, grad: Any, inv_mass: Any, step: Any,
                     n_steps: Any, reflect: bool, half_width: Any, runaway: Any, tau: Any,
                     prec: Any, const: Any) -> tuple[np.ndarray, ...]:
        """One velocity-Verlet trajectory per row, all rows in one compiled loop.

        Row k runs ``n_steps[k]`` steps of size ``step[k]`` from ``(theta[k], p[k])`` with
        ``grad[k]`` the gradient there, exactly as
        :func:`thermonet.kernels.leapfrog.mlp_trajectory` does (walls, early stops, status
        codes). Returns ``(theta, p, grad, energy, n_done, status, n_reflections)`` as NumPy
        arrays over rows.
        """
        fn = self._trajectories.get(reflect)
        if fn is None:
            fn = self._trajectories[reflect] = jax.jit(make_trajectories(self.energy_and_grad_row,
                                                                          reflect))
        out = fn(jnp.asarray(theta), jnp.asarray(p), jnp.asarray(grad), jnp.asarray(inv_mass),
                 jnp.asarray(step), jnp.asarray(n_steps), jnp.asarray(half_width),
                 jnp.asarray(runaway), self.x, self.y, jnp.asarray(tau), jnp.asarray(prec),
                 jnp.asarray(const))
        return tuple(np.asarray(a) for a in out)


def reflect_into_box(theta: Any, p: Any, half_width: Any) -> tuple[Any, Any, Any]:
    """Fold ``theta`` into ``[-a, a]`` as repeated reflections at the walls, negating ``p``
    once per reflection; a coordinate needing more than :data:`MAX_REFLECTIONS` becomes NaN."""
    a = half_width
    inside = jnp.abs(theta) <= a
    s = jnp.floor((theta + a) / (2.0 * a))
    r = theta + a - 2.0 * a * s
    odd = jnp.mod(s, 2.0) == 1.0
    folded = jnp.where(odd, a - r, r - a)
    n = jnp.where(inside | ~jnp.isfinite(theta), 0.0, jnp.abs(s))
    theta_new = jnp.where(inside, theta, folded)
    theta_new = jnp.where(n > MAX_REFLECTIONS, jnp.nan, theta_new)
    flip = jnp.where(jnp.mod(n, 2.0) == 1.0, -1.0, 1.0)
    return theta_new, p * flip, jnp.sum(jnp.minimum(n, MAX_REFLECTIONS)).astype(jnp.int64)


def make_trajectories(e_and_g: Callable[..., Any], reflect: bool) -> Callable[..., Any]:
    """The batched trajectories of :meth:`BatchedNetwork.trajectories` for the row gradient
    ``e_and_g(theta, x, y, tau, prec, const)`` and one wall mode (to be jitted)."""
    ok, runaway_code, non_finite = lf.OK, lf.RUNAWAY, lf.NON_FINITE
    rows = (0, 0, 0, 0, 0, None, None, 0, 0, 0)

    def drift(theta: Any, p: Any, inv_mass: Any, step: Any, half_width: Any, runaway: Any
              ) -> tuple[Any, Any, Any, Any]:
        moved = theta + step * inv_mass * p
        if reflect:
            moved, p, n_ref = reflect_into_box(moved, p, half_width)
            return moved, p, n_ref, jnp.asarray(False)
        bad = ~jnp.all(jnp.abs(moved) < runaway * half_width)
        return moved, p, jnp.asarray(0, jnp.int64), bad

    def first(theta: Any, p: Any, grad: Any, inv_mass: Any, step: Any, half_width: Any,
              runaway: Any) -> tuple[Any, ...]:
        p = p - 0.5 * step * grad
        theta, p, n_ref, bad = drift(theta, p, inv_mass, step, half_width, runaway)
        status = jnp.where(bad, runaway_code, ok)
        return theta, p, n_ref, status, jnp.where(bad, 1, 0).astype(jnp.int64)

    def body(s: Any, theta: Any, p: Any, grad: Any, e: Any, status: Any, n_done: Any,
             n_ref: Any, inv_mass: Any, step: Any, n_steps: Any, half_width: Any,
             runaway: Any, x: Any, y: Any, tau: Any, prec: Any, const: Any) -> tuple[Any, ...]:
        active = (status == ok) & (s < n_steps)
        e_new, g_new = e_and_g(theta, x, y, tau, prec, const)
        finite = jnp.isfinite(e_new)
        last = s == n_steps - 1
        p_kick = p - jnp.where(last, 0.5 * step, step) * g_new
        moved, p_moved, refs, bad = drift(theta, p_kick, inv_mass, step, half_width, runaway)
        theta_new = jnp.where(last | ~finite, theta, moved)
        p_new = jnp.where(last, p_kick, jnp.where(finite, p_moved, p))
        refs = jnp.where(last | ~finite, 0, refs)
        bad = bad & ~last & finite
        status_new = jnp.where(~finite, non_finite, jnp.where(bad, runaway_code, ok))
        done_new = jnp.where(~finite, s + 1, jnp.where(bad, s + 2, s + 1)).astype(jnp.int64)
        return (jnp.where(active, theta_new, theta), jnp.where(active, p_new, p),
                jnp.where(active, g_new, grad), jnp.where(active, e_new, e),
                jnp.where(active, status_new, status), jnp.where(active, done_new, n_done),
                n_ref + jnp.where(active, refs, 0))

    first_k = jax.vmap(first)
    body_k: Callable[..., Any] = jax.vmap(body, in_axes=(None, 0, 0, 0, 0, 0, 0, 0, *rows))

    def trajectories(theta: Any, p: Any, grad: Any, inv_mass: Any, step: Any, n_steps: Any,
                     half_width: Any, runaway: Any, x: Any, y: Any, tau: Any, prec: Any,
                     const: Any) -> tuple[Any, ...]:
        theta, p, n_ref, status, n_done = first_k(theta, p, grad, inv_mass, step, half_width,
                                                  runaway)
        e = jnp.full(theta.shape[0], jnp.nan)

        def loop(s: Any, carry: tuple[Any, ...]) -> tuple[Any, ...]:
            return body_k(s, *carry, inv_mass, step, n_steps, half_width, runaway, x, y, tau,
                          prec, const)

        carry = (theta, p, grad, e, status, n_done, n_ref)
        theta, p, grad, e, status, n_done, n_ref = lax.fori_loop(
            0, jnp.max(n_steps), loop, carry)
        return theta, p, grad, e, n_done, status, n_ref

    return trajectories

