"""MacKay's evidence framework for classification networks (MacKay 1992b): a Gaussian prior
per weight group on a cross-entropy potential, re-estimated weight decays (no noise level),
the Gaussian-approximation evidence, and moderated outputs.

The objective is ``M(w) = G(w) + sum_i prec_i w_i^2 / 2`` with ``G = -ln p(D|w)`` the summed
cross-entropy of the network (the ``mlp`` architecture's potential: softmax outputs; or any
potential whose energy is ``-ln p(D|w)`` and which has ``logits(theta, x)``), ``prec_i =
alpha_c`` on group c. :class:`GaussianPriorClassifier` presents it with the interface of
:mod:`thermonet.evidence.mackay.framework`, so
:func:`~thermonet.evidence.mackay.framework.reestimate` runs the same level-2a cycle
(``alpha_c <- gamma_c / (2 E_W,c)``, no ``beta``) and reports the same terms, with the best-fit
likelihood ``-G(w_MP)``.

Moderated outputs (MacKay 1992b, Sec. 3): under the Gaussian posterior ``N(w_MP, A^-1)`` and
the linearisation ``a(w) = a_MP + g^T (w - w_MP)`` the activation ``a`` of a logistic output
is Gaussian with variance ``s^2 = g^T A^-1 g``, and

    P(t = 1 | x, D) = int sigmoid(a) N(a; a_MP, s^2) da  ~=  sigmoid(kappa(s^2) a_MP),
    kappa(s^2) = (1 + pi s^2 / 8)^(-1/2).

For two softmax classes ``a`` is the difference of the two logits. For more classes
:func:`moderated_outputs` applies the same factor to each logit, ``p_k ∝ exp(kappa(s_kk^2)
a_k)`` (an extension of MacKay's binary formula, not exact for any K); ``method="mc"``
averages the softmax over draws of the logits' Gaussian instead (seeded), which is the exact
average of the linearised model up to Monte-Carlo error.

References
----------
D. J. C. MacKay, "The evidence framework applied to classification networks", Neural
Computation 4, 720 (1992); "A practical Bayesian framework for backpropagation networks",
Neural Computation 4, 448 (1992).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from thermonet.api import Potential, as_theta
from thermonet.api.hyper import GammaPrior, HyperGroup, HyperModel
from thermonet.errors import ConfigError
from thermonet.evidence.laplace.curvature import hessian as dense_hessian
from thermonet.evidence.mackay.framework import (
    MacKayResult,
    jacobian,
    log_symmetry_factor,
    reestimate,
)
from thermonet.kernels import mlp_regression_hessian as krh
from thermonet.types import FloatArray

__all__ = ["CURVATURES", "GaussianPriorClassifier", "mackay_classifier", "moderated_outputs"]

#: the curvatures ``A`` can be built from
CURVATURES = ("exact", "gauss-newton")

#: not used by the framework (it reads only the groups); required by HyperGroup
_UNUSED_PRIOR = GammaPrior(1.0, 1.0)


class GaussianPriorClassifier(Potential):
    """``M(w) = G(w) + sum_i prec_i w_i^2 / 2`` on a cross-entropy potential ``base``.

    Parameters
    ----------
    base : Potential
        ``energy``/``energy_and_grad`` = ``-ln p(D|w)``; ``logits(theta, x)``; its exact
        Hessian is used when it has one (the ``mlp`` potential's R-operator for logistic
        hidden units), else the compiled closed form for one hidden layer (``widths`` of
        three entries and ``x``, ``y`` labels), else finite differences.
    groups : dict of str -> slice or index array
        The weight groups, one ``alpha_c`` each (e.g. ``arch.param_groups()``).
    scales : dict of str -> float, optional
        ``s_c`` of ``prec = alpha_c s_c`` (default 1).
    curvature : {"exact", "gauss-newton"}
        "gauss-newton": ``A = sum_n J_n^T (diag(p_n) - p_n p_n^T) J_n + diag(prec)``, ``J_n``
        the Jacobian of case n's logits (central differences) and ``p_n`` its softmax: the
        exact Hessian without the term in the residuals ``p_n - t_n`` times the logits'
        second derivatives, always positive definite. For large networks whose exact
        Hessian is indefinite at the end of L-BFGS (M(1) on D500, docs/evidence.md).
    """

    def __init__(self, base: Any, groups: dict[str, Any], scales: dict[str, float] | None = None,
                 curvature: str = "exact") -> None:
        if curvature not in CURVATURES:
            raise ConfigError(f"curvature = {curvature!r}; expected one of {CURVATURES}")
        self.curvature = curvature
        self.base = base
        self.n_params = int(base.n_params)
        self.n_residuals = int(getattr(base, "n_data", 0))
        scales = scales or {}
        self._groups: list[tuple[str, np.ndarray, float]] = []
        seen = np.zeros(self.n_params, dtype=bool)
        for name, sel in groups.items():
            idx = np.arange(self.n_params)[sel] if isinstance(sel, slice) else np.asarray(
                sel, dtype=np.int64)
            if idx.size == 0 or seen[idx].any():
                raise ConfigError(f"weight group {name!r} is empty or overlaps another; "
                                  "expected disjoint non-empty groups")
            seen[idx] = True
            self._groups.append((name, idx, float(scales.get(name, 1.0))))
        if not seen.all():
            raise ConfigError(f"{int((~seen).sum())} parameters are in no weight group; every "
                              "parameter needs a Gaussian prior")
        self.prec = np.ones(self.n_params)
        self.tau = 1.0
        own = getattr(base, "hessian_method", None)
        arch = getattr(base, "arch", None)
        widths = getattr(arch, "widths", None)
        if own in ("rop", "analytic"):
            self._hess = "base"
        elif widths is not None and len(widths) == 3 and hasattr(base, "y"):
            self._hess = "closed"
        else:
            self._hess = "fd"
        self.hessian_method = ("fd" if self._hess == "fd" and curvature == "exact"
                               else "analytic")

    def hyper_model(self) -> HyperModel:
        return HyperModel(tuple(HyperGroup(n, i, _UNUSED_PRIOR, s) for n, i, s in self._groups),
                          None, self.n_residuals)

    def set_hyperparameters(self, hyper: Any, scale: float) -> None:
        h = np.asarray(hyper, dtype=np.float64).ravel()
        if h.shape != (len(self._groups),) or not np.all(np.isfinite(h)) or np.any(h <= 0):
            raise ConfigError(f"hyperparameters {hyper!r}; expected {len(self._groups)} "
                              "positive finite precisions")
        for c, (_, idx, s) in enumerate(self._groups):
            self.prec[idx] = scale * s * h[c]

    def likelihood_energy(self, theta: FloatArray) -> float:
        """``G(w) = -ln p(D|w)``."""
        return float(self.base.energy(theta))

    def energy(self, theta: FloatArray) -> float:
        th = np.asarray(theta, dtype=np.float64)
        return float(self.base.energy(th)) + 0.5 * float(np.sum(self.prec * th * th))

    def energy_and_grad(self, theta: FloatArray, grad_out: FloatArray | None = None
                        ) -> tuple[float, FloatArray]:
        th = np.asarray(theta, dtype=np.float64)
        e, g = self.base.energy_and_grad(th)
        out = np.array(g, dtype=np.float64) + self.prec * th
        if grad_out is not None:
            grad_out[:] = out
            out = grad_out
        return float(e) + 0.5 * float(np.sum(self.prec * th * th)), out

    def hessian(self, theta: FloatArray, *, index: Any = None, column_block: int = 128,
                threads: int | None = None) -> FloatArray:
        """``nabla nabla G + diag(prec)``: the base's exact Hessian, or the compiled closed form
        of one hidden layer with the softmax cross-entropy, or finite differences."""
        th = as_theta(theta, self.n_params, what="theta")
        if self.curvature == "gauss-newton":
            h = self.gauss_newton(th)
        elif self._hess == "fd":
            return super().hessian(th, index=index)
        elif self._hess == "base":
            h = dense_hessian(self.base, th, column_block=column_block, threads=threads,
                              symmetrise=False)
            h[np.diag_indices_from(h)] += self.prec
        else:
            w = self.base.arch.widths
            act = int(self.base.arch.out_act)
            if act & 1:
                raise ConfigError("the closed-form Hessian covers softmax outputs only; this "
                                  "network has logistic outputs")
            n_out = int(w[2])
            onehot = np.zeros((self.base.x.shape[0], n_out))
            onehot[np.arange(onehot.shape[0]), np.asarray(self.base.y)] = 1.0
            h = np.empty((self.n_params, self.n_params))
            krh.hessian(th, (int(w[0]), int(w[1]), n_out, bool(act & 2), True),
                        np.ascontiguousarray(self.base.x, dtype=np.float64), onehot, 1.0,
                        self.prec, h)
        if index is None:
            return h
        idx = np.asarray(index, dtype=np.int64)
        return np.ascontiguousarray(h[np.ix_(idx, idx)])

    def hvp(self, theta: FloatArray, v_kp: FloatArray, *, threads: int | None = None
            ) -> FloatArray:
        """``A v`` for the rows of ``v_kp``: the base's exact product (the ``mlp``
        R-operator) plus ``prec * v``; differences of the gradient for other bases."""
        if self.curvature != "exact":
            raise ConfigError("Hessian-vector products (factorisation 'slq') need curvature = "
                              "'exact'; the Gauss-Newton form is built as a dense matrix here")
        v = np.ascontiguousarray(np.atleast_2d(v_kp), dtype=np.float64)
        if getattr(self.base, "hessian_method", None) == "rop":
            out = np.asarray(self.base.hvp(theta, v, threads=threads)) + self.prec * v
        else:
            out = Potential.hvp(self, theta, v)
        return out if np.ndim(v_kp) == 2 else out[0]

    def gauss_newton(self, theta: FloatArray) -> FloatArray:
        """``sum_n J_n^T (diag(p_n) - p_n p_n^T) J_n + diag(prec)`` (softmax outputs)."""
        if int(getattr(getattr(self.base, "arch", None), "out_act", 0)) & 1:
            raise ConfigError("the Gauss-Newton curvature covers softmax outputs only; this "
                              "network has logistic outputs: use curvature = 'exact'")
        jac = jacobian(self, theta, None)                               # (n, K, d)
        z = self.outputs(theta, None)
        z = z - z.max(axis=1, keepdims=True)
        prob = np.exp(z)
        prob /= prob.sum(axis=1, keepdims=True)
        root = np.sqrt(prob)[:, :, None]
        # diag(p) - p p^T = M M^T with M = diag(sqrt p)(I - sqrt p sqrt p^T): rows M^T J_n
        b = root * (jac - np.einsum("nk,nkd->nd", prob, jac)[:, None, :])
        flat = b.reshape(-1, self.n_params)
        h = flat.T @ flat
        h[np.diag_indices_from(h)] += self.prec
        return np.asarray(h)

    def outputs(self, theta: FloatArray, x: Any = None) -> FloatArray:
        """The logits (softmax inputs, or a logistic output's activation), ``(n, K)``."""
        return np.asarray(self.base.logits(theta, x), dtype=np.float64)


def mackay_classifier(arch: Any, data: Any, *, seed: int = 0, init_std: float = 0.3,
                      alpha0: float = 1.0, groups: dict[str, Any] | None = None,
                      curvature: str = "exact", **options: Any) -> MacKayResult:
    """MacKay's classification framework for an ``mlp`` architecture on ``data`` (``.x``,
    integer ``.y``): one ``alpha_c`` per group of ``groups`` (default: each layer's weights
    and each layer's biases, ``arch.param_groups()``), random starting weights ``N(0,
    init_std^2)`` from ``seed``, then :func:`~thermonet.evidence.mackay.framework.reestimate` with
    the architecture's symmetry factor (the hidden units' permutations and, for tanh, sign
    flips). ``curvature``: see :class:`GaussianPriorClassifier`. ``options`` go to
    ``reestimate``."""
    if not (alpha0 > 0 and math.isfinite(alpha0)):
        raise ConfigError(f"alpha0 = {alpha0!r}; expected a positive starting weight decay")
    base = arch.potential(data)
    pot = GaussianPriorClassifier(base, arch.param_groups() if groups is None else groups,
                                  curvature=curvature)
    rng = np.random.default_rng(seed)
    theta0 = rng.normal(0.0, float(init_std), pot.n_params)
    hidden = [int(h) for h in arch.widths[1:-1]]
    act = getattr(arch, "hidden_activation", "logistic")
    sym = log_symmetry_factor(hidden, act)
    return reestimate(pot, theta0, [alpha0] * len(pot.hyper_model().groups),
                      log_symmetry=sym, **options)


def _kappa(s2: FloatArray) -> FloatArray:
    return np.asarray(1.0 / np.sqrt(1.0 + math.pi * s2 / 8.0))


def moderated_outputs(result: MacKayResult, potential: Any, x: Any, *,
                      method: str = "probit", n_samples: int = 4000,
                      seed: int = 0) -> tuple[FloatArray, FloatArray]:
    """Moderated class probabilities at inputs ``x`` and the logits' variances.

    Returns ``(p, s2)``: ``p`` of shape ``(n, K)`` (for a single logistic output, ``K = 1``
    and ``p`` is ``P(t = 1)``), ``s2`` the variance ``g^T A^-1 g`` of each logit (of the
    logit difference for two softmax classes) under the linearised Gaussian posterior.
    ``method``: "probit" (MacKay's ``sigmoid(kappa a)``, see the module docstring) or "mc"
    (the average over ``n_samples`` draws of the logits' joint Gaussian, seeded by ``seed``).
    """
    if method not in ("probit", "mc"):
        raise ConfigError(f"method = {method!r}; expected 'probit' or 'mc'")
    if not result.positive_definite:
        raise ConfigError("the Hessian at w_MP is not positive definite; the moderated "
                          "outputs need the Gaussian posterior")
    a = np.asarray(potential.outputs(result.theta, x), dtype=np.float64)
    g = jacobian(potential, result.theta, x)                        # (n, K, d)
    proj = result.hessian_factor().whiten(g)                         # (n, K, d)
    cov = np.einsum("nke,nle->nkl", proj, proj)                     # (n, K, K)
    n, k = a.shape
    if method == "mc":
        rng = np.random.default_rng(seed)
        chol = np.linalg.cholesky(cov + 1e-300 * np.eye(k))
        z = rng.standard_normal((int(n_samples), n, k))
        draws = a[None] + np.einsum("nkl,snl->snk", chol, z)
        if k == 1:
            p = np.mean(1.0 / (1.0 + np.exp(-draws)), axis=0)
        else:
            draws -= draws.max(axis=2, keepdims=True)
            e = np.exp(draws)
            p = np.mean(e / e.sum(axis=2, keepdims=True), axis=0)
        s2 = np.einsum("nkk->nk", cov) if k != 2 else (
            cov[:, 0, 0] + cov[:, 1, 1] - 2 * cov[:, 0, 1])[:, None]
        return p, s2
    if k == 1:
        s2 = cov[:, :, 0]
        return 1.0 / (1.0 + np.exp(-_kappa(s2) * a)), s2
    if k == 2:
        s2 = (cov[:, 0, 0] + cov[:, 1, 1] - 2.0 * cov[:, 0, 1])[:, None]
        p1 = 1.0 / (1.0 + np.exp(-_kappa(s2) * (a[:, 1:] - a[:, :1])))
        return np.hstack([1.0 - p1, p1]), s2
    s2 = np.einsum("nkk->nk", cov)
    z = _kappa(s2) * a
    z -= z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True), s2

