"""Stochastic Lanczos quadrature (Ubaru, Chen & Saad, SIAM J. Matrix Anal. Appl. 38, 1075
(2017)): ``tr f(A)`` of a symmetric ``A`` from products with it, ``ln det A = tr ln A``
among them. Each Rademacher probe ``z`` (seeded) gives a Lanczos tridiagonal whose Ritz values
and squared first components are Gauss quadrature nodes of ``z^T f(A) z / |z|^2``; the mean
over the probes estimates the trace and their spread its standard error.

The tridiagonal comes from the Lanczos process itself (:func:`lanczos_nodes`, with full
reorthogonalisation: the Laplace evidence) or from the coefficients of conjugate gradients
solving ``A x = z`` (:func:`cg_nodes`: MacKay's framework, which needs the solves too). Both
reach the one estimate, :func:`trace_estimate`.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from thermonet.errors import ConfigError
from thermonet.types import FloatArray

__all__ = ["cg_nodes", "lanczos_nodes", "mean_and_error", "probe_estimates", "slq_trace",
           "trace_estimate"]


def lanczos_nodes(matvec: Callable[[FloatArray], FloatArray], d: int, n_probes: int,
                        n_steps: int, seed: int) -> list[tuple[FloatArray, FloatArray]]:
    """Gauss quadrature nodes (Ritz values) and weights ``tau^2`` of each probe's spectral
    measure ``z^T δ(λ - A) z / |z|^2``, Rademacher ``z`` drawn from ``seed``."""
    import scipy.linalg

    n_probes = int(n_probes)
    n_steps = min(int(n_steps), int(d))
    if n_probes < 1 or n_steps < 1:
        raise ConfigError(f"n_probes = {n_probes}, n_steps = {n_steps}; expected >= 1 each")
    rng = np.random.default_rng(seed)
    z = rng.choice(np.array([-1.0, 1.0]), size=(n_probes, d))
    q = np.zeros((n_steps, n_probes, d))
    alpha = np.zeros((n_probes, n_steps))
    beta = np.zeros((n_probes, n_steps))
    m_eff = np.full(n_probes, n_steps)
    q[0] = z / math.sqrt(d)
    active = np.ones(n_probes, dtype=bool)
    for j in range(n_steps):
        w = matvec(q[j])
        a = np.einsum("kd,kd->k", w, q[j])
        alpha[:, j] = np.where(active, a, 0.0)
        if j == n_steps - 1:
            break
        w -= a[:, None] * q[j]
        if j > 0:
            w -= beta[:, j - 1][:, None] * q[j - 1]
        # full reorthogonalisation against every earlier Lanczos vector (twice is enough)
        for _ in range(2):
            c = np.einsum("jkd,kd->jk", q[:j + 1], w)
            w -= np.einsum("jk,jkd->kd", c, q[:j + 1])
        b = np.linalg.norm(w, axis=1)
        anorm = np.maximum(np.abs(alpha[:, :j + 1]).max(axis=1), 1e-300)
        stop = active & (b <= 1e-12 * anorm)    # invariant subspace: the quadrature is exact
        m_eff[stop] = j + 1
        active &= ~stop
        b = np.where(active, b, 0.0)
        beta[:, j] = b
        safe = np.where(b > 0, b, 1.0)
        q[j + 1] = np.where(active[:, None], w / safe[:, None], 0.0)
    nodes = []
    for p in range(n_probes):
        m = int(m_eff[p])
        if m == 1:
            nodes.append((alpha[p, :1].copy(), np.ones(1)))
        else:
            theta, y = scipy.linalg.eigh_tridiagonal(alpha[p, :m], beta[p, :m - 1])
            nodes.append((theta, y[0] ** 2))
    return nodes


def probe_estimates(nodes: list[tuple[FloatArray, FloatArray]], d: int,
                     func: Callable[[FloatArray], FloatArray]) -> FloatArray:
    """Each probe's ``d * sum_k tau_k^2 func(theta_k)`` (``|z|^2 = d`` for Rademacher ``z``)."""
    return np.array([d * float(np.sum(tau2 * func(theta))) for theta, tau2 in nodes])


def mean_and_error(est: FloatArray) -> tuple[float, float]:
    """The mean of the probes' estimates and its standard error (NaN for one probe)."""
    n = est.shape[0]
    return float(np.mean(est)), (float(np.std(est, ddof=1) / math.sqrt(n)) if n > 1
                                 else float("nan"))


def cg_nodes(alphas: list[FloatArray], betas: list[FloatArray], j: int
             ) -> tuple[FloatArray, FloatArray]:
    """Ritz values and squared first components of row ``j``'s Lanczos tridiagonal, from the
    coefficients of conjugate gradients run on it (Saad 2003, Sec. 6.7.3): the same
    quadrature nodes as :func:`lanczos_nodes`, free alongside the solves."""
    a = np.array([al[j] for al in alphas])
    b = np.array([be[j] for be in betas])
    k = int(np.sum(np.isfinite(a)))
    a, b = a[:k], b[:k]
    diag = 1.0 / a
    diag[1:] += b[:-1] / a[:-1]
    off = np.sqrt(b[:-1]) / a[:-1]
    t = np.diag(diag) + np.diag(off, 1) + np.diag(off, -1)
    theta, u = np.linalg.eigh(t)
    return theta, u[0] ** 2


def trace_estimate(nodes: list[tuple[FloatArray, FloatArray]], d: int,
                   func: Callable[[FloatArray], FloatArray]) -> tuple[float, float, FloatArray]:
    """``tr func(A)`` from each probe's quadrature nodes: the mean over the probes, its
    standard error and the per-probe estimates (``func = np.log``: ``ln det A``)."""
    est = probe_estimates(nodes, d, func)
    mean, err = mean_and_error(est)
    return mean, err, est


def slq_trace(matvec: Callable[[FloatArray], FloatArray], d: int,
              func: Callable[[FloatArray], FloatArray], *, n_probes: int = 30,
              n_steps: int = 80, seed: int = 0) -> tuple[float, float, FloatArray]:
    """Stochastic Lanczos quadrature estimate of ``tr func(A)`` for a symmetric ``A``.

    Parameters
    ----------
    matvec : callable
        ``V (K, d) -> (K, d)`` whose row k is ``A @ V[k]``.
    d : int
        Dimension.
    func : callable
        Vectorised scalar function applied to the Ritz values.
    n_probes : int
        Rademacher probe vectors (all run in lockstep, one ``matvec`` call per step).
    n_steps : int
        Lanczos steps per probe (capped at d); full reorthogonalisation.
    seed : int
        Seed of the probes.

    Returns
    -------
    mean : float
        The estimate of ``tr func(A)``.
    stderr : float
        Standard error over the probes (NaN with one probe); the bias of the ``n_steps``-point
        quadrature is not included.
    per_probe : ndarray, shape (n_probes,)
        The probes' estimates ``d * sum_k tau_k^2 func(theta_k)``.

    Examples
    --------
    >>> a = np.diag(np.arange(1.0, 101.0))          # Rademacher probes: exact on a diagonal
    >>> mean, err, _ = slq_trace(lambda v: v @ a, 100, np.log, n_probes=20, seed=1)
    >>> bool(np.isclose(mean, np.sum(np.log(np.arange(1.0, 101.0)))))
    True
    """
    return trace_estimate(lanczos_nodes(matvec, d, n_probes, n_steps, seed), d, func)


