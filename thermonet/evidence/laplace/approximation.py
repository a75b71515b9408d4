"""Laplace (saddle-point) approximation of the evidence at a minimum (MacKay 1992).

At a minimum ``w0`` of ``E`` with Hessian ``H`` (eigenvalues ``lambda_i``),

    log ∫_box exp(-E/T) dw  ≈  -E(w0)/T + sum_i log sqrt(2 pi T / lambda_i)
                            =  -E(w0)/T + (d/2) ln 2 pi - ½ ln det(H/T),

and the log evidence is that minus ``log ∏ σ_i`` (the box prior's ``log_volume``); at T = 1
this is MacKay's eq. (6). The Gaussian is then cut by the box, direction by direction: a
direction whose Gaussian width exceeds the width ``b_i`` of the box along it, or whose
eigenvalue is zero or negative, contributes ``log b_i`` instead of its Gaussian factor. What
"the width along a direction" means is the ``bound`` option:

``"scaled"`` (default)
    The directions are those of the box's own units ``y_j = w_j / σ_j`` (the box becomes the
    unit cube): the eigenvalues ``μ_i`` of ``diag(σ) H diag(σ)``, and every direction of the
    cube has width 1, so

        log ∫ ≈ -E(w0)/T + log ∏ σ_j + sum_i min(½ ln(2πT/μ_i), 0).

    With no direction bounded this is exactly the formula above (``det(SHS) = det H ∏ σ_j²``);
    with every direction bounded it is ``-E(w0)/T + log ∏ σ_j``: the log evidence never
    exceeds ``-E(w0)/T``. For axis-aligned directions the width is exact (``σ_j``); for a flat
    subspace of dimension m through the centre of the box the section of the unit cube has
    volume at least 1 (Vaaler 1979) and at most ``2^{(d-m)/2}`` for m >= d/2 (Ball 1989), so
    the rule is within ``(d-m)/2 · ln 2`` of it there. Eigenvalues only, basis-independent,
    and SLQ uses it too.
``"projected"``
    ``b_i = sum_j σ_j |u_ij|``, the length of the projection of the box on the eigenvector
    ``u_i`` of ``H``: an upper bound on every chord along ``u_i``, and their product over
    orthonormal directions an upper bound on the box's section volume along them. Needs the
    eigenvectors, depends on LAPACK's basis inside degenerate eigenspaces, and is very loose
    for eigenvectors spread over many coordinates (for M1 on D500 it exceeded the box volume
    itself by e^36,000; docs/evidence.md). For small or well-determined problems only.
``"scalar"``
    one width ``b`` for every eigenvector of ``H``: ``box_width`` if given, else the geometric
    mean of the ``σ_j``. A heuristic.

Directions that are flat by construction are separated first, exactly, by a shear of unit
Jacobian (:func:`_flat_coordinates`): for the MLP the first-layer weights of inputs that are
constant over the training set (25 pixels x 40 units = 1000 for D500) and, with a linear output
layer, the softmax's common shift (the last class's weights and bias, 41 for M3). Each
contributes its box width ``ln σ_j``, as does any coordinate whose Hessian row is exactly zero.

Two ways to the eigenvalue sum (``method``):

``"dense"``
    the exact Hessian (:func:`thermonet.evidence.laplace.curvature.hessian`; exact R-operator
    for the built-in MLP) and a symmetric eigendecomposition (LAPACK ``syevr``). Error 0 (the result
    is deterministic; the Laplace approximation itself is not).
``"slq"``
    stochastic Lanczos quadrature (Ubaru, Chen & Saad, SIAM J. Matrix Anal. Appl. 38, 1075
    (2017)) of ``tr φ(H)`` from Hessian-vector products: Rademacher probes (seeded), ``n_steps``
    Lanczos steps with full reorthogonalisation each, Gauss quadrature of ``φ`` on the Ritz
    values. ``log_integral_error`` is the standard error over the probes (the quadrature bias of
    ``n_steps`` steps is not included).

``"auto"`` is dense up to :data:`DENSE_MAX_PARAMS` parameters and SLQ above.

References
----------
D. J. C. MacKay, "Bayesian model comparison and backprop nets", NIPS 4 (1992), eq. (6).
B. A. Pearlmutter, "Fast exact multiplication by the Hessian", Neural Comput. 6, 147 (1994).
S. Ubaru, J. Chen and Y. Saad, "Fast estimation of tr(f(A)) via stochastic Lanczos
quadrature", SIAM J. Matrix Anal. Appl. 38, 1075 (2017).
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from thermonet.errors import ConfigError
from thermonet.evidence._result import EvidenceResult
from thermonet.evidence.laplace.curvature import DEFAULT_COLUMN_BLOCK, hessian, hvp, resolve_method
from thermonet.evidence.laplace.slq import lanczos_nodes, mean_and_error, probe_estimates, slq_trace
from thermonet.priors import BoxPrior
from thermonet.types import BoolArray, FloatArray, IntArray

__all__ = ["DENSE_MAX_PARAMS", "hessian", "hvp", "laplace_evidence", "slq_trace"]

#: largest number of parameters for which method="auto" builds the dense Hessian
DENSE_MAX_PARAMS = 15_000

_DENSE_OPTIONS = {"bound", "box_width", "column_block", "threads", "eig_threads"}
_SLQ_OPTIONS = {"box_width", "n_probes", "n_steps", "threads", "bound"}
_LOG_2PI = math.log(2.0 * math.pi)
_BOUNDS = ("scaled", "projected", "scalar")


def _check_inputs(potential: Any, theta0: Any, prior: Any, temperature: float
                  ) -> tuple[FloatArray, float]:
    from thermonet.api import as_theta

    if not isinstance(prior, BoxPrior):
        raise ConfigError(f"the Laplace evidence needs a BoxPrior; got {type(prior).__name__} "
                          "(use thermonet.BoxPrior.for_architecture(arch))")
    d = int(potential.n_params)
    if prior.n_params != d:
        raise ConfigError(f"the box prior has {prior.n_params} widths; the potential has {d} "
                          "parameters (build the prior for the same architecture)")
    t = float(temperature)
    if not (math.isfinite(t) and t > 0):
        raise ConfigError(f"temperature = {temperature}; expected a positive finite number")
    th = as_theta(theta0, d, what="theta0")
    n_out = prior.n_outside(th)
    if n_out:
        raise ConfigError(f"theta0 has {n_out} parameter(s) on or outside the prior box "
                          "|w_i| < sigma_i/2; expected a minimum inside the box (minimise with "
                          "the box prior first)")
    return th, t


def _phi(lam: FloatArray, log_width: FloatArray | float, temperature: float
         ) -> tuple[FloatArray, BoolArray]:
    """Per-direction log factor ``min(½ ln(2πT/λ), ln b)`` (``ln b`` for λ <= 0) and the mask
    of the directions that took the box width."""
    lam = np.asarray(lam, dtype=np.float64)
    lw = np.broadcast_to(np.asarray(log_width, dtype=np.float64), lam.shape)
    gauss = np.full(lam.shape, np.inf)
    pos = lam > 0
    gauss[pos] = 0.5 * (_LOG_2PI + math.log(temperature) - np.log(lam[pos]))
    bounded = gauss >= lw
    return np.where(bounded, lw, gauss), bounded


def laplace_evidence(potential: Any, theta0: Any, prior: BoxPrior, temperature: float = 1.0,
                     *, method: str = "auto", seed: int = 0, **options: Any) -> EvidenceResult:
    """Laplace estimate of ``log ∫_box exp(-E/T) dw`` at the minimum ``theta0``.

    Parameters
    ----------
    potential : Potential
        ``E(theta)`` with its gradient; the built-in MLP gets an exact Hessian (R-operator),
        the Gaussian test system its analytic one, other potentials finite differences of the
        gradient (see :mod:`thermonet.evidence.laplace.curvature`).
    theta0 : array_like, shape (n_params,)
        A minimum of ``E`` inside the box (e.g. from :class:`thermonet.minimisers.rmin.RMin`
        with ``respect_box=True``).
    prior : BoxPrior
        The box ``|w_i| < σ_i/2``; ``log_volume = sum ln σ_i`` turns the integral into the
        log evidence.
    temperature : float
        T > 0 (the log evidence is the paper's at T = 1).
    method : {"auto", "dense", "slq"}
    seed : int
        Seed of the SLQ probe vectors (unused by "dense").
    **options
        dense: ``bound`` ("scaled", the default, "projected" or "scalar"), ``box_width``
        (scalar bound), ``column_block`` (Hessian columns per kernel call, 128), ``threads``
        (Hessian kernel threads; default the potential's), ``eig_threads`` (BLAS threads of
        the eigendecomposition, 1: on a busy 2-core machine two were 10x slower).
        slq: ``bound`` ("scaled" or "scalar"), ``n_probes`` (30), ``n_steps`` (80),
        ``box_width``, ``threads``.

    Returns
    -------
    EvidenceResult
        ``method="laplace"``; ``details`` holds the eigenvalue counts (``n_flat``: the
        sheared-out flat coordinates; ``n_bounded``: directions given the box width, flat
        ones included; ``n_negative``, ``n_small``), an eigenvalue summary, ``logdet`` (over
        the unbounded directions, of ``SHS/T`` for the scaled bound, else ``H/T``), the plain
        Laplace value without any box (``log_integral_unbounded``, NaN if an eigenvalue is <= 0 or a
        coordinate is flat), the Hessian scheme, its asymmetry and timings (docs/evidence.md lists
        them all).
    """
    t_start = time.perf_counter()
    th, t = _check_inputs(potential, theta0, prior, temperature)
    d = th.shape[0]
    if method not in ("auto", "dense", "slq"):
        raise ConfigError(f"Laplace method {method!r} is not known; expected 'auto', 'dense' "
                          "or 'slq'")
    if method == "auto":
        method = "dense" if d <= DENSE_MAX_PARAMS else "slq"
    allowed = _DENSE_OPTIONS if method == "dense" else _SLQ_OPTIONS
    unknown = set(options) - allowed
    if unknown:
        raise ConfigError(f"unknown option(s) {sorted(unknown)} for the {method} Laplace "
                          f"evidence; expected some of {sorted(allowed)}")
    e0, g0 = potential.energy_and_grad(th)
    e0 = float(e0)
    if not math.isfinite(e0):
        raise ConfigError(f"E(theta0) = {e0}; expected a finite energy at the minimum")
    details: dict[str, Any] = {"laplace_method": method, "temperature": t,
                               "grad_norm": float(np.linalg.norm(g0)),
                               "grad_max": float(np.max(np.abs(g0))) if d else 0.0}
    if method == "dense":
        value, err = _dense(potential, th, prior, t, details, **options)
    else:
        value, err = _slq(potential, th, prior, t, seed, details, **options)
    if "log_integral_unbounded" in details:
        details["log_integral_unbounded"] += -e0 / t
    details["elapsed_s"] = time.perf_counter() - t_start
    return EvidenceResult(method="laplace", temperature=t, n_params=d, energy0=e0,
                          log_integral=-e0 / t + value, log_integral_error=err,
                          log_volume=prior.log_volume, details=details)


def _eig_summary(lam: FloatArray) -> dict[str, Any]:
    if lam.size == 0:
        return {"min": float("nan"), "max": float("nan"), "median": float("nan")}
    q = np.quantile(lam, [0.0, 0.01, 0.1, 0.5, 0.9, 0.99, 1.0])
    return {"min": float(q[0]), "q01": float(q[1]), "q10": float(q[2]),
            "median": float(q[3]), "q90": float(q[4]), "q99": float(q[5]),
            "max": float(q[6])}


def _dense(potential: Any, th: FloatArray, prior: BoxPrior, t: float, details: dict[str, Any],
           *, bound: str = "scaled", box_width: float | None = None,
           column_block: int = DEFAULT_COLUMN_BLOCK, threads: int | None = None,
           eig_threads: int = 1) -> tuple[float, float]:
    if bound not in _BOUNDS:
        raise ConfigError(f"bound = {bound!r}; expected one of {_BOUNDS}")
    t0 = time.perf_counter()
    info: dict[str, Any] = {}
    const_in, shift = _flat_coordinates(potential)
    known = const_in | shift
    keep = np.flatnonzero(~known)
    # only the rows and columns of the coordinates not known to be flat are ever built
    h = hessian(potential, th, column_block=column_block, threads=threads, info=info,
                index=keep)
    t1 = time.perf_counter()
    details.update(info)
    details["hessian_s"] = t1 - t0
    zero_rows = _zero_rows(h)
    n_zero = int(zero_rows.sum())
    if n_zero:
        sub = np.flatnonzero(~zero_rows)
        h = h[np.ix_(sub, sub)]
    flat = known.copy()
    flat[keep[zero_rows]] = True
    keep = keep[~zero_rows]
    n_flat = int(flat.sum())
    details["n_flat_zero_rows"] = n_zero
    details["n_flat_constant_inputs"] = int(const_in.sum())
    details["n_flat_softmax_shift"] = int(shift.sum())
    sigma = prior.sigma[keep]
    log_flat = float(np.sum(np.log(prior.sigma[flat])))
    want_vectors = bound == "projected"
    if bound == "scaled":
        # diag(σ) H diag(σ): the Hessian in the box's own units y_j = w_j / σ_j
        h *= sigma[:, None]
        h *= sigma[None, :]
    lam, u = _eigh(h, want_vectors, eig_threads)
    del h
    t2 = time.perf_counter()
    details["eigh_s"] = t2 - t1
    if not np.all(np.isfinite(lam)):
        raise ConfigError("the Hessian at theta0 is not finite (overflow in the network?); "
                          "expected a finite minimum")
    log_units = 0.0
    if bound == "scaled":
        log_w: FloatArray | float = 0.0          # the unit cube is 1 wide along every axis
        log_units = float(np.sum(np.log(sigma)))
    elif want_vectors:
        assert u is not None
        widths = np.abs(u).T @ sigma if u.size else np.zeros(0)
        del u
        log_w = np.log(widths)
    else:
        bw = _scalar_width(prior, keep, box_width)
        log_w = math.log(bw)
        details["box_width"] = bw
    phi, bounded = _phi(lam, log_w, t)
    scale = float(np.max(np.abs(lam))) if lam.size else 0.0
    tol = max(lam.size, 1) * np.finfo(np.float64).eps * scale
    unb = ~bounded
    logdet_unb = float(np.sum(np.log(lam[unb] / t)))
    all_pos = bool(np.all(lam > 0)) and n_flat == 0
    unbounded_value = (0.5 * lam.size * _LOG_2PI - 0.5 * float(np.sum(np.log(lam / t)))
                       + log_units if all_pos else float("nan"))
    details.update({
        "bound": bound, "n_flat": n_flat, "n_bounded": int(bounded.sum()) + n_flat,
        "n_negative": int(np.sum(lam < -tol)), "n_small": int(np.sum(np.abs(lam) <= tol)),
        "small_tolerance": float(tol), "eigenvalues": _eig_summary(lam),
        "logdet": logdet_unb, "n_unbounded": int(unb.sum()),
        "log_width_bounded": float(np.sum(phi[bounded])) + log_flat,
        "log_integral_unbounded": unbounded_value,   # -E0/T added by the caller
    })
    return log_flat + log_units + float(np.sum(phi)), 0.0


def _eigh(h: FloatArray, want_vectors: bool, eig_threads: int
          ) -> tuple[FloatArray, FloatArray | None]:
    """Eigenvalues (and with ``want_vectors`` eigenvectors) of the symmetric ``h``, which is
    overwritten, on ``eig_threads`` BLAS threads."""
    import scipy.linalg

    from thermonet.kernels import threads as kt

    u = None
    with kt.limit(1, blas_threads=max(1, int(eig_threads))):
        if h.shape[0] == 0:
            lam, u = np.zeros(0), np.zeros((0, 0))
        # h is exactly symmetric: its transpose is the Fortran-ordered array LAPACK works on
        # in place (no copy of the d x d matrix)
        elif want_vectors:
            lam, u = scipy.linalg.eigh(h.T, overwrite_a=True, check_finite=False, driver="evr")
        else:
            lam = scipy.linalg.eigh(h.T, overwrite_a=True, check_finite=False, driver="evr",
                                    eigvals_only=True)
    return lam, u


def _zero_rows(h: FloatArray, step: int = 256) -> BoolArray:
    """Rows of ``h`` that are exactly zero, in row blocks (no d x d temporary)."""
    out = np.empty(h.shape[0], dtype=bool)
    for i0 in range(0, h.shape[0], step):
        blk = h[i0:i0 + step]
        out[i0:i0 + step] = ~np.any(blk != 0.0, axis=1)
    return out


def _scalar_width(prior: BoxPrior, keep: IntArray, box_width: float | None) -> float:
    if box_width is None:
        return float(np.exp(np.mean(np.log(prior.sigma[keep])))) if len(keep) else 1.0
    bw = float(box_width)
    if not (math.isfinite(bw) and bw > 0):
        raise ConfigError(f"box_width = {box_width}; expected a positive finite number")
    return bw


def _flat_coordinates(potential: Any) -> tuple[BoolArray, BoolArray]:
    """Coordinates that become exactly flat after a shear of unit Jacobian (boolean masks
    ``constant_inputs``, ``softmax_shift``).

    For the MLP:

    * constant inputs: the first-layer weights ``w_oi`` of every input ``i`` with
      ``x_ni = c_i`` for all n. ``E`` depends on them only through
      ``s_o = b_o + sum_i c_i w_oi``; in the coordinates ``(s_o, w_oi)`` the ``w_oi`` are
      flat and the Hessian in the other coordinates is the Hessian with the ``w_oi`` rows and
      columns deleted (``b_o`` standing for ``s_o``). With ``c_i = 0`` the rows are zero.
    * softmax shift (linear output layer only): adding the same number to the weights (or
      biases) of every class from one unit leaves the softmax unchanged. In the coordinates
      ``u_cj = W_cj - W_(C-1)j`` (c < C-1) and ``W_(C-1)j`` the latter are flat, and the
      Hessian in the ``u`` is the Hessian with the last class's rows and columns deleted.

    Other potentials: none known in advance.
    """
    return potential.flat_coordinates()


def _slq(potential: Any, th: FloatArray, prior: BoxPrior, t: float, seed: int,
         details: dict[str, Any], *, box_width: float | None = None, n_probes: int = 30,
         n_steps: int = 80, threads: int | None = None, bound: str = "scaled"
         ) -> tuple[float, float]:
    if bound not in ("scaled", "scalar"):
        raise ConfigError(f"bound = {bound!r}; SLQ supports 'scaled' and 'scalar' (no "
                          "eigenvectors)")
    t0 = time.perf_counter()
    hm = resolve_method(potential)
    const_in, shift = _flat_coordinates(potential)
    flat = const_in | shift
    keep = np.flatnonzero(~flat)
    n_flat = int(flat.sum())
    log_flat = float(np.sum(np.log(prior.sigma[flat])))
    d = th.shape[0]
    n_mv = [0]
    if bound == "scaled":
        units = prior.sigma[keep]
        log_units = float(np.sum(np.log(units)))
        log_w = 0.0
    else:
        units = np.ones(len(keep))
        log_units = 0.0
        bw = _scalar_width(prior, keep, box_width)
        log_w = math.log(bw)
        details["box_width"] = bw

    def matvec(v_kp: FloatArray) -> FloatArray:
        full = np.zeros((v_kp.shape[0], d))
        full[:, keep] = v_kp * units
        n_mv[0] += v_kp.shape[0]
        return hvp(potential, th, full, threads=threads)[:, keep] * units

    def phi(lam: FloatArray) -> FloatArray:
        return _phi(lam, log_w, t)[0]

    def is_bounded(lam: FloatArray) -> FloatArray:
        return _phi(lam, log_w, t)[1].astype(np.float64)

    nodes = lanczos_nodes(matvec, len(keep), n_probes, n_steps, seed)
    mean, err = mean_and_error(probe_estimates(nodes, len(keep), phi))
    nb, nb_err = mean_and_error(probe_estimates(nodes, len(keep), is_bounded))
    nneg, nneg_err = mean_and_error(probe_estimates(nodes, len(keep),
                                                lambda lam: (lam < 0).astype(np.float64)))
    ritz = np.concatenate([nd[0] for nd in nodes])
    details.update({
        "hessian_method": hm, "bound": bound, "n_flat": n_flat,
        "n_flat_constant_inputs": int(const_in.sum()), "n_flat_softmax_shift": int(shift.sum()),
        "n_bounded": n_flat + nb, "n_bounded_error": nb_err,
        "n_negative": nneg, "n_negative_error": nneg_err,
        "ritz_min": float(ritz.min()), "ritz_max": float(ritz.max()),
        "n_probes": int(n_probes), "n_steps": int(min(n_steps, len(keep))),
        "n_hvp": n_mv[0], "slq_s": time.perf_counter() - t0,
    })
    return log_flat + log_units + mean, err
