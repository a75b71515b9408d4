"""Matrix-free estimates of what MacKay's framework needs of the Hessian ``A``: stochastic
Lanczos quadrature (SLQ) for ``ln det A`` and Hutchinson's estimator for the traces of
``A^-1`` over the weight groups, from Hessian-vector products only.

For a network whose dense Hessian does not fit in memory (or takes too long: the R-operator
builds M(3)'s 13,970 columns in 18 s, a product with a few vectors takes milliseconds), with
``m`` Rademacher probes ``z_j`` (seeded):

* conjugate gradients solve ``A x_j = z_j`` for all probes at once (one batched product per
  iteration) until every residual is below ``tol |z_j|``;
* the CG coefficients are those of the Lanczos process started at ``z_j / |z_j|``: its
  tridiagonal ``T_j`` (eigenvalues ``theta_i``, first components ``tau_i``) gives Gauss
  quadrature of ``z_j^T ln(A) z_j ~ |z_j|^2 sum_i tau_i^2 ln theta_i`` (Ubaru, Chen & Saad,
  SIAM J. Matrix Anal. Appl. 38, 1075 (2017)), and ``ln det A = tr ln A`` is their mean
  (:mod:`thermonet.evidence.laplace.slq`, the Laplace evidence's estimator too);
* ``E[z z^T] = I``, so ``z_j * x_j`` (element by element) estimates ``diag(A^-1)`` without
  bias, and its sum over a group the group's ``Tr_c(A^-1)`` (Hutchinson 1989).

Both come with their standard errors over the probes. A non-positive curvature ``p^T A p``
met by CG, or a non-positive Ritz value, means ``A`` is not positive definite.
:func:`stochastic_factorise` returns a
:class:`~thermonet.evidence.mackay.factorised.Factorised` whose ``log_det`` and ``diag_inverse``
are these estimates, so the framework runs unchanged on it (``factorisation = "slq"``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from thermonet.errors import ConfigError
from thermonet.evidence.laplace.slq import cg_nodes, trace_estimate
from thermonet.evidence.mackay.factorised import Factorised
from thermonet.types import FloatArray

__all__ = ["Stochastic", "stochastic_factorise"]


@dataclass
class Stochastic(Factorised):
    """SLQ and Hutchinson estimates in the :class:`Factorised` interface."""

    log_det_estimate: float = math.nan
    log_det_error: float = math.nan
    diag_inv_estimate: FloatArray | None = None
    probes: FloatArray | None = None          # (m, d): z_j * x_j, for group errors
    ritz_min: float = math.nan
    n_products: int = 0
    matvec: Callable[[FloatArray], FloatArray] | None = field(default=None, repr=False)
    tol: float = 1e-6
    max_iter: int = 1000

    @property
    def log_det(self) -> float:
        return self.log_det_estimate if self.positive_definite else math.nan

    @property
    def lambda_min(self) -> float:
        return self.ritz_min

    def diag_inverse(self, floored: bool = False) -> FloatArray:
        assert self.diag_inv_estimate is not None
        if not self.positive_definite and not floored:
            return np.full(self.diag_inv_estimate.shape[0], math.nan)
        return self.diag_inv_estimate.copy()

    def group_trace_error(self, index: Any) -> float:
        """Standard error of the estimate of ``Tr_c(A^-1)`` over the parameters ``index``."""
        assert self.probes is not None
        sums = self.probes[:, np.asarray(index)].sum(axis=1)
        return float(np.std(sums, ddof=1) / math.sqrt(sums.shape[0]))

    def solve(self, b: FloatArray) -> FloatArray:
        assert self.matvec is not None
        b = np.asarray(b, dtype=np.float64)
        x, _, _, _ = _cg(self.matvec, np.atleast_2d(b), self.tol, self.max_iter)
        return x[0] if b.ndim == 1 else x

    def whiten(self, g: FloatArray) -> FloatArray:
        raise ConfigError("error bars need a factorised Hessian (factorisation 'eigh' or "
                          "'cholesky'); the stochastic estimate gives ln det A and the group "
                          "traces of A^-1 only")

    def from_white(self, z: FloatArray) -> FloatArray:
        return self.whiten(z)

    def diagonal(self) -> FloatArray:
        return self.whiten(np.zeros(0))

    def covariance(self) -> FloatArray:
        return self.whiten(np.zeros(0))


def _cg(matvec: Callable[[FloatArray], FloatArray], b: FloatArray, tol: float, max_iter: int
        ) -> tuple[FloatArray, list[FloatArray], list[FloatArray], bool]:
    """Batched CG on ``A x = b`` (rows of ``b``): the solutions, the per-iteration ``alpha``
    and ``beta`` of every row (NaN once a row has converged), and whether every curvature
    ``p^T A p`` was positive."""
    x = np.zeros_like(b)
    r = b.copy()
    p = r.copy()
    rs = np.sum(r * r, axis=1)
    stop = tol * tol * rs
    active = rs > stop
    alphas: list[FloatArray] = []
    betas: list[FloatArray] = []
    positive = True
    for _ in range(int(max_iter)):
        if not active.any():
            break
        ap = np.asarray(matvec(p[active]))
        curv = np.sum(p[active] * ap, axis=1)
        if np.any(curv <= 0) or not np.all(np.isfinite(curv)):
            positive = False
            break
        alpha = np.full(b.shape[0], np.nan)
        alpha[active] = rs[active] / curv
        x[active] += alpha[active, None] * p[active]
        r[active] -= alpha[active, None] * ap
        rs_new = np.sum(r * r, axis=1)
        beta = np.full(b.shape[0], np.nan)
        beta[active] = rs_new[active] / rs[active]
        p[active] = r[active] + beta[active, None] * p[active]
        rs = np.where(active, rs_new, rs)
        alphas.append(alpha)
        betas.append(beta)
        active = active & (rs > stop)
    return x, alphas, betas, positive


def stochastic_factorise(matvec: Callable[[FloatArray], FloatArray], d: int, *,
                         n_probes: int = 32, seed: Any = 0, tol: float = 1e-6,
                         max_iter: int = 1000) -> Stochastic:
    """SLQ and Hutchinson estimates for the operator ``matvec`` (rows of a ``(k, d)`` array
    to ``A`` times them) with ``n_probes`` Rademacher probes from ``seed`` (the same probes
    for the same seed: the re-estimation cycles then share their noise)."""
    if int(n_probes) < 2 or not (0 < tol < 1) or int(max_iter) < 1:
        raise ConfigError(f"n_probes = {n_probes}, tol = {tol}, max_iter = {max_iter}; "
                          "expected n_probes >= 2, 0 < tol < 1, max_iter >= 1")
    rng = np.random.default_rng(seed)
    z = rng.choice(np.array([-1.0, 1.0]), size=(int(n_probes), int(d)))
    count = [0]

    def counted(v: FloatArray) -> FloatArray:
        count[0] += v.shape[0]
        return matvec(v)

    x, alphas, betas, positive = _cg(counted, z, tol, max_iter)
    log_det = log_det_error = math.nan
    ritz_min = math.inf
    if positive and alphas:
        nodes = []
        for j in range(z.shape[0]):
            theta, w = cg_nodes(alphas, betas, j)
            ritz_min = min(ritz_min, float(theta[0]))
            if theta[0] <= 0:
                positive = False
                break
            nodes.append((theta, w))
        if positive:
            log_det, log_det_error, _ = trace_estimate(nodes, int(d), np.log)
    prods = z * x
    return Stochastic(
        "slq", bool(positive), log_det_estimate=log_det, log_det_error=log_det_error,
        diag_inv_estimate=prods.mean(axis=0), probes=prods, ritz_min=ritz_min,
        n_products=count[0], matvec=matvec, tol=tol, max_iter=max_iter)
