"""Exact Hessians and Hessian-vector products of a potential, for the Laplace evidence.

Three schemes, chosen by :func:`hessian` / :func:`hvp` (``method="auto"``):

``"rop"``
    The built-in MLP (:class:`~thermonet.architectures.mlp.MLPPotential`, float64): Pearlmutter's
    R-operator (Neural Computation 6, 147 (1994)), i.e. forward-mode differentiation of the
    backpropagation pass along a direction ``v``. One compiled kernel (:func:`_rop_hvp`) gives
    ``H @ v`` for a block of directions, exact to rounding, for logistic hidden units, linear or
    logistic outputs and the softmax cross-entropy. The dense Hessian is ``H @ e_j`` for every
    basis vector, in blocks of columns spread over threads (each column is computed by one
    thread in a fixed order, so the result does not depend on the number of threads).
``"analytic"``
    Potentials with a closed-form Hessian: the test systems' Gaussian (``diag(k)``), a
    Gaussian prior term (``diag(s/s_i^2)`` added to its base potential's Hessian), and any
    potential with a ``hessian(theta)`` method of its own.
``"fd"``
    Everything else: central differences of the analytic gradient with one Richardson step,
    ``(4 D(h/2) - D(h)) / 3`` (error O(h^4), four gradients per column). This is NOT exact; the
    result's ``details["hessian_method"]`` says "fd" so that no one mistakes it for an exact one.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from thermonet._types import FloatArray
from thermonet.errors import ConfigError
from thermonet.kernels import mlp as k
from thermonet.kernels import threads as kt
from thermonet.kernels._jit import kernel, prange

#: Hessian columns per kernel call when the dense Hessian is assembled
DEFAULT_COLUMN_BLOCK = 128

_METHODS = ("auto", "rop", "analytic", "fd")


# --------------------------------------------------------------------------------------------
# R-operator kernel for the MLP
# --------------------------------------------------------------------------------------------

@kernel
def _any_nonzero(v):
    for i in range(v.shape[0]):
        if v[i] != 0.0:
            return True
    return False


@kernel
def _count_nonzero(v, stop):
    """Number of nonzero entries of ``v``, counting stopped at ``stop``."""
    n = 0
    for i in range(v.shape[0]):
        if v[i] != 0.0:
            n += 1
            if n >= stop:
                return n
    return n


@kernel
def _rop_direction(theta, widths, out_act, xb, acts, gz, ga, ds, v, out, ra, rgz, rgz2):
    """Add ``H_block @ v`` (the Hessian of one data block's energy along ``v``) to ``out``.

    ``acts`` holds the activations ``a_l`` (l = 1..L, row-major ``(rows, n_l)``, concatenated),
    ``gz`` the base back-propagated ``dE/dz_l``, ``ga`` the base ``dE/da_l`` (hidden layers),
    ``ds`` ``dE/ds`` of the softmax inputs ``s`` (the logits). ``ra`` (same layout as ``acts``)
    receives ``R{a_l}``; ``rgz``/``rgz2`` are scratch of ``rows * max width`` entries.
    """
    rows = xb.shape[0]
    n_layers = widths.shape[0] - 1
    n_cls = widths[n_layers]
    # ---- forward R pass: R{z_l} = R{a_{l-1}} W_l^T + a_{l-1} V_l^T + R{b_l}
    p_off = 0
    a_off = 0
    prev_off = -1
    for layer in range(n_layers):
        n_in = widths[layer]
        n_out = widths[layer + 1]
        w = theta[p_off:p_off + n_out * n_in].reshape((n_out, n_in))
        vw_flat = v[p_off:p_off + n_out * n_in]
        vw = vw_flat.reshape((n_out, n_in))
        vb = v[p_off + n_out * n_in:p_off + n_out * n_in + n_out]
        rz = ra[a_off:a_off + rows * n_out].reshape((rows, n_out))
        nnz = _count_nonzero(vw_flat, n_out + 1)
        if nnz == 0:
            rz[:, :] = 0.0
        elif nnz <= n_out:
            # a sparse direction (a basis vector when the dense Hessian is assembled): add
            # the few columns a_prev[:, i] * v_oi instead of a full product
            rz[:, :] = 0.0
            for idx in range(n_out * n_in):
                vv = vw_flat[idx]
                if vv != 0.0:
                    o = idx // n_in
                    i = idx - o * n_in
                    if layer == 0:
                        for r in range(rows):
                            rz[r, o] += xb[r, i] * vv
                    else:
                        for r in range(rows):
                            rz[r, o] += acts[prev_off + r * n_in + i] * vv
        elif layer == 0:
            np.dot(xb, vw.T, rz)
        else:
            a_prev = acts[prev_off:prev_off + rows * n_in].reshape((rows, n_in))
            np.dot(a_prev, vw.T, rz)
        if layer > 0:
            ra_prev = ra[prev_off:prev_off + rows * n_in].reshape((rows, n_in))
            tmp = rgz[:rows * n_out].reshape((rows, n_out))
            np.dot(ra_prev, w.T, tmp)
            for r in range(rows):
                for c in range(n_out):
                    rz[r, c] += tmp[r, c] + vb[c]
        else:
            for r in range(rows):
                for c in range(n_out):
                    rz[r, c] += vb[c]
        if layer < n_layers - 1 or out_act == k.LOGISTIC:
            a = acts[a_off:a_off + rows * n_out].reshape((rows, n_out))
            for r in range(rows):
                for c in range(n_out):
                    rz[r, c] *= a[r, c] * (1.0 - a[r, c])
        p_off += n_out * n_in + n_out
        prev_off = a_off
        a_off += rows * n_out
    out_off = prev_off
    # ---- R{dE/ds} = (diag(p) - p p^T) R{s}, then through a logistic output if any
    s = acts[out_off:out_off + rows * n_cls].reshape((rows, n_cls))
    rs = ra[out_off:out_off + rows * n_cls].reshape((rows, n_cls))
    cur = rgz[:rows * n_cls].reshape((rows, n_cls))
    for r in range(rows):
        m = s[r, 0]
        for c in range(1, n_cls):
            m = max(m, s[r, c])
        tot = 0.0
        for c in range(n_cls):
            tot += np.exp(s[r, c] - m)
        dot = 0.0
        for c in range(n_cls):
            dot += np.exp(s[r, c] - m) / tot * rs[r, c]
        for c in range(n_cls):
            p = np.exp(s[r, c] - m) / tot
            cur[r, c] = p * (rs[r, c] - dot)
    if out_act == k.LOGISTIC:
        for r in range(rows):
            for c in range(n_cls):
                sv = s[r, c]
                cur[r, c] = cur[r, c] * sv * (1.0 - sv) + ds[r, c] * (1.0 - 2.0 * sv) * rs[r, c]
    # ---- backward R pass
    p_end = theta.shape[0]
    a_off = out_off
    g_end = gz.shape[0]
    ga_end = ga.shape[0]
    use_a = True
    for layer in range(n_layers - 1, -1, -1):
        n_in = widths[layer]
        n_out = widths[layer + 1]
        p_off = p_end - (n_out * n_in + n_out)
        g_off = g_end - rows * n_out
        rg = (rgz if use_a else rgz2)[:rows * n_out].reshape((rows, n_out))
        gzl = gz[g_off:g_off + rows * n_out].reshape((rows, n_out))
        ow = out[p_off:p_off + n_out * n_in].reshape((n_out, n_in))
        ob = out[p_off + n_out * n_in:p_off + n_out * n_in + n_out]
        # R{dE/dW_l} = R{g_z}^T a_{l-1} + g_z^T R{a_{l-1}};  R{dE/db_l} = sum_rows R{g_z}
        if layer == 0:
            ow += np.dot(rg.T, xb)
        else:
            prev_off = a_off - rows * n_in
            a_prev = acts[prev_off:prev_off + rows * n_in].reshape((rows, n_in))
            ra_prev = ra[prev_off:prev_off + rows * n_in].reshape((rows, n_in))
            ow += np.dot(rg.T, a_prev) + np.dot(gzl.T, ra_prev)
        for r in range(rows):
            for c in range(n_out):
                ob[c] += rg[r, c]
        if layer > 0:
            w = theta[p_off:p_off + n_out * n_in].reshape((n_out, n_in))
            vw = v[p_off:p_off + n_out * n_in].reshape((n_out, n_in))
            nxt = (rgz2 if use_a else rgz)[:rows * n_in].reshape((rows, n_in))
            # R{g_a} = R{g_z} W + g_z V;  R{g_z'} = R{g_a} a(1-a) + g_a (1-2a) R{a}
            np.dot(rg, w, nxt)
            if _any_nonzero(v[p_off:p_off + n_out * n_in]):
                nxt += np.dot(gzl, vw)
            ga_off = ga_end - rows * n_in
            gal = ga[ga_off:ga_off + rows * n_in].reshape((rows, n_in))
            for r in range(rows):
                for c in range(n_in):
                    a = a_prev[r, c]
                    nxt[r, c] = nxt[r, c] * a * (1.0 - a) + gal[r, c] * (1.0 - 2.0 * a) * \
                        ra_prev[r, c]
            use_a = not use_a
            a_off = prev_off
            ga_end = ga_off
        p_end = p_off
        g_end = g_off


@kernel
def _base_pass(theta, widths, out_act, xb, yb, acts, gz, ga, ds):
    """Forward and backward pass of one data block, keeping every layer's quantities."""
    rows = xb.shape[0]
    n_layers = widths.shape[0] - 1
    n_cls = widths[n_layers]
    p_off = 0
    a_off = 0
    prev_off = -1
    for layer in range(n_layers):
        n_in = widths[layer]
        n_out = widths[layer + 1]
        w = theta[p_off:p_off + n_out * n_in].reshape((n_out, n_in))
        b = theta[p_off + n_out * n_in:p_off + n_out * n_in + n_out]
        z = acts[a_off:a_off + rows * n_out].reshape((rows, n_out))
        if layer == 0:
            np.dot(xb, w.T, z)
        else:
            a_prev = acts[prev_off:prev_off + rows * n_in].reshape((rows, n_in))
            np.dot(a_prev, w.T, z)
        hidden = layer < n_layers - 1 or out_act == k.LOGISTIC
        for r in range(rows):
            for c in range(n_out):
                zz = z[r, c] + b[c]
                z[r, c] = 1.0 / (1.0 + np.exp(-zz)) if hidden else zz
        p_off += n_out * n_in + n_out
        prev_off = a_off
        a_off += rows * n_out
    out_off = prev_off
    s = acts[out_off:out_off + rows * n_cls].reshape((rows, n_cls))
    e = 0.0
    for r in range(rows):
        m = s[r, 0]
        for c in range(1, n_cls):
            m = max(m, s[r, c])
        tot = 0.0
        for c in range(n_cls):
            tot += np.exp(s[r, c] - m)
        e += m + np.log(tot) - s[r, yb[r]]
        for c in range(n_cls):
            ds[r, c] = np.exp(s[r, c] - m) / tot
        ds[r, yb[r]] -= 1.0
    # backward
    g_end = gz.shape[0]
    g_off = g_end - rows * n_cls
    gl = gz[g_off:g_off + rows * n_cls].reshape((rows, n_cls))
    for r in range(rows):
        for c in range(n_cls):
            gl[r, c] = ds[r, c] * (s[r, c] * (1.0 - s[r, c]) if out_act == k.LOGISTIC else 1.0)
    p_end = theta.shape[0]
    a_off = out_off
    ga_end = ga.shape[0]
    for layer in range(n_layers - 1, 0, -1):
        n_in = widths[layer]
        n_out = widths[layer + 1]
        p_off = p_end - (n_out * n_in + n_out)
        w = theta[p_off:p_off + n_out * n_in].reshape((n_out, n_in))
        gzl = gz[g_off:g_off + rows * n_out].reshape((rows, n_out))
        ga_off = ga_end - rows * n_in
        gal = ga[ga_off:ga_off + rows * n_in].reshape((rows, n_in))
        np.dot(gzl, w, gal)
        prev_off = a_off - rows * n_in
        a_prev = acts[prev_off:prev_off + rows * n_in].reshape((rows, n_in))
        g_off -= rows * n_in
        gprev = gz[g_off:g_off + rows * n_in].reshape((rows, n_in))
        for r in range(rows):
            for c in range(n_in):
                a = a_prev[r, c]
                gprev[r, c] = gal[r, c] * a * (1.0 - a)
        a_off = prev_off
        ga_end = ga_off
        p_end = p_off
    return e


@kernel(parallel=True)
def _rop_hvp(theta, widths, out_act, x, y, block, v_kp, out_kp):
    """``out_kp[k] = H @ v_kp[k]`` for every row k, H the Hessian of the summed cross-entropy.

    Parameters
    ----------
    theta : ndarray of float64, shape (n_params,)
    widths, out_act, x, y, block : as in :func:`thermonet.kernels.mlp.loss`
    v_kp : ndarray of float64, shape (K, n_params), C-contiguous
    out_kp : ndarray of float64, shape (K, n_params), overwritten

    The data blocks are processed in order; within a block the K directions are spread over
    Numba's threads, each direction's result accumulated by one thread in block order, so the
    result is bitwise independent of the number of threads.
    """
    n = x.shape[0]
    n_layers = widths.shape[0] - 1
    total = 0
    widest = 0
    for layer in range(1, n_layers + 1):
        total += widths[layer]
        widest = max(widest, widths[layer])
    hidden_total = total - widths[n_layers]
    n_dir = v_kp.shape[0]
    for kk in range(n_dir):
        out_kp[kk, :] = 0.0
    nb = (n + block - 1) // block
    for blk in range(nb):
        r0 = blk * block
        r1 = min(n, r0 + block)
        rows = r1 - r0
        xb = x[r0:r1]
        acts = np.empty(rows * total)
        gz = np.empty(rows * total)
        ga = np.empty(max(rows * hidden_total, 1))
        ds = np.empty((rows, widths[n_layers]))
        _base_pass(theta, widths, out_act, xb, y[r0:r1], acts, gz, ga, ds)
        for kk in prange(n_dir):
            ra = np.empty(rows * total)
            rgz = np.empty(rows * widest)
            rgz2 = np.empty(rows * widest)
            _rop_direction(theta, widths, out_act, xb, acts, gz, ga, ds, v_kp[kk],
                           out_kp[kk], ra, rgz, rgz2)


# --------------------------------------------------------------------------------------------
# Python layer
# --------------------------------------------------------------------------------------------

def _is_mlp(potential: Any) -> bool:
    from thermonet.architectures.mlp import MLPPotential

    return isinstance(potential, MLPPotential)


def _analytic_hessian(potential: Any, theta: FloatArray) -> FloatArray | None:
    """The closed-form Hessian of ``potential`` if it has one, else None."""
    from thermonet.testsystems import FlatPotential, GaussianPotential

    if isinstance(potential, GaussianPotential):
        return np.diag(np.asarray(potential.k, dtype=np.float64))
    if isinstance(potential, FlatPotential):
        return np.zeros((potential.n_params, potential.n_params))
    own = getattr(potential, "hessian", None)
    if callable(own):
        h = np.array(own(theta), dtype=np.float64)
        d = potential.n_params
        if h.shape != (d, d):
            raise ConfigError(f"{type(potential).__name__}.hessian returned shape {h.shape}; "
                              f"expected ({d}, {d})")
        return h
    return None


def _prior_diagonal(potential: Any) -> FloatArray | None:
    """``s / s_i^2`` if ``potential`` adds a Gaussian prior term to a base potential."""
    from thermonet.priors import PriorPotential

    if isinstance(potential, PriorPotential):
        return potential.scale / potential.prior.std ** 2
    return None


def resolve_method(potential: Any, method: str = "auto") -> str:
    """The Hessian scheme :func:`hessian` will use for ``potential``: rop, analytic or fd."""
    if method not in _METHODS:
        raise ConfigError(f"Hessian method {method!r} is not known; expected one of {_METHODS}")
    if method != "auto":
        if method == "rop" and not (_is_mlp(potential)
                                    and potential.dtype == np.dtype(np.float64)):
            raise ConfigError(f"Hessian method 'rop' needs the built-in float64 MLP potential; "
                              f"got {type(potential).__name__}: use method='auto' or 'fd'")
        if method == "analytic" and resolve_method(potential) != "analytic":
            raise ConfigError(f"{type(potential).__name__} has no closed-form Hessian; use "
                              "method='auto' or 'fd'")
        return method
    if _is_mlp(potential):
        if potential.dtype != np.dtype(np.float64):
            raise ConfigError("the Laplace evidence needs a float64 potential; got a "
                              f"{potential.dtype} MLP: build it with dtype=float64 (the default)")
        return "rop"
    from thermonet.priors import PriorPotential
    from thermonet.testsystems import FlatPotential, GaussianPotential

    if isinstance(potential, (GaussianPotential, FlatPotential)) or callable(
            getattr(potential, "hessian", None)):
        return "analytic"
    if isinstance(potential, PriorPotential):
        return resolve_method(potential.base)
    return "fd"


def _theta64(potential: Any, theta: Any) -> FloatArray:
    from thermonet.api import as_theta

    return as_theta(theta, potential.n_params, what="theta0")


def _fd_steps(theta: FloatArray) -> FloatArray:
    # optimal step of a Richardson-extrapolated central difference ~ eps^(1/5)
    return 1e-3 * np.maximum(1.0, np.abs(theta))


def _grad(potential: Any, theta: FloatArray) -> FloatArray:
    _, g = potential.energy_and_grad(theta)
    return np.array(g, dtype=np.float64)


def _fd_hvp_one(potential: Any, theta: FloatArray, v: FloatArray, h: float) -> FloatArray:
    def d(step: float) -> FloatArray:
        return (_grad(potential, theta + step * v) - _grad(potential, theta - step * v)) \
            / (2.0 * step)

    return (4.0 * d(0.5 * h) - d(h)) / 3.0


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
        Threads of the R-operator kernel (default: the potential's ``threads``); the result is
        bitwise the same for any number.

    Returns
    -------
    ndarray of float64, same shape as ``v_kp``
    """
    th = _theta64(potential, theta)
    v = np.asarray(v_kp, dtype=np.float64)
    single = v.ndim == 1
    v = np.ascontiguousarray(np.atleast_2d(v))
    if v.shape[1] != potential.n_params:
        raise ConfigError(f"directions have {v.shape[1]} components; expected "
                          f"{potential.n_params}")
    prior_diag = _prior_diagonal(potential)
    if prior_diag is not None:
        # a Gaussian prior term: the base potential's products plus diag(s / s_i^2) v
        out = hvp(potential.base, th, v, method=method, threads=threads) + v * prior_diag
        return out[0] if single else out
    m = resolve_method(potential, method)
    if m == "rop":
        out = np.empty_like(v)
        with kt.limit(_threads(potential) if threads is None else max(1, int(threads))):
            _rop_hvp(th, potential._widths, potential._out, potential.x, potential.y,
                     potential.block, v, out)
    elif m == "analytic":
        out = v @ _analytic_hessian(potential, th).T
    else:
        out = np.empty_like(v)
        for i in range(v.shape[0]):
            nv = float(np.linalg.norm(v[i]))
            if nv == 0.0:
                out[i] = 0.0
                continue
            h = 1e-3 * max(1.0, float(np.max(np.abs(th))))
            out[i] = nv * _fd_hvp_one(potential, th, v[i] / nv, h)
    return out[0] if single else out


def _threads(potential: Any) -> int:
    return max(1, int(getattr(potential, "threads", 1)))


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
    th = _theta64(potential, theta)
    m = resolve_method(potential, method)
    d = potential.n_params
    idx = np.arange(d) if index is None else np.asarray(index, dtype=np.int64)
    if idx.ndim != 1 or (idx.size and (idx.min() < 0 or idx.max() >= d)):
        raise ConfigError(f"index must be a 1-D array of parameter indices in [0, {d})")
    n = idx.shape[0]
    prior_diag = _prior_diagonal(potential)
    if prior_diag is not None:
        # a Gaussian prior term adds diag(s / s_i^2) to the base potential's Hessian
        h = hessian(potential.base, th, method=method, column_block=column_block,
                    threads=threads, symmetrise=symmetrise, index=index, info=info)
        h[np.diag_indices_from(h)] += prior_diag[idx]
        return h
    if m == "analytic":
        h = _analytic_hessian(potential, th)
        assert h is not None
        if index is not None:
            h = np.ascontiguousarray(h[np.ix_(idx, idx)])
    elif m == "rop":
        if int(column_block) < 1:
            raise ConfigError(f"column_block = {column_block}; expected a positive integer")
        nthr = _threads(potential) if threads is None else max(1, int(threads))
        h = np.empty((n, n))
        cb = min(int(column_block), max(n, 1))
        eye = np.zeros((cb, d))
        col = np.empty((cb, d))
        with kt.limit(nthr):
            for j0 in range(0, n, cb):
                j1 = min(n, j0 + cb)
                e = eye[:j1 - j0]
                e[:] = 0.0
                e[np.arange(j1 - j0), idx[j0:j1]] = 1.0
                # row j of the result holds H e_j = column j (H is symmetric up to rounding)
                _rop_hvp(th, potential._widths, potential._out, potential.x, potential.y,
                         potential.block, e, col[:j1 - j0])
                h[j0:j1] = col[:j1 - j0][:, idx] if index is not None else col[:j1 - j0]
    else:
        h = np.empty((n, n))
        steps = _fd_steps(th)
        for jj, j in enumerate(idx):
            v = np.zeros(d)
            v[j] = 1.0
            h[jj] = _fd_hvp_one(potential, th, v, float(steps[j]))[idx]
    asym = _asymmetry(h)
    if info is not None:
        info["hessian_method"] = m
        info["asymmetry"] = asym
    if symmetrise:
        _symmetrise_inplace(h)
    return h


def _asymmetry(h: FloatArray) -> float:
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


def _symmetrise_inplace(h: FloatArray) -> None:
    d = h.shape[0]
    step = 512
    for i0 in range(0, d, step):
        i1 = min(d, i0 + step)
        for j0 in range(i0, d, step):
            j1 = min(d, j0 + step)
            a = 0.5 * (h[i0:i1, j0:j1] + h[j0:j1, i0:i1].T)
            h[i0:i1, j0:j1] = a
            h[j0:j1, i0:i1] = a.T
