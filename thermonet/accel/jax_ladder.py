"""One replica-exchange iteration of a whole ladder as one compiled JAX function.

Every slot's HMC transitions (momenta, jittered step size and length, the batched trajectory,
the Metropolis test on float64 energies), the prior rung's exact draws from the box, and the
swap scheme's exchanges run on the device, on arrays over slots; the state stays there between
iterations and only the iteration's diagnostics (a few numbers per slot) come back. The
arithmetic of a transition is :meth:`thermonet.samplers.hmc.HMC.step`'s; the random numbers
come from JAX's generator, keyed by the run's seed and the iteration number, so a resumed run
continues exactly, and the chain agrees with the other engines' in distribution.

References
----------
Baldock & Marzari, arXiv:1904.04154, Algs. 1-2; Syed et al., JRSS B 84 (2022) 321 (deo).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from thermonet.accel.jax_network import BatchedNetwork, make_trajectories
from thermonet.kernels import leapfrog as lf

#: the swap schemes this kernel runs (``ladder.swap_scheme``)
SCHEMES = ("deo", "even-odd", "random-pairs")


class LadderSettings(NamedTuple):
    """What is fixed for the iterations of one ladder (host arrays over slots)."""

    n_leapfrog: int
    step_size_jitter: float
    n_leapfrog_jitter: float
    reflect: bool
    float32: bool
    scheme: str                  #: one of :data:`SCHEMES`
    n_swaps: int                 #: random-pairs attempts per iteration
    temperature_k: np.ndarray    #: (K,) T, inf at a prior rung
    n_trajectories_k: np.ndarray  #: (K,) transitions per iteration
    inv_mass_k: np.ndarray       #: (K, n)
    half_width: np.ndarray       #: (n,) box half-widths (inf without a box)
    runaway: float
    prior_k: np.ndarray          #: (K,) bool: slot draws from the box prior
    tau_k: np.ndarray            #: (K,) the potential's terms per slot
    prec_k: np.ndarray           #: (K, m) m = 1 or n
    const_k: np.ndarray          #: (K,)

    def static(self) -> tuple[Any, ...]:
        """What the compiled function is specialised on (the rest are its arguments)."""
        return (self.n_leapfrog, self.step_size_jitter, self.n_leapfrog_jitter, self.reflect,
                self.float32, self.scheme, self.n_swaps,
                tuple(int(n) for n in self.n_trajectories_k),
                tuple(int(k) for k in np.flatnonzero(self.prior_k)))


class DeviceState(NamedTuple):
    """The ladder's state on the device."""

    theta: Any        #: (K, n)
    energy: Any       #: (K,)
    grad: Any         #: (K, n)
    step_size: Any    #: (K,)
    replica: Any      #: (K,)


def constants(settings: LadderSettings) -> dict[str, Any]:
    """The device arrays of ``settings`` that the compiled iteration takes as arguments."""
    s = settings
    t = np.asarray(s.temperature_k, dtype=np.float64)
    finite = np.isfinite(t)
    t1 = np.where(finite, t, 1.0)
    return {
        "temp": jnp.asarray(t1),
        "beta": jnp.asarray(np.where(finite, 1.0 / t1, 0.0)),
        "n_traj": jnp.asarray(np.asarray(s.n_trajectories_k, dtype=np.int64)),
        "inv_mass": jnp.asarray(s.inv_mass_k),
        "p_scale": jnp.asarray(np.sqrt(t1[:, None] / np.asarray(s.inv_mass_k))),
        "half_width": jnp.asarray(np.broadcast_to(s.half_width, s.inv_mass_k.shape)),
        "runaway": jnp.asarray(np.full(t.shape, s.runaway)),
        "prior": jnp.asarray(np.asarray(s.prior_k, dtype=bool)),
        "tau": jnp.asarray(s.tau_k), "prec": jnp.asarray(s.prec_k),
        "const": jnp.asarray(s.const_k),
    }


class LadderKernel:
    """The compiled iteration for one network and the static part of a
    :class:`LadderSettings` (its arrays are arguments: a new ladder reuses the compilation)."""

    def __init__(self, network: BatchedNetwork, exact: BatchedNetwork,
                 settings: LadderSettings) -> None:
        self.settings = settings
        self.network = network
        self.exact = exact
        self._prior_idx = np.flatnonzero(np.asarray(settings.prior_k))
        self._step = jax.jit(self._iteration)

    @staticmethod
    def upload(theta: Any, energy: Any, grad: Any, step_size: Any, replica: Any
               ) -> DeviceState:
        """A device state from host arrays over slots."""
        return DeviceState(jnp.asarray(theta, dtype=jnp.float64),
                           jnp.asarray(energy, dtype=jnp.float64),
                           jnp.asarray(grad, dtype=jnp.float64),
                           jnp.asarray(step_size, dtype=jnp.float64),
                           jnp.asarray(replica, dtype=jnp.int64))

    def step(self, state: DeviceState, iteration: int, seed_words: Any,
             consts: dict[str, Any]) -> tuple[DeviceState, dict[str, Any]]:
        """One iteration from ``state``; the random numbers are keyed by the two 32-bit
        ``seed_words`` (drawn by the caller from a checkpointed stream) and ``iteration``.
        Returns the new device state and the diagnostics (NumPy arrays, fetched in one
        transfer)."""
        words = jnp.asarray(np.asarray(seed_words, dtype=np.uint32))
        state, info = self._step(state, jnp.asarray(iteration, dtype=jnp.int64), words, consts,
                                 self.network.x, self.network.y)
        return state, jax.device_get(info)

    # -- the compiled iteration --------------------------------------------------------------

    def _iteration(self, state: DeviceState, iteration: Any, base: Any, c: dict[str, Any],
                   x: Any, y: Any) -> tuple[DeviceState, dict[str, Any]]:
        s = self.settings
        key = jax.random.fold_in(jax.random.wrap_key_data(base, impl="threefry2x32"),
                                 iteration)
        k_traj, k_prior, k_swap = jax.random.split(key, 3)
        k_count = c["n_traj"].shape[0]
        n_pairs = k_count - 1
        attempted = jnp.zeros(max(n_pairs, 0), jnp.int64)
        accepted = jnp.zeros(max(n_pairs, 0), jnp.int64)
        if s.scheme == "even-odd" and n_pairs > 0:
            state, attempted, accepted = self._swaps(state, k_swap, iteration, c)
        state = self._prior_draws(state, k_prior, c, x, y)
        state, n_acc, n_div = self._transitions(state, k_traj, c, x, y)
        if s.scheme != "even-odd" and n_pairs > 0:
            state, attempted, accepted = self._swaps(state, k_swap, iteration, c)
        info = {"energy_k": state.energy, "n_accepted_k": n_acc, "n_divergent_k": n_div,
                "step_size_k": state.step_size, "swap_attempted_k": attempted,
                "swap_accepted_k": accepted, "replica_k": state.replica,
                "swap_energy_k": state.energy}
        return state, info

    def _prior_draws(self, state: DeviceState, key: Any, c: dict[str, Any], x: Any, y: Any
                     ) -> DeviceState:
        prior_idx = self._prior_idx
        if prior_idx.size == 0:
            return state
        hw = c["half_width"][prior_idx]
        theta = jax.random.uniform(key, hw.shape, jnp.float64, -1.0, 1.0) * hw
        e, g = jax.vmap(self.exact.energy_and_grad_row, in_axes=(0, None, None, 0, 0, 0))(
            theta, x, y, c["tau"][prior_idx], c["prec"][prior_idx], c["const"][prior_idx])
        return state._replace(theta=state.theta.at[prior_idx].set(theta),
                              energy=state.energy.at[prior_idx].set(e),
                              grad=state.grad.at[prior_idx].set(g))

    def _transitions(self, state: DeviceState, key: Any, c: dict[str, Any], x: Any, y: Any
                     ) -> tuple[DeviceState, Any, Any]:
        s = self.settings
        n_traj = np.asarray(s.n_trajectories_k)
        sampled = ~np.asarray(s.prior_k, dtype=bool)
        k_count = state.theta.shape[0]
        zeros = jnp.zeros(k_count, jnp.int64)
        carry = (state, zeros, zeros)
        for t in range(int(np.max(n_traj, initial=0))):
            # the slots with a t-th transition this iteration (static): with per-rung counts
            # (a slow band) the later transitions compute only those rows
            rows = np.flatnonzero((n_traj > t) & sampled)
            if rows.size:
                carry = self._transition(carry, jax.random.fold_in(key, t), rows, c, x, y)
        st, n_acc, n_div = carry
        # a prior rung's draws are always accepted, one per transition (as its CPU form)
        return st, jnp.where(c["prior"], c["n_traj"], n_acc), n_div

    def _transition(self, carry: tuple[Any, ...], key: Any, rows: np.ndarray,
                    c: dict[str, Any], x: Any, y: Any) -> tuple[Any, ...]:
        """One HMC transition of the slots ``rows`` (:meth:`thermonet.samplers.hmc.HMC.step`
        on arrays over them)."""
        s = self.settings
        st, n_acc, n_div = carry
        every = rows.size == st.theta.shape[0]
        idx = slice(None) if every else jnp.asarray(rows)

        def pick(a: Any) -> Any:
            return a if every else a[idx]

        trajectories = make_trajectories(self.network.energy_and_grad_row, s.reflect)
        energy_k = jax.vmap(self.exact.energy_row, in_axes=(0, None, None, 0, 0, 0))
        k_rows, n = rows.size, st.theta.shape[1]
        n_l = s.n_leapfrog
        lo = max(1, int(np.ceil((1.0 - s.n_leapfrog_jitter) * n_l - 1e-9)))
        k_p, k_u, k_dt, k_l = jax.random.split(key, 4)
        inv_mass, half_width = pick(c["inv_mass"]), pick(c["half_width"])
        tau, prec, const = pick(c["tau"]), pick(c["prec"]), pick(c["const"])
        theta0, grad0, energy0 = pick(st.theta), pick(st.grad), pick(st.energy)
        p = jax.random.normal(k_p, (k_rows, n), jnp.float64) * pick(c["p_scale"])
        k0 = 0.5 * jnp.sum(inv_mass * p * p, axis=1)
        log_u = jnp.log(jax.random.uniform(k_u, (k_rows,), jnp.float64))
        dt = pick(st.step_size)
        if s.step_size_jitter > 0:
            u = jax.random.uniform(k_dt, (k_rows,), jnp.float64)
            dt = dt * (1.0 + s.step_size_jitter * (2.0 * u - 1.0))
        steps = jnp.full((k_rows,), n_l, jnp.int64)
        if s.n_leapfrog_jitter > 0:
            u = jax.random.uniform(k_l, (k_rows,), jnp.float64)
            steps = lo + jnp.minimum(jnp.floor(u * (n_l - lo + 1)).astype(jnp.int64), n_l - lo)
        theta1, p1, g1, e1, _, status, _ = trajectories(
            theta0, p, grad0, inv_mass, dt, steps, half_width, pick(c["runaway"]), x, y, tau,
            prec, const)
        divergent = status != lf.OK
        if s.float32:
            e1 = jnp.where(divergent, e1, energy_k(theta1, x, y, tau, prec, const))
        in_box = jnp.all(jnp.abs(theta1) < half_width, axis=1) | s.reflect
        divergent = divergent | ~jnp.isfinite(e1)
        k1 = 0.5 * jnp.sum(inv_mass * p1 * p1, axis=1)
        d_h = (e1 + k1) - (energy0 + k0)
        log_a = jnp.where(in_box, -d_h / pick(c["temp"]), -jnp.inf)
        divergent = divergent | jnp.isnan(log_a)
        log_a = jnp.where(divergent, -jnp.inf, log_a)
        accept = log_u < log_a
        theta = jnp.where(accept[:, None], theta1, theta0)
        energy = jnp.where(accept, e1, energy0)
        grad = jnp.where(accept[:, None], g1, grad0)
        if every:
            return (st._replace(theta=theta, energy=energy, grad=grad), n_acc + accept,
                    n_div + divergent)
        return (st._replace(theta=st.theta.at[idx].set(theta),
                            energy=st.energy.at[idx].set(energy),
                            grad=st.grad.at[idx].set(grad)),
                n_acc.at[idx].add(accept.astype(jnp.int64)),
                n_div.at[idx].add(divergent.astype(jnp.int64)))

    def _swaps(self, state: DeviceState, key: Any, iteration: Any, c: dict[str, Any]
               ) -> tuple[DeviceState, Any, Any]:
        s = self.settings
        k_count = state.energy.shape[0]
        n_pairs = k_count - 1
        beta = c["beta"]
        if s.scheme == "random-pairs":
            return self._random_pairs(state, key, beta)
        k_par, k_u = jax.random.split(key)
        if s.scheme == "deo":
            parity = iteration % 2
        else:
            parity = (jax.random.uniform(k_par, (), jnp.float64) < 0.5).astype(jnp.int64)
        j = jnp.arange(n_pairs)
        tried = (j % 2) == parity
        log_a = (beta[:-1] - beta[1:]) * (state.energy[:-1] - state.energy[1:])
        log_u = jnp.log(jax.random.uniform(k_u, (n_pairs,), jnp.float64))
        ok = tried & (log_u < log_a)
        # disjoint pairs: slot j takes j+1's configuration and j+1 takes j's
        up = jnp.concatenate([ok, jnp.zeros(1, bool)])
        down = jnp.concatenate([jnp.zeros(1, bool), ok])
        idx = jnp.arange(k_count)
        perm = jnp.where(up, idx + 1, jnp.where(down, idx - 1, idx))
        state = state._replace(theta=state.theta[perm], energy=state.energy[perm],
                               grad=state.grad[perm], replica=state.replica[perm])
        return state, tried.astype(jnp.int64), ok.astype(jnp.int64)

    def _random_pairs(self, state: DeviceState, key: Any, beta: Any
                      ) -> tuple[DeviceState, Any, Any]:
        n_pairs = state.energy.shape[0] - 1
        n = self.settings.n_swaps
        k_j, k_u = jax.random.split(key)
        js = jax.random.randint(k_j, (n,), 0, n_pairs)
        log_us = jnp.log(jax.random.uniform(k_u, (n,), jnp.float64))

        def attempt(a: int, carry: tuple[Any, ...]) -> tuple[Any, ...]:
            st, att, acc = carry
            j = js[a]
            log_a = (beta[j] - beta[j + 1]) * (st.energy[j] - st.energy[j + 1])
            ok = log_us[a] < log_a
            perm = jnp.arange(st.energy.shape[0])
            perm = jnp.where(ok, perm.at[j].set(j + 1).at[j + 1].set(j), perm)
            st = st._replace(theta=st.theta[perm], energy=st.energy[perm],
                             grad=st.grad[perm], replica=st.replica[perm])
            return st, att.at[j].add(1), acc.at[j].add(ok.astype(jnp.int64))

        zeros = jnp.zeros(n_pairs, jnp.int64)
        return lax.fori_loop(0, n, attempt, (state, zeros, zeros))
