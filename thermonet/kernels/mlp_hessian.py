"""Exact Hessian-vector products of the MLP energy: Pearlmutter's R-operator.

Forward-mode differentiation of the backpropagation pass along a direction ``v`` (B. A.
Pearlmutter, Neural Computation 6, 147 (1994)) gives ``H @ v`` exact to rounding for logistic
hidden units, linear or logistic outputs and the softmax cross-entropy. :func:`rop_hvp` does a
block of directions, each computed by one thread in a fixed order, so the result does not
depend on the number of threads. Callers go through
:meth:`thermonet.architectures.mlp.MLPPotential.hvp`.
"""

from __future__ import annotations

import numpy as np

from thermonet.kernels import mlp as k
from thermonet.kernels.jit import kernel, prange


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
def rop_hvp(theta, widths, out_act, x, y, block, v_kp, out_kp):
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
