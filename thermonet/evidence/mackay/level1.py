"""Level 1 of MacKay's framework: ``w_MP``, the minimum of ``M(w)`` at fixed hyperparameters,
and the factorised Hessian ``A`` there (:mod:`thermonet.evidence.mackay.factorised`).

Small networks (up to :data:`~thermonet.evidence.mackay.factorised.EIGH_MAX` parameters, or
``factorisation = "eigh"``) are minimised by a trust-region Newton method on the exact Hessian
(``trust-exact``, which also leaves saddles along negative curvature), from the start up to
:data:`TRUST_FIRST_MAX` parameters and after L-BFGS above; larger ones, whose dense Hessian
takes tens of seconds per evaluation, by L-BFGS alone. Both end with Newton
steps on ``A`` (halved until ``M`` does not increase) and, at a saddle, a step down along an
eigenvector of negative curvature and a new start.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from thermonet.evidence.laplace.curvature import hessian, hvp, resolve_method
from thermonet.evidence.mackay.factorised import EIGH_MAX, Factorised, factorise
from thermonet.types import FloatArray

#: up to this many parameters the trust-region method runs from the start; above it (and up
#: to ``EIGH_MAX``) L-BFGS comes first and the trust region only polishes: on a 256-2-10
#: classifier (536 parameters) trust-exact from a random start needed 900 Hessians per
#: minimisation, 77 s, where L-BFGS takes a fraction of a second
TRUST_FIRST_MAX = 256

#: trust-region iterations of the polish after L-BFGS
POLISH_ITER = 100


def minimise(potential: Any, theta: FloatArray, max_iter: int, method: str = "fd",
             trust: bool = True) -> FloatArray:
    """Minimise ``M``: with an exact Hessian and ``trust`` a trust-region Newton method (after
    L-BFGS above :data:`TRUST_FIRST_MAX` parameters), otherwise L-BFGS."""
    import scipy.optimize

    polish = trust and method != "fd" and int(np.size(theta)) > TRUST_FIRST_MAX
    if polish:
        theta = minimise(potential, theta, max_iter, method, trust=False)
        max_iter = min(int(max_iter), POLISH_ITER)

    def fun(w: FloatArray) -> tuple[float, FloatArray]:
        e, g = potential.energy_and_grad(np.ascontiguousarray(w))
        if not math.isfinite(e):
            return math.inf, np.zeros_like(w)
        return float(e), np.array(g)

    if method != "fd" and trust:
        def hess(w: FloatArray) -> FloatArray:
            h = hessian(potential, np.ascontiguousarray(w), method=method)
            return h if np.all(np.isfinite(h)) else np.eye(w.shape[0])

        res = scipy.optimize.minimize(fun, theta, jac=True, hess=hess, method="trust-exact",
                                      options={"maxiter": max_iter, "gtol": 1e-9})
        if np.all(np.isfinite(res.x)):
            return np.asarray(res.x, dtype=np.float64)
    res = scipy.optimize.minimize(fun, theta, jac=True, method="L-BFGS-B",
                                  options={"maxiter": max_iter, "maxcor": 30, "gtol": 1e-7,
                                           "ftol": 1e-14})
    return np.asarray(res.x, dtype=np.float64)


def factor_at(potential: Any, theta: FloatArray, method: str = "auto",
              factorisation: str = "auto") -> Factorised:
    """The Hessian of ``potential`` at ``theta``, factorised (``"slq"``: estimated from
    Hessian-vector products with the same 32 probes every time, never formed)."""
    if factorisation == "slq":
        from thermonet.evidence.mackay.stochastic import stochastic_factorise

        def matvec(v: FloatArray) -> FloatArray:
            return hvp(potential, theta, v, method=method)

        return stochastic_factorise(matvec, int(potential.n_params), seed=0)
    return factorise(hessian(potential, theta, method=method), factorisation)


def newton(potential: Any, theta: FloatArray, n_steps: int, method: str = "auto",
           factorisation: str = "auto") -> tuple[FloatArray, Factorised]:
    """Newton steps on ``M`` (halved until ``M`` does not increase) and the factorised Hessian
    at the last point (the potential's exact one under ``method = "auto"`` when it has one,
    finite differences of the gradient under ``"fd"``)."""
    fac = factor_at(potential, theta, method, factorisation)
    for _ in range(n_steps):
        if not fac.positive_definite:
            break
        e0, g = potential.energy_and_grad(theta)
        step = -fac.solve(np.array(g))
        t = 1.0
        while t > 1e-6:
            trial = theta + t * step
            if potential.energy(trial) <= e0:
                break
            t *= 0.5
        else:
            break
        theta = trial
        fac = factor_at(potential, theta, method, factorisation)
    return theta, fac


def level1(potential: Any, theta: FloatArray, lbfgs_iter: int, newton_steps: int,
           method: str = "auto", escapes: int = 4, factorisation: str = "auto"
           ) -> tuple[FloatArray, Factorised]:
    """``w_MP`` and the factorised ``A`` there: minimisation, Newton polish; at a saddle (a
    negative eigenvalue of ``A``) a step down along its eigenvector and again."""
    exact = resolve_method(potential, method)
    small = factorisation == "eigh" or (factorisation == "auto"
                                        and int(potential.n_params) <= EIGH_MAX)
    for attempt in range(escapes + 1):
        theta = minimise(potential, theta, lbfgs_iter, exact, trust=small)
        theta, fac = newton(potential, theta, newton_steps, method, factorisation)
        if fac.positive_definite or fac.eigenvalues is None or attempt == escapes:
            return theta, fac
        lam, u = fac.eigenvalues, fac.eigenvectors
        assert u is not None
        if not np.all(np.isfinite(lam)):
            return theta, fac
        e0 = potential.energy(theta)
        best, best_e = theta, e0
        scale = max(1.0, float(np.max(np.abs(theta))))
        for j in np.flatnonzero(lam <= 0)[:8]:
            for t in (1.0, 0.3, 0.1, 0.03, 0.01, 0.003, 0.001):
                for sign in (1.0, -1.0):
                    trial = theta + sign * t * scale * u[:, j]
                    e = potential.energy(trial)
                    if math.isfinite(e) and e < best_e:
                        best, best_e = trial, e
        if best is theta:
            return theta, fac
        theta = best
    return theta, fac


__all__ = ["POLISH_ITER", "TRUST_FIRST_MAX", "factor_at", "level1", "minimise", "newton"]
