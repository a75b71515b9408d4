"""MacKay's evidence framework: re-estimated weight decays and noise level, the effective
number of parameters, and the Gaussian-approximation evidence (MacKay 1992).

The model is a potential of the form a :class:`~thermonet.architectures.regression`
network's has (any potential with the same few methods works, e.g. a linear model):

    M(w) = beta E_D(w) + (N K / 2) ln(2 pi / beta) + sum_i prec_i w_i^2 / 2,
    E_D(w) = sum_n |f(x_n, w) - y_n|^2 / 2,

with ``prec_i = alpha_c s_c`` for the parameters of group c (``s_c`` a fixed scale of the
group, e.g. the fan-in of the output layer) and fixed precisions elsewhere (the output
biases). Its ``energy_and_grad`` is ``M`` and its gradient, ``half_sse`` is ``E_D``,
``hyper_model()`` lists the groups and whether the noise is unknown, and
``set_hyperparameters(hyper, 1.0)`` sets ``(alpha_1, ..., alpha_C[, beta])``; ``prec`` and
``tau`` (= beta) are read back. So ``M = -ln p(D|w, beta) - sum_i prec_i w_i^2/2`` and
``exp(-M)`` is the unnormalised posterior.

Level 1: ``w_MP`` minimises ``M`` (a trust-region Newton method when the potential has an
exact Hessian, L-BFGS otherwise; then Newton steps on the Hessian ``A``). The regression
network has an exact, compiled one at any depth: a closed form for one hidden layer
(:mod:`thermonet.kernels.mlp_regression_hessian`), Pearlmutter's R-operator for two or more
(:mod:`thermonet.kernels.mlp_hessian`); ``hessian_method="fd"`` asks for central
differences of the gradient instead.

A classifier (:mod:`thermonet.evidence.mackay.classify`) has no ``half_sse`` and no noise
level: its ``likelihood_energy`` is the cross-entropy ``-ln p(D|w)``, which then plays the part
of ``E_D`` in the best-fit likelihood.

Level 2a (MacKay eqs. 8-9, with one regulariser per group): with ``A = nabla nabla M =
beta nabla nabla E_D + diag(prec)``,

    gamma_c = sum_{i in c} (1 - prec_i (A^-1)_ii) = k_c - alpha_c s_c Tr_c(A^-1),
    gamma   = sum_i (1 - prec_i (A^-1)_ii)              (every parameter, fixed ones too),
    alpha_c <- gamma_c / (2 E_W,c),   E_W,c = s_c sum_{i in c} w_i^2 / 2,
    beta    <- (N K - gamma) / (2 E_D),

the stationarity conditions of eq. (7) in ``alpha_c`` and ``beta`` when the Hessian of
``E_D`` is held fixed. ``w`` is re-optimised after every update, until the log
hyperparameters change by less than ``tol``.

Level 2 (model comparison), each term reported separately:

``log_likelihood``
    the best-fit likelihood ``ln p(D|w_MP, beta) = -beta E_D - (N K/2) ln(2 pi / beta)``;
``log_occam_w``
    the Occam factor of the parameters (eq. 6): ``ln p(w_MP|alpha) + (k/2) ln 2 pi -
    (1/2) ln det A = sum_i [ln prec_i / 2 - prec_i w_i^2 / 2] - (1/2) ln det A``.
    The sum of the two is eq. (7), ``ln P(D|alpha, beta, H)`` (``log_evidence_fixed``);
``log_occam_hyper``
    the Occam factors of the hyperparameters: the evidence's peak over ``ln alpha_c`` and
    ``ln beta`` taken as a Gaussian of widths ``sqrt(2/gamma_c)`` and ``sqrt(2/(N K -
    gamma))`` (MacKay, Neural Computation 4, 448 (1992), Sec. 5), each contributing
    ``ln(sqrt(2 pi) sigma)``. The prior density of each ``ln alpha_c``/``ln beta`` (flat over
    a range R) would add ``-ln R`` per hyperparameter; it is left out, which is exact for
    comparisons between models with the same number of hyperparameters;
``log_symmetry``
    ``ln(H!) + H ln 2`` per hidden layer of H tanh units (permutations and sign flips leave
    the function unchanged, and the Gaussian around one mode counts only one of the
    ``H! 2^H`` equivalent modes), ``ln(H!)`` for logistic units (whose sign flip needs the
    output biases to move, so it is not an exact symmetry of the prior).

``log_evidence = log_likelihood + log_occam_w + log_occam_hyper + log_symmetry``.

References
----------
D. J. C. MacKay, "Bayesian model comparison and backprop nets", NIPS 4 (1992), eqs. 5-9;
D. J. C. MacKay, "A practical Bayesian framework for backpropagation networks", Neural
Computation 4, 448 (1992).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from thermonet.errors import ConfigError
from thermonet.evidence.laplace.curvature import resolve_method
from thermonet.evidence.mackay.factorised import METHODS, Factorised
from thermonet.evidence.mackay.level1 import level1
from thermonet.kernels.threads import blas_single
from thermonet.types import FloatArray, IntArray

__all__ = ["MacKayResult", "evaluate_at", "jacobian", "log_symmetry_factor",
           "mackay_evidence", "predictive", "reestimate"]

_LOG_2PI = math.log(2.0 * math.pi)


@dataclass
class MacKayResult:
    """The outcome of :func:`reestimate` (every log in nats)."""

    theta: FloatArray
    group_names: list[str]
    alpha: FloatArray            # re-estimated precision per group (before the group scale)
    beta: float                  # noise precision
    gamma_groups: FloatArray     # well-determined parameters per group
    gamma: float                 # over every parameter (fixed-precision ones included)
    e_d: float                   # E_D(w_MP) (a classifier's: the cross-entropy)
    e_w: FloatArray              # E_W,c(w_MP) per group
    n_params: int
    n_residuals: int
    log_likelihood: float
    log_occam_w: float
    log_occam_hyper: float
    log_symmetry: float
    eigenvalues: FloatArray      # of A, ascending (empty when A was Cholesky-factorised)
    eigenvectors: FloatArray     # (empty when A was Cholesky-factorised)
    n_iter: int
    converged: bool
    beta_estimated: bool
    history: list[dict[str, Any]] = field(default_factory=list)
    factorised: Factorised | None = None   # A at w_MP (its error bars, solves)

    @property
    def log_evidence_fixed(self) -> float:
        """``ln P(D|alpha, beta, H)``, MacKay's eq. (7)."""
        return self.log_likelihood + self.log_occam_w

    @property
    def log_evidence(self) -> float:
        """``ln P(D|H)``: eq. (7) plus the hyperparameter Occam factors and the symmetry."""
        return self.log_evidence_fixed + self.log_occam_hyper + self.log_symmetry

    @property
    def positive_definite(self) -> bool:
        if self.factorised is not None:
            return self.factorised.positive_definite
        return bool(self.eigenvalues.size == 0 or self.eigenvalues[0] > 0)

    def terms(self) -> dict[str, float]:
        return {"log_likelihood": self.log_likelihood, "log_occam_w": self.log_occam_w,
                "log_occam_hyper": self.log_occam_hyper, "log_symmetry": self.log_symmetry,
                "log_evidence_fixed": self.log_evidence_fixed,
                "log_evidence": self.log_evidence}

    def covariance(self) -> FloatArray:
        """``A^-1``, the Gaussian posterior's covariance of the parameters."""
        return self.hessian_factor().covariance()

    def hessian_factor(self) -> Factorised:
        """The factorised ``A`` at ``w_MP``."""
        if self.factorised is not None:
            return self.factorised
        return Factorised("eigh", self.positive_definite, self.eigenvalues, self.eigenvectors)


def log_symmetry_factor(hidden: Any, activation: str) -> float:
    """``sum_l [ln(H_l!) + H_l ln 2]`` for odd activations (tanh), ``sum_l ln(H_l!)`` for
    logistic units."""
    if activation not in ("tanh", "logistic"):
        raise ConfigError(f"activation {activation!r}; expected 'tanh' or 'logistic'")
    out = 0.0
    for h in hidden:
        out += math.lgamma(int(h) + 1) + (int(h) * math.log(2.0) if activation == "tanh"
                                          else 0.0)
    return out


def _hyper_layout(potential: Any) -> tuple[list[str], list[IntArray], list[float], bool]:
    model = potential.hyper_model()
    names = [g.name for g in model.groups]
    idx = [np.asarray(g.index, dtype=np.int64) for g in model.groups]
    scales = [float(g.scale) for g in model.groups]
    return names, idx, scales, model.noise is not None


def reestimate(potential: Any, theta0: Any, hyper0: Any = None, *, max_iter: int = 200,
               tol: float = 1e-6, lbfgs_iter: int = 5000, newton_steps: int = 4,
               log_symmetry: float = 0.0, max_log_hyper: float = 40.0,
               max_step: float = 2.0, hessian_method: str = "auto",
               factorisation: str = "auto",
               on_cycle: Callable[[dict[str, Any]], None] | None = None) -> MacKayResult:
    """Level 2a re-estimation and the level-2 evidence of ``potential`` (module docstring).

    Parameters
    ----------
    potential
        A regression potential (``mlp-regression``'s, or any with ``hyper_model``,
        ``set_hyperparameters``, ``prec``, ``tau``, ``half_sse``, ``energy_and_grad``).
    theta0 : array_like
        Starting weights.
    hyper0 : array_like, optional
        Starting ``(alpha_1..alpha_C[, beta])`` (default: the potential's current ones).
    max_iter : int
        Re-estimation cycles at most (each: minimise, Hessian, update).
    tol : float
        Convergence: every ``|Delta ln alpha_c|`` and ``|Delta ln beta|`` below ``tol``.
    lbfgs_iter, newton_steps : int
        Level-1 minimisation: L-BFGS iterations, then Newton steps on the Hessian.
    log_symmetry : float
        The symmetry term (:func:`log_symmetry_factor`).
    max_log_hyper : float
        A precision whose ``|ln|`` would exceed this is held there (a pruned group, gamma_c
        -> 0), and the result is marked not converged.
    max_step : float
        Largest change of any ``ln alpha_c``/``ln beta`` in one cycle.
    hessian_method : {"auto", "fd", "analytic", "rop"}
        The Hessian ``A`` (:func:`thermonet.evidence.laplace.curvature.hessian`): "auto" takes the
        potential's exact one (``mlp-regression``: the compiled closed form, "analytic", for
        one hidden layer, the R-operator, "rop", for more), "fd" central differences of the
        gradient.
    factorisation : {"auto", "eigh", "cholesky", "slq"}
        How ``A`` is factorised (:func:`thermonet.evidence.mackay.factorised.factorise`; "auto":
        the eigendecomposition up to 4,000 parameters, the Cholesky factor above; "slq":
        never formed, ``ln det A`` and the group traces of ``A^-1`` estimated from
        Hessian-vector products, :mod:`thermonet.evidence.mackay.stochastic`; no error bars on
        outputs).
    on_cycle : callable, optional
        Called with each cycle's record (``history``) as it ends: progress on long work.
    """
    th, hyper, (names, idx, scales, unknown_noise) = _start(
        potential, theta0, hyper0, max_iter=max_iter, tol=tol, hessian_method=hessian_method,
        factorisation=factorisation)
    n_groups = len(names)
    want = n_groups + unknown_noise
    history: list[dict[str, Any]] = []
    converged = False
    it = 0
    options = (lbfgs_iter, newton_steps, hessian_method, 4, factorisation)
    for it in range(1, int(max_iter) + 1):
        potential.set_hyperparameters(hyper, 1.0)
        th, fac = level1(potential, th, *options)
        if fac.eigenvalues is not None and not np.all(np.isfinite(fac.eigenvalues)):
            raise ConfigError("the Hessian at w_MP is not finite (overflow in the network?)")
        # a saddle no escape step could leave: the step is taken with the eigenvalues of A
        # floored (the final point must be a minimum, or the result has no evidence)
        saddle = not fac.positive_definite
        well = 1.0 - potential.prec * fac.diag_inverse(floored=saddle)
        new, clipped = _reestimated(potential, th, hyper, well, idx, scales, unknown_noise)
        clipped |= saddle
        log_new = _bounded_log(new, hyper, max_step, max_log_hyper)
        change = float(np.max(np.abs(log_new - np.log(hyper)))) if want else 0.0
        history.append({"iter": it, "hyper": hyper.tolist(), "gamma": float(np.sum(well)),
                        "energy": float(potential.energy(th)), "change": change,
                        "clipped": clipped, "lambda_min": fac.lambda_min})
        if on_cycle is not None:
            on_cycle(history[-1])
        hyper = np.exp(log_new)
        if change < tol:
            converged = bool(np.all(np.abs(log_new) < max_log_hyper)) and not clipped
            break
    # the evidence at the final hyperparameters and their w_MP
    potential.set_hyperparameters(hyper, 1.0)
    th, fac = level1(potential, th, *options)
    return _evaluate(potential, th, hyper, fac, names, idx, scales, unknown_noise,
                     log_symmetry, it, converged, history)


def _start(potential: Any, theta0: Any, hyper0: Any, *, max_iter: int, tol: float,
           hessian_method: str, factorisation: str
           ) -> tuple[FloatArray, FloatArray, tuple[list[str], list[IntArray], list[float], bool]]:
    """The checked starting weights and hyperparameters of :func:`reestimate`, and the
    potential's hyperparameter layout (:func:`_hyper_layout`)."""
    resolve_method(potential, hessian_method)
    if factorisation not in (*METHODS, "slq"):
        raise ConfigError(f"factorisation = {factorisation!r}; expected one of "
                          f"{(*METHODS, 'slq')}")
    d = int(potential.n_params)
    th = np.array(theta0, dtype=np.float64).ravel()
    if th.shape != (d,) or not np.all(np.isfinite(th)):
        raise ConfigError(f"theta0 has shape {np.shape(theta0)}; expected {d} finite numbers")
    if int(max_iter) < 1 or not (tol > 0):
        raise ConfigError(f"max_iter = {max_iter}, tol = {tol}; expected max_iter >= 1 and "
                          "tol > 0")
    names, idx, scales, unknown_noise = _hyper_layout(potential)
    if hyper0 is None:
        hyper = np.array([*_current_alpha(potential, idx, scales),
                          *([potential.tau] if unknown_noise else [])], dtype=np.float64)
    else:
        hyper = np.array(hyper0, dtype=np.float64).ravel()
    want = len(names) + unknown_noise
    if hyper.shape != (want,) or not np.all(np.isfinite(hyper)) or np.any(hyper <= 0):
        raise ConfigError(f"hyper0 = {hyper0!r}; expected {want} positive precisions "
                          f"({', '.join(names + (['noise'] if unknown_noise else []))})")
    return th, hyper, (names, idx, scales, unknown_noise)


def _reestimated(potential: Any, th: FloatArray, hyper: FloatArray, well: FloatArray,
                 idx: list[IntArray], scales: list[float], unknown_noise: bool
                 ) -> tuple[FloatArray, bool]:
    """One level-2a update (MacKay eqs. 8-9): ``alpha_c = gamma_c / (2 E_W,c)`` per group and
    ``beta = (N K - gamma) / (2 E_D)``, from the well-determined fraction ``well`` of every
    parameter; and whether a ``gamma`` had to be clipped."""
    nk = int(potential.n_residuals)
    new = hyper.copy()
    clipped = False
    for c in range(len(idx)):
        e_w = 0.5 * scales[c] * float(np.sum(th[idx[c]] ** 2))
        # far from the fixed point the Hessian of E_D may be indefinite and gamma_c
        # fall outside [0, k_c]: the step is then clipped (the fixed point is unchanged)
        k_c = float(idx[c].shape[0])
        g_c = float(np.clip(np.sum(well[idx[c]]), 1e-3, k_c))
        clipped |= g_c != float(np.sum(well[idx[c]]))
        new[c] = g_c / (2.0 * e_w) if e_w > 0 else math.inf
    if unknown_noise:
        e_d = float(potential.half_sse(th))
        g_all = float(np.clip(np.sum(well), 0.0, nk - 1e-3))
        clipped |= g_all != float(np.sum(well))
        new[-1] = (nk - g_all) / (2.0 * e_d) if e_d > 0 else math.inf
    return new, clipped


def _bounded_log(new: FloatArray, hyper: FloatArray, max_step: float, max_log_hyper: float
                 ) -> FloatArray:
    """``ln`` of the re-estimated hyperparameters, at most ``max_step`` from ``ln hyper`` and
    at most ``max_log_hyper`` in size."""
    with np.errstate(divide="ignore"):
        log_new = np.log(np.maximum(new, 1e-300))
    # at most a factor e^max_step per cycle: re-estimation from a poor start can overshoot
    log_new = np.clip(log_new, np.log(hyper) - max_step, np.log(hyper) + max_step)
    return np.clip(log_new, -max_log_hyper, max_log_hyper)


def evaluate_at(potential: Any, theta0: Any, hyper: Any, *, lbfgs_iter: int = 5000,
                newton_steps: int = 4, log_symmetry: float = 0.0,
                hessian_method: str = "auto", factorisation: str = "auto") -> MacKayResult:
    """Level 1 and the evidence terms at fixed ``(alpha_1..alpha_C[, beta])``, without
    re-estimation (``n_iter = 0``, ``converged = False``)."""
    resolve_method(potential, hessian_method)
    names, idx, scales, unknown_noise = _hyper_layout(potential)
    d = int(potential.n_params)
    th = np.array(theta0, dtype=np.float64).ravel()
    h = np.array(hyper, dtype=np.float64).ravel()
    want = len(names) + unknown_noise
    if th.shape != (d,) or h.shape != (want,) or np.any(h <= 0):
        raise ConfigError(f"theta0 of shape {th.shape} and hyper of shape {h.shape}; expected "
                          f"({d},) and ({want},) with positive precisions")
    potential.set_hyperparameters(h, 1.0)
    th, fac = level1(potential, th, lbfgs_iter, newton_steps, hessian_method, 4, factorisation)
    return _evaluate(potential, th, h, fac, names, idx, scales, unknown_noise,
                     log_symmetry, 0, False, [])


def _current_alpha(potential: Any, idx: list[IntArray], scales: list[float]) -> list[float]:
    return [float(potential.prec[i[0]]) / s for i, s in zip(idx, scales, strict=True)]


def _evaluate(potential: Any, th: FloatArray, hyper: FloatArray, fac: Factorised,
              names: list[str], idx: list[IntArray], scales: list[float],
              unknown_noise: bool, log_symmetry: float, it: int, converged: bool,
              history: list[dict[str, Any]]) -> MacKayResult:
    nk = int(potential.n_residuals)
    prec = np.array(potential.prec, dtype=np.float64)
    beta = float(potential.tau)
    e_w = np.array([0.5 * s * float(np.sum(th[i] ** 2)) for i, s in zip(idx, scales,
                                                                         strict=True)])
    if hasattr(potential, "half_sse"):
        e_d = float(potential.half_sse(th))
        log_like = -beta * e_d - 0.5 * nk * (_LOG_2PI - math.log(beta))
    else:
        # a classifier (mackay_classify): E_D is the cross-entropy, -ln p(D|w)
        e_d = float(potential.likelihood_energy(th))
        log_like = -e_d
    pd = fac.positive_definite
    well = 1.0 - prec * fac.diag_inverse() if pd else np.full(th.shape[0], math.nan)
    log_det = fac.log_det
    log_prior = float(np.sum(0.5 * np.log(prec) - 0.5 * prec * th ** 2))
    log_occam_w = log_prior - 0.5 * log_det
    gamma_groups = np.array([float(np.sum(well[i])) for i in idx])
    gamma = float(np.sum(well))
    occ = 0.0
    for g in gamma_groups:
        occ += 0.5 * (_LOG_2PI + math.log(2.0 / g)) if g > 0 else math.nan
    if unknown_noise:
        occ += (0.5 * (_LOG_2PI + math.log(2.0 / (nk - gamma))) if nk > gamma else math.nan)
    return MacKayResult(
        theta=th, group_names=list(names), alpha=np.array(hyper[:len(names)]), beta=beta,
        gamma_groups=gamma_groups, gamma=gamma, e_d=e_d, e_w=e_w, n_params=th.shape[0],
        n_residuals=nk, log_likelihood=log_like, log_occam_w=log_occam_w,
        log_occam_hyper=occ, log_symmetry=float(log_symmetry),
        eigenvalues=fac.eigenvalues if fac.eigenvalues is not None else np.empty(0),
        eigenvectors=fac.eigenvectors if fac.eigenvectors is not None else np.empty((0, 0)),
        n_iter=it, converged=converged and pd, beta_estimated=unknown_noise,
        history=history, factorised=fac)


def jacobian(potential: Any, theta: FloatArray, x: Any, *, step: float = 1e-5) -> FloatArray:
    """``d f_k(x_n) / d w_i`` by central differences of the outputs, shape ``(n, K, d)``
    (an O(step^2) error; the outputs of a linear model are differentiated exactly)."""
    th = np.asarray(theta, dtype=np.float64)
    # one BLAS cap around the 2d evaluations: set and lifted per call it was half their time
    with blas_single():
        f0 = np.asarray(potential.outputs(th, x))
        out = np.empty((*f0.shape, th.shape[0]))
        for i in range(th.shape[0]):
            h = step * max(1.0, abs(th[i]))
            tp, tm = th.copy(), th.copy()
            tp[i] += h
            tm[i] -= h
            out[..., i] = (np.asarray(potential.outputs(tp, x))
                           - np.asarray(potential.outputs(tm, x))) / (2.0 * h)
    return out


def predictive(result: MacKayResult, potential: Any, x: Any) -> tuple[FloatArray, FloatArray]:
    """The Gaussian predictive of the outputs at inputs ``x``: mean ``f(x, w_MP)`` and
    variance ``g^T A^-1 g + 1/beta`` per output (``g = d f / d w``), each ``(n, K)``."""
    if not result.positive_definite:
        raise ConfigError("the Hessian at w_MP is not positive definite; the Gaussian "
                          "predictive does not exist there")
    mean = np.asarray(potential.outputs(result.theta, x))
    proj = result.hessian_factor().whiten(jacobian(potential, result.theta, x))
    var = np.sum(proj ** 2, axis=-1) + 1.0 / result.beta
    return mean, var


def mackay_evidence(arch: Any, data: Any, *, seed: int = 0, init_std: float = 0.5,
                    hyper0: Any = None, **options: Any) -> MacKayResult:
    """MacKay's framework for an ``mlp-regression`` architecture on ``data`` (``.x``, ``.y``):
    random starting weights ``N(0, init_std^2)`` from ``seed``, then :func:`reestimate` with
    the architecture's symmetry factor. ``options`` go to :func:`reestimate`."""
    if not getattr(arch, "hierarchical", False):
        raise ConfigError("MacKay's framework re-estimates one precision per weight group; "
                          "build the architecture with hierarchical = true")
    if getattr(arch, "parameterisation", "direct") != "direct":
        raise ConfigError(f"parameterisation = {arch.parameterisation!r}: MacKay's framework "
                          "re-estimates the group precisions, which the scale-factor "
                          "coordinates hold in the state; use parameterisation = \"direct\"")
    if getattr(arch, "ard_levels", 2) != 2:
        raise ConfigError("MacKay's framework re-estimates the per-input precisions directly; "
                          "use ard_levels = 2 (Rasmussen's third level is for sampling)")
    pot = arch.potential(data)
    rng = np.random.default_rng(seed)
    theta0 = rng.normal(0.0, float(init_std), pot.n_params)
    hidden = [int(h) for h in arch.widths[1:-1]]
    if hyper0 is None and pot.hyper_model().noise is not None:
        # start the noise level at the data's spread: an initial beta of 1 on targets of
        # scale ~2 would fit nothing at first and pass through a long trivial phase
        n_groups = len(pot.hyper_model().groups)
        hyper0 = [*([1.0] * n_groups), 1.0 / max(float(np.var(pot.y)), 1e-12)]
    return reestimate(pot, theta0, hyper0, log_symmetry=log_symmetry_factor(
        hidden, arch.hidden_activation), **options)
