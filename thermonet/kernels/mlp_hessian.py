"""Exact Hessian-vector products of the MLP energy: Pearlmutter's R-operator.

Forward-mode differentiation of the backpropagation pass along a direction ``v`` (B. A.
Pearlmutter, Neural Computation 6, 147 (1994)) gives ``H @ v`` exact to rounding for logistic or
tanh hidden units, linear or logistic outputs, and the data term that fits the type of the
targets (as in :mod:`thermonet.kernels.mlp`): the softmax cross-entropy of int64 labels or half
the squared error of float targets (:mod:`thermonet.kernels.losses`,
:mod:`thermonet.kernels.mlp_hessian_terms`). :func:`rop_hvp`
does a block of directions, each computed by one thread in a fixed order, so the result does
not depend on the number of threads. Callers go through
:meth:`thermonet.architectures.mlp.MLPPotential.hvp` and
:meth:`thermonet.architectures.regression.RegressionPotential.hvp`.

With ``a = phi(z)`` the backward R pass needs ``phi''(z) R{z} = (phi''/phi') R{a}``:
``phi''/phi' = 1 - 2a`` for the logistic unit (``phi' = a(1 - a)``) and ``-2a`` for tanh
(``phi' = 1 - a^2``).
"""

from __future__ import annotations

import numpy as np

from thermonet.kernels import mlp as k
from thermonet.kernels.jit import kernel, prange
from thermonet.kernels.losses import block_data_term
from thermonet.kernels.mlp_hessian_terms import data_term_curvature
from thermonet.kernels.threads import limit


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
def _rz_direct(xb, acts, prev_off, vw_flat, rz, layer, n_in):
    """``rz`` = ``a_{l-1} V_l^T`` (``x`` for the first layer), ``V_l`` = ``vw_flat`` as
    ``(n_out, n_in)``."""
    rows, n_out = rz.shape
    vw = vw_flat.reshape((n_out, n_in))
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


@kernel
def _r_forward(theta, block_net, v, acts, ra, rgz):
    """The forward R pass, ``R{z_l} = R{a_{l-1}} W_l^T + a_{l-1} V_l^T + R{b_l}``, through
    each non-linearity into ``ra``; returns the offset of the outputs' ``R{s}``."""
    widths, out_act, xb, _ = block_net
    tanh = (out_act & k.HIDDEN_TANH) != 0
    logistic_out = (out_act & k.OUTPUT_MASK) == k.LOGISTIC
    rows = xb.shape[0]
    n_layers = widths.shape[0] - 1
    p_off = 0
    a_off = 0
    prev_off = -1
    for layer in range(n_layers):
        n_in = widths[layer]
        n_out = widths[layer + 1]
        w = theta[p_off:p_off + n_out * n_in].reshape((n_out, n_in))
        vb = v[p_off + n_out * n_in:p_off + n_out * n_in + n_out]
        rz = ra[a_off:a_off + rows * n_out].reshape((rows, n_out))
        _rz_direct(xb, acts, prev_off, v[p_off:p_off + n_out * n_in], rz, layer, n_in)
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
        a = acts[a_off:a_off + rows * n_out].reshape((rows, n_out))
        if layer < n_layers - 1 and tanh:
            for r in range(rows):
                for c in range(n_out):
                    rz[r, c] *= 1.0 - a[r, c] * a[r, c]
        elif layer < n_layers - 1 or logistic_out:
            for r in range(rows):
                for c in range(n_out):
                    rz[r, c] *= a[r, c] * (1.0 - a[r, c])
        p_off += n_out * n_in + n_out
        prev_off = a_off
        a_off += rows * n_out
    return prev_off


@kernel
def _r_hidden(nxt, a_prev, gal, ra_prev, tanh):
    """``R{g_z'} = R{g_a} phi' + g_a (phi''/phi') R{a}`` in place of ``R{g_a}`` (``nxt``)."""
    rows, n_in = nxt.shape
    if tanh:
        for r in range(rows):
            for c in range(n_in):
                a = a_prev[r, c]
                nxt[r, c] = nxt[r, c] * (1.0 - a * a) - gal[r, c] * (2.0 * a) * \
                    ra_prev[r, c]
    else:
        for r in range(rows):
            for c in range(n_in):
                a = a_prev[r, c]
                nxt[r, c] = nxt[r, c] * a * (1.0 - a) + gal[r, c] * (1.0 - 2.0 * a) * \
                    ra_prev[r, c]


@kernel
def _r_backward(theta, block_net, v, out, base, scratch, out_off):
    """The backward R pass from the outputs' ``R{dE/dz}`` (in ``rgz``), adding each layer's
    ``R{dE/dW_l}`` and ``R{dE/db_l}`` to ``out``."""
    widths, out_act, xb, _ = block_net
    tanh = (out_act & k.HIDDEN_TANH) != 0
    acts, gz, ga, _ = base
    ra, rgz, rgz2 = scratch
    rows = xb.shape[0]
    n_layers = widths.shape[0] - 1
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
            # R{g_a} = R{g_z} W + g_z V
            np.dot(rg, w, nxt)
            if _any_nonzero(v[p_off:p_off + n_out * n_in]):
                nxt += np.dot(gzl, vw)
            ga_off = ga_end - rows * n_in
            gal = ga[ga_off:ga_off + rows * n_in].reshape((rows, n_in))
            _r_hidden(nxt, a_prev, gal, ra_prev, tanh)
            use_a = not use_a
            a_off = prev_off
            ga_end = ga_off
        p_end = p_off
        g_end = g_off


@kernel
def _rop_direction(theta, block_net, base, v, out, scratch):
    """Add ``H_block @ v`` (the Hessian of one data block's energy along ``v``) to ``out``.

    ``block_net`` is ``(widths, out_act, xb, yb)``, ``base`` the base pass's ``(acts, gz, ga,
    ds)`` (:func:`_base_pass`) and ``scratch`` ``(ra, rgz, rgz2)``. ``acts`` holds the
    activations ``a_l`` (l = 1..L, row-major ``(rows, n_l)``, concatenated), ``gz`` the base
    back-propagated ``dE/dz_l``, ``ga`` the base ``dE/da_l`` (hidden layers), ``ds``
    ``dE/ds`` of the outputs ``s`` (the logits); ``yb`` (the block's targets) selects the data
    term. ``ra`` (same layout as ``acts``) receives ``R{a_l}``; ``rgz``/``rgz2`` are
    scratch of ``rows * max width`` entries.
    """
    widths, out_act, xb, yb = block_net
    acts, _, _, ds = base
    ra, rgz, _ = scratch
    rows = xb.shape[0]
    n_cls = widths[widths.shape[0] - 1]
    logistic_out = (out_act & k.OUTPUT_MASK) == k.LOGISTIC
    out_off = _r_forward(theta, block_net, v, acts, ra, rgz)
    # ---- R{dE/ds} = L R{s} (the data term's curvature), then through a logistic output if any
    s = acts[out_off:out_off + rows * n_cls].reshape((rows, n_cls))
    rs = ra[out_off:out_off + rows * n_cls].reshape((rows, n_cls))
    cur = rgz[:rows * n_cls].reshape((rows, n_cls))
    data_term_curvature(s, yb, rs, cur)
    if logistic_out:
        for r in range(rows):
            for c in range(n_cls):
                sv = s[r, c]
                cur[r, c] = cur[r, c] * sv * (1.0 - sv) + ds[r, c] * (1.0 - 2.0 * sv) * rs[r, c]
    _r_backward(theta, block_net, v, out, base, scratch, out_off)


@kernel
def _base_pass(theta, block_net, base):
    """Forward and backward pass of one data block, keeping every layer's quantities in
    ``base = (acts, gz, ga, ds)``; ``block_net`` is ``(widths, out_act, xb, yb)``."""
    widths, out_act, xb, yb = block_net
    acts, gz, ga, ds = base
    rows = xb.shape[0]
    n_layers = widths.shape[0] - 1
    n_cls = widths[n_layers]
    tanh = (out_act & k.HIDDEN_TANH) != 0
    logistic_out = (out_act & k.OUTPUT_MASK) == k.LOGISTIC
    p_off = 0
    a_off = 0
    prev_off = -1
    for layer in range(n_layers):
        n_in = widths[layer]
        n_out = widths[layer + 1]
        w, b, z = k.layer_views(theta, acts, p_off, a_off, rows, n_in, n_out)
        if layer == 0:
            np.dot(xb, w.T, z)
        else:
            a_prev = acts[prev_off:prev_off + rows * n_in].reshape((rows, n_in))
            np.dot(a_prev, w.T, z)
        if layer < n_layers - 1 and tanh:
            for r in range(rows):
                for c in range(n_out):
                    z[r, c] = np.tanh(z[r, c] + b[c])
        else:
            hidden = layer < n_layers - 1 or logistic_out
            for r in range(rows):
                for c in range(n_out):
                    zz = z[r, c] + b[c]
                    z[r, c] = 1.0 / (1.0 + np.exp(-zz)) if hidden else zz
        p_off += n_out * n_in + n_out
        prev_off = a_off
        a_off += rows * n_out
    out_off = prev_off
    s = acts[out_off:out_off + rows * n_cls].reshape((rows, n_cls))
    e = block_data_term(s, yb, ds, True)
    # backward
    g_end = gz.shape[0]
    g_off = g_end - rows * n_cls
    gl = gz[g_off:g_off + rows * n_cls].reshape((rows, n_cls))
    for r in range(rows):
        for c in range(n_cls):
            gl[r, c] = ds[r, c] * (s[r, c] * (1.0 - s[r, c]) if logistic_out else 1.0)
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
        if tanh:
            for r in range(rows):
                for c in range(n_in):
                    a = a_prev[r, c]
                    gprev[r, c] = gal[r, c] * (1.0 - a * a)
        else:
            for r in range(rows):
                for c in range(n_in):
                    a = a_prev[r, c]
                    gprev[r, c] = gal[r, c] * a * (1.0 - a)
        a_off = prev_off
        ga_end = ga_off
        p_end = p_off
    return e


@kernel(parallel=True)
def rop_hvp(theta, net, v_kp, out_kp):
    """``out_kp[k] = H @ v_kp[k]`` for every row k, H the Hessian of the data term (the summed
    cross-entropy of int64 labels ``y``, half the summed squared error of float targets ``y``
    of shape ``(n, n_out)``).

    Parameters
    ----------
    theta : ndarray of float64, shape (n_params,)
    net : ``tuple(thermonet.kernels.mlp.Net(widths, out_act, x, y, block))``
    v_kp : ndarray of float64, shape (K, n_params), C-contiguous
    out_kp : ndarray of float64, shape (K, n_params), overwritten

    The data blocks are processed in order; within a block the K directions are spread over
    Numba's threads, each direction's result accumulated by one thread in block order, so the
    result is bitwise independent of the number of threads.
    """
    widths, out_act, x, y, block = net
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
        block_net = (widths, out_act, xb, y[r0:r1])
        base = (acts, gz, ga, ds)
        _base_pass(theta, block_net, base)
        for kk in prange(n_dir):
            ra = np.empty(rows * total)
            rgz = np.empty(rows * widest)
            rgz2 = np.empty(rows * widest)
            _rop_direction(theta, block_net, base, v_kp[kk], out_kp[kk], (ra, rgz, rgz2))


def hvp(theta, net, v_kp, threads):
    """``H @ v`` of the data term for the rows of ``v_kp`` by :func:`rop_hvp` (float64, shape
    ``(K, n_params)``), with ``threads`` Numba threads; bitwise the same for any number.
    ``net`` is a :class:`thermonet.kernels.mlp.Net`."""
    v = np.ascontiguousarray(v_kp, dtype=np.float64)
    out = np.empty_like(v)
    with limit(max(1, int(threads))):
        rop_hvp(theta, tuple(net), v, out)
    return out


def hessian(theta, net, index, column_block, threads):
    """The data term's exact Hessian (not symmetrised) as ``H e_j`` for every requested column
    ``j``, ``column_block`` columns per :func:`rop_hvp` call; only the rows and columns
    ``index`` (an int array, or None for all); ``net`` a :class:`thermonet.kernels.mlp.Net`.
    Bitwise the same for any ``threads``."""
    net = tuple(net)
    d = theta.shape[0]
    idx = np.arange(d) if index is None else np.asarray(index, dtype=np.int64)
    n = idx.shape[0]
    h = np.empty((n, n))
    cb = min(int(column_block), max(n, 1))
    eye = np.zeros((cb, d))
    col = np.empty((cb, d))
    with limit(max(1, int(threads))):
        for j0 in range(0, n, cb):
            j1 = min(n, j0 + cb)
            e = eye[:j1 - j0]
            e[:] = 0.0
            e[np.arange(j1 - j0), idx[j0:j1]] = 1.0
            # row j of the result holds H e_j = column j (H is symmetric up to rounding)
            rop_hvp(theta, net, e, col[:j1 - j0])
            h[j0:j1] = col[:j1 - j0][:, idx] if index is not None else col[:j1 - j0]
    return h
