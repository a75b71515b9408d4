"""Exact Hessians and Hessian-vector products of a potential, for the Laplace evidence.

Three schemes, announced by each potential's ``hessian_method`` and implemented by its
``hvp``/``hessian`` (the :class:`~thermonet.api.Potential` contract); :func:`hessian` and
:func:`hvp` add the checks, the asymmetry measure and symmetrisation:

``"rop"``
    Pearlmutter's R-operator (Neural Computation 6, 147 (1994)), i.e. forward-mode
    differentiation of the backpropagation pass along a direction ``v``
    (:mod:`thermonet.kernels.mlp_hessian`), exact to rounding and independent of the number of
    threads: the built-in float64 classifier MLP (logistic hidden units) and the regression
    networks (``mlp-regression``) with two or more hidden layers; any potential announcing
    "rop" with an exact ``hvp``/``hessian``.
``"analytic"``
    Potentials with a closed-form Hessian: the test systems' Gaussian (``diag(k)``), a
    Gaussian prior term (``diag(s/s_i^2)`` added to its base potential's Hessian), the
    one-hidden-layer regression network (:mod:`thermonet.kernels.mlp_regression_hessian`),
    and any potential with a ``hessian(theta)`` method of its own.
``"fd"``
    Everything else: central differences of the analytic gradient with one Richardson step,
    ``(4 D(h/2) - D(h)) / 3`` (error O(h^4), four gradients per column). This is NOT exact; the
    result's ``details["hessian_method"]`` says "fd" so that no one mistakes it for an exact one.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from thermonet.api import Potential, as_theta
from thermonet.errors import ConfigError
from thermonet.types import FloatArray

#: Hessian columns per kernel call when the dense Hessian is assembled
DEFAULT_COLUMN_BLOCK = 128

METHODS = ("auto", "rop", "analytic", "fd")


def _own_hessian(potential: Any) -> bool:
    """A potential that overrides ``hessian`` without announcing a scheme: closed form."""
    return type(potential).hessian is not Potential.hessian


def resolve_method(potential: Any, method: str = "auto") -> str:
    """The Hessian scheme :func:`hessian` will use for ``potential``: rop, analytic or fd."""
    if method not in METHODS:
        raise ConfigError(f"Hessian method {method!r} is not known; expected one of {METHODS}")
    dtype = np.dtype(getattr(potential, "dtype", np.float64))
    own = getattr(potential, "hessian_method", None)
    if own is None and _own_hessian(potential) and dtype == np.dtype(np.float64):
        own = "analytic"
    if method == "auto":
        if dtype != np.dtype(np.float64):
            raise ConfigError("the Laplace evidence needs a float64 potential; got a "
                              f"{dtype} {type(potential).__name__}: build it with "
                              "dtype=float64 (the default)")
        return own or "fd"
    if method == "analytic" and own != "analytic":
        raise ConfigError(f"{type(potential).__name__} has no closed-form Hessian; use "
                          "method='auto' or 'fd'")
    if method == "rop" and own != "rop":
        raise ConfigError(f"Hessian method 'rop' needs a potential that announces it "
                          f"(hessian_method = 'rop': an exact R-operator product); got "
                          f"{type(potential).__name__} with {own!r}: use method='auto' or "
                          "'fd'")
    return method


def hvp(potential: Any, theta: Any, v_kp: Any, *, method: str = "auto",
        threads: int | None = None) -> FloatArray:
    """Hessian-vector products ``H @ v`` for the rows of ``v_kp``.

    Parameters
    ----------
    potential : Potential
    theta : array_like, shape (n_params,)
    v_kp : array_like, shape (K, n_params) or (n_params,)
    method : {"auto", "rop", "analytic", "fd"}
    threads : int, optional
        Threads of a compiled product (default: the potential's); the result is bitwise the
        same for any number.

    Returns
    -------
    ndarray of float64, same shape as ``v_kp``
    """
    th = as_theta(theta, potential.n_params, what="theta0")
    v = np.asarray(v_kp, dtype=np.float64)
    single = v.ndim == 1
    v = np.ascontiguousarray(np.atleast_2d(v))
    if v.shape[1] != potential.n_params:
        raise ConfigError(f"directions have {v.shape[1]} components; expected "
                          f"{potential.n_params}")
    m = resolve_method(potential, method)
    out = (Potential.hvp(potential, th, v) if m == "fd"
           else potential.hvp(th, v, threads=threads))
    return out[0] if single else out


def hessian(potential: Any, theta: Any, *, method: str = "auto",
            column_block: int = DEFAULT_COLUMN_BLOCK, threads: int | None = None,
            symmetrise: bool = True, index: Any = None,
            info: dict[str, Any] | None = None) -> FloatArray:
    """Dense Hessian ``d^2 E / dtheta^2`` (float64, shape ``(d, d)``), symmetrised.

    Parameters
    ----------
    potential : Potential
    theta : array_like, shape (n_params,)
    method : {"auto", "rop", "analytic", "fd"}
        See the module docstring; "auto" takes the exact scheme when there is one.
    column_block : int
        Columns per kernel call (R-operator); the memory used is ``2 * column_block * d``
        floats on top of the ``d * d`` result.
    threads : int, optional
        Threads of the R-operator kernel (default: the potential's ``threads``). The result
        is bitwise the same for any number.
    symmetrise : bool
        Return ``(H + H^T) / 2`` (default). The largest ``|H - H^T|`` relative to ``max |H|``
        is stored in ``info["asymmetry"]`` either way.
    index : array_like of int, optional
        Only the rows and columns ``index`` (``H[np.ix_(index, index)]``); the R-operator then
        computes only those columns and never holds the full matrix.
    info : dict, optional
        Receives ``hessian_method`` and ``asymmetry``.

    Returns
    -------
    ndarray of float64, shape (n_params, n_params), or (len(index), len(index))
    """
    th = as_theta(theta, potential.n_params, what="theta0")
    m = resolve_method(potential, method)
    d = potential.n_params
    idx = None if index is None else np.asarray(index, dtype=np.int64)
    if idx is not None and (idx.ndim != 1 or (idx.size and (idx.min() < 0 or idx.max() >= d))):
        raise ConfigError(f"index must be a 1-D array of parameter indices in [0, {d})")
    if int(column_block) < 1:
        raise ConfigError(f"column_block = {column_block}; expected a positive integer")
    if m == "fd":
        h = Potential.hessian(potential, th, index=idx)
    else:
        h = _own_hessian_matrix(potential, th, idx, int(column_block), threads)
        n = d if idx is None else idx.shape[0]
        if h.shape != (n, n):
            raise ConfigError(f"{type(potential).__name__}.hessian returned shape {h.shape}; "
                              f"expected ({n}, {n})")
    asym = asymmetry(h)
    if info is not None:
        info["hessian_method"] = m
        info["asymmetry"] = asym
    if symmetrise:
        symmetrise_inplace(h)
    return h


def _own_hessian_matrix(potential: Any, th: FloatArray, idx: Any, column_block: int,
                        threads: int | None) -> FloatArray:
    """The potential's own Hessian; a plugin's ``hessian(theta)`` written before the
    ``index``/``column_block``/``threads`` hints existed is called with ``theta`` alone."""
    import inspect

    params = inspect.signature(potential.hessian).parameters
    if "index" in params:
        return np.array(potential.hessian(th, index=idx, column_block=column_block,
                                          threads=threads), dtype=np.float64)
    h = np.array(potential.hessian(th), dtype=np.float64)
    d = potential.n_params
    if h.shape != (d, d):
        raise ConfigError(f"{type(potential).__name__}.hessian returned shape {h.shape}; "
                          f"expected ({d}, {d})")
    return h if idx is None else np.ascontiguousarray(h[np.ix_(idx, idx)])


def asymmetry(h: FloatArray) -> float:
    """``max |H - H^T| / max |H|`` (0 for a zero matrix), computed in row blocks (no d x d
    temporary)."""
    d = h.shape[0]
    step = 512
    scale = 0.0
    for i0 in range(0, d, step):
        scale = max(scale, float(np.max(np.abs(h[i0:i0 + step]))))
    if scale == 0.0:
        return 0.0
    worst = 0.0
    for i0 in range(0, d, step):
        i1 = min(d, i0 + step)
        worst = max(worst, float(np.max(np.abs(h[i0:i1] - h[:, i0:i1].T))))
    return worst / scale


def symmetrise_inplace(h: FloatArray) -> None:
    """Replace ``h`` by ``(h + h^T) / 2`` in place, in blocks."""
    d = h.shape[0]
    step = 512
    for i0 in range(0, d, step):
        i1 = min(d, i0 + step)
        for j0 in range(i0, d, step):
            j1 = min(d, j0 + step)
            a = 0.5 * (h[i0:i1, j0:j1] + h[j0:j1, i0:i1].T)
            h[i0:i1, j0:j1] = a
            h[j0:j1, i0:i1] = a.T
