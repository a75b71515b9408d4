"""Fully connected networks on a flat parameter vector: energy and gradient kernels.

Layout (the paper's code, original-code-spec.md §1.2): for each layer in order (hidden 1, ...,
hidden H, output), the weights ``W`` of shape ``(out, in)`` flattened row-major
(``index = o*in + i``), then the biases ``b`` (length ``out``).

The network is described by data, not by code, so one compiled kernel serves M(1), M(3), M(3*)
and every user-defined MLP:

``widths`` : int64 array ``[n_in, h_1, ..., h_H, n_out]``
``out_act`` : 0 for a linear output layer (M1, M3), 1 for a logistic output layer (M3*)

Hidden units are logistic. The energy is the summed cross-entropy
``E(D|w) = sum_n [logsumexp(z_n) - z_n[y_n]]`` (not a mean), computed with the max-shift
log-sum-exp and accumulated in float64 whatever the dtype of the arrays.

Blocks
------
The data set is processed in blocks of ``block`` rows. Each block's gradient is a separate
partial sum, and partials are added in block order. The serial kernel
(:func:`loss_and_grad`) and the threaded one (:func:`loss_and_grad_parallel`) perform exactly
the same floating-point operations in the same order, so their results are bitwise identical
for any number of threads. The block size is part of the numerical recipe; the thread count is
not.

Scratch
-------
Kernels take a caller-owned ``work`` array (see :func:`work_size`) so that no large array is
allocated inside a sampling loop.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from thermonet.kernels._jit import kernel

LINEAR = 0
LOGISTIC = 1


@kernel
def n_params(widths):
    """Number of parameters of the MLP ``widths`` (weights plus biases of every layer)."""
    n = 0
    for layer in range(widths.shape[0] - 1):
        n += (widths[layer] + 1) * widths[layer + 1]
    return n


@kernel
def fan_in(widths, out):
    """Write the fan-in, *including the bias*, of the neuron each parameter feeds into.

    ``out`` (int64, shape ``(n_params,)``) is overwritten. This is ``k_i`` of the paper's
    Sec. 3.2: 257 for every parameter of the first layer of a 256-input network.
    """
    pos = 0
    for layer in range(widths.shape[0] - 1):
        k = widths[layer] + 1
        m = k * widths[layer + 1]
        for i in range(m):
            out[pos + i] = k
        pos += m


@kernel
def work_size(widths, block):
    """Length of the scratch array one block of ``block`` rows needs."""
    total = 0
    widest = 0
    for layer in range(1, widths.shape[0]):
        total += widths[layer]
        widest = max(widest, widths[layer])
    return block * (total + 2 * widest)


@kernel
def n_blocks(n_data, block):
    """Number of blocks of at most ``block`` rows covering ``n_data`` rows (0 for no data)."""
    return (n_data + block - 1) // block


@kernel
def _sigmoid_inplace(z, bias):
    """``z[n, j] <- 1 / (1 + exp(-(z[n, j] + bias[j])))``, in place."""
    rows, cols = z.shape
    for r in range(rows):
        for c in range(cols):
            v = z[r, c] + bias[c]
            z[r, c] = 1.0 / (1.0 + math.exp(-v))


@kernel
def _add_bias(z, bias):
    rows, cols = z.shape
    for r in range(rows):
        for c in range(cols):
            z[r, c] += bias[c]


@kernel
def _forward(theta, widths, out_act, xb, work):
    """Forward pass of one block; returns the offset of the output activations in ``work``.

    Activations of layer ``l`` (after its non-linearity) are stored row-major in ``work``.
    """
    rows = xb.shape[0]
    n_layers = widths.shape[0] - 1
    p_off = 0
    a_off = 0
    prev_off = -1
    for layer in range(n_layers):
        n_in = widths[layer]
        n_out = widths[layer + 1]
        w = theta[p_off:p_off + n_out * n_in].reshape((n_out, n_in))
        b = theta[p_off + n_out * n_in:p_off + n_out * n_in + n_out]
        z = work[a_off:a_off + rows * n_out].reshape((rows, n_out))
        if layer == 0:
            np.dot(xb, w.T, z)
        else:
            a_prev = work[prev_off:prev_off + rows * n_in].reshape((rows, n_in))
            np.dot(a_prev, w.T, z)
        if layer < n_layers - 1 or out_act == LOGISTIC:
            _sigmoid_inplace(z, b)
        else:
            _add_bias(z, b)
        p_off += n_out * n_in + n_out
        prev_off = a_off
        a_off += rows * n_out
    return prev_off


@kernel
def _block_energy_and_delta(logits, yb, delta):
    """Cross-entropy of one block; writes dE/dlogits (softmax - one-hot) to ``delta``.

    The sum is accumulated in float64 from float64 copies of the logits.
    """
    rows, n_cls = logits.shape
    e = 0.0
    for r in range(rows):
        m = -np.inf
        for c in range(n_cls):
            v = np.float64(logits[r, c])
            if v > m:
                m = v
        if not math.isfinite(m):
            # +inf or NaN logits: a non-finite energy, rejected by the caller.
            e += np.nan if m != -np.inf else np.inf
            for c in range(n_cls):
                delta[r, c] = np.nan
            continue
        s = 0.0
        for c in range(n_cls):
            s += math.exp(np.float64(logits[r, c]) - m)
        lse = m + math.log(s)
        e += lse - np.float64(logits[r, yb[r]])
        for c in range(n_cls):
            delta[r, c] = math.exp(np.float64(logits[r, c]) - m) / s
        delta[r, yb[r]] -= 1.0
    return e


@kernel
def _block_energy(logits, yb):
    rows, n_cls = logits.shape
    e = 0.0
    for r in range(rows):
        m = -np.inf
        for c in range(n_cls):
            v = np.float64(logits[r, c])
            if v > m:
                m = v
        if not math.isfinite(m):
            e += np.nan if m != -np.inf else np.inf
            continue
        s = 0.0
        for c in range(n_cls):
            s += math.exp(np.float64(logits[r, c]) - m)
        e += m + math.log(s) - np.float64(logits[r, yb[r]])
    return e


@kernel
def _block_loss_and_grad(theta, widths, out_act, xb, yb, work, grad):
    """Energy of one block and its gradient written (not added) to ``grad``."""
    rows = xb.shape[0]
    n_layers = widths.shape[0] - 1
    out_off = _forward(theta, widths, out_act, xb, work)
    n_cls = widths[n_layers]
    widest = 0
    total = 0
    for layer in range(1, n_layers + 1):
        widest = max(widest, widths[layer])
        total += widths[layer]
    d_off = rows * total
    logits = work[out_off:out_off + rows * n_cls].reshape((rows, n_cls))
    delta = work[d_off:d_off + rows * n_cls].reshape((rows, n_cls))
    e = _block_energy_and_delta(logits, yb, delta)
    if out_act == LOGISTIC:
        for r in range(rows):
            for c in range(n_cls):
                a = logits[r, c]
                delta[r, c] *= a * (1.0 - a)
    # Backward, from the output layer down. ``cur`` and ``nxt`` alternate between the two
    # delta buffers at the end of ``work``.
    p_end = theta.shape[0]
    a_off = out_off
    cur = d_off
    nxt = d_off + rows * widest
    for layer in range(n_layers - 1, -1, -1):
        n_in = widths[layer]
        n_out = widths[layer + 1]
        p_off = p_end - (n_out * n_in + n_out)
        dz = work[cur:cur + rows * n_out].reshape((rows, n_out))
        gw = grad[p_off:p_off + n_out * n_in].reshape((n_out, n_in))
        if layer == 0:
            np.dot(dz.T, xb, gw)
        else:
            prev_off = a_off - rows * n_in
            a_prev = work[prev_off:prev_off + rows * n_in].reshape((rows, n_in))
            np.dot(dz.T, a_prev, gw)
        gb = grad[p_off + n_out * n_in:p_off + n_out * n_in + n_out]
        for c in range(n_out):
            gb[c] = 0.0
        for r in range(rows):
            for c in range(n_out):
                gb[c] += dz[r, c]
        if layer > 0:
            w = theta[p_off:p_off + n_out * n_in].reshape((n_out, n_in))
            prev_off = a_off - rows * n_in
            a_prev = work[prev_off:prev_off + rows * n_in].reshape((rows, n_in))
            da = work[nxt:nxt + rows * n_in].reshape((rows, n_in))
            np.dot(dz, w, da)
            for r in range(rows):
                for c in range(n_in):
                    a = a_prev[r, c]
                    da[r, c] *= a * (1.0 - a)
            cur, nxt = nxt, cur
            a_off = prev_off
        p_end = p_off
    return e


@kernel
def loss(theta, widths, out_act, x, y, block, work):
    """Energy ``E(D|w)`` (summed cross-entropy, float64) of the MLP at ``theta``.

    Parameters
    ----------
    theta : ndarray of float64 or float32, shape (n_params,)
    widths : ndarray of int64, shape (n_layers + 1,)
    out_act : int, 0 (linear) or 1 (logistic)
    x : ndarray, same dtype as theta, shape (n_data, widths[0]), C-contiguous
    y : ndarray of int64, shape (n_data,), labels in ``[0, widths[-1])``
    block : int, rows per block
    work : ndarray, same dtype as theta, shape (>= work_size(widths, block),)

    Returns
    -------
    float
        The energy in nats; NaN or inf if the forward pass overflowed.
    """
    n = x.shape[0]
    n_layers = widths.shape[0] - 1
    n_cls = widths[n_layers]
    e = 0.0
    for blk in range(n_blocks(n, block)):
        r0 = blk * block
        r1 = min(n, r0 + block)
        rows = r1 - r0
        out_off = _forward(theta, widths, out_act, x[r0:r1], work)
        logits = work[out_off:out_off + rows * n_cls].reshape((rows, n_cls))
        e += _block_energy(logits, y[r0:r1])
    return e


@kernel
def loss_and_grad(theta, widths, out_act, x, y, block, work, partial, grad):
    """Energy and gradient in one pass, serially over blocks.

    ``grad`` (shape ``(n_params,)``) is overwritten with dE/dtheta; ``partial`` is scratch of
    shape ``(n_params,)``. Returns the energy (float64). Other arguments as in :func:`loss`.
    """
    n = x.shape[0]
    nb = n_blocks(n, block)
    if nb == 0:
        grad[:] = 0.0
        return 0.0
    e = _block_loss_and_grad(theta, widths, out_act, x[0:min(n, block)], y[0:min(n, block)],
                             work, grad)
    for blk in range(1, nb):
        r0 = blk * block
        r1 = min(n, r0 + block)
        e += _block_loss_and_grad(theta, widths, out_act, x[r0:r1], y[r0:r1], work, partial)
        for i in range(grad.shape[0]):
            grad[i] += partial[i]
    return e


@kernel(parallel=True)
def loss_and_grad_parallel(theta, widths, out_act, x, y, block, work_b, partial_b, grad):
    """As :func:`loss_and_grad`, with the blocks spread over Numba's threads.

    ``work_b`` has shape ``(n_blocks, work_size)`` and ``partial_b`` shape
    ``(n_blocks, n_params)``: one row per block, so threads never share scratch. The partial
    gradients are then summed in block order, which makes the result bitwise identical to the
    serial kernel.
    """
    n = x.shape[0]
    nb = n_blocks(n, block)
    e_b = np.zeros(max(nb, 1))
    for blk in numba.prange(nb):
        r0 = blk * block
        r1 = min(n, r0 + block)
        e_b[blk] = _block_loss_and_grad(theta, widths, out_act, x[r0:r1], y[r0:r1],
                                        work_b[blk], partial_b[blk])
    if nb == 0:
        grad[:] = 0.0
        return 0.0
    e = e_b[0]
    for i in range(grad.shape[0]):
        grad[i] = partial_b[0, i]
    for blk in range(1, nb):
        e += e_b[blk]
        for i in range(grad.shape[0]):
            grad[i] += partial_b[blk, i]
    return e


@kernel
def loss_batch(theta_kp, widths, out_act, x, y, block, work, e_k):
    """Energies of many parameter vectors (rows of ``theta_kp``), written to ``e_k``."""
    for k in range(theta_kp.shape[0]):
        e_k[k] = loss(theta_kp[k], widths, out_act, x, y, block, work)


@kernel
def loss_and_grad_batch(theta_kp, widths, out_act, x, y, block, work, partial, grad_kp, e_k):
    """Energies and gradients of many parameter vectors, serially (one replica after another).

    ``grad_kp`` (shape ``(K, n_params)``) and ``e_k`` (shape ``(K,)``) are overwritten.
    """
    for k in range(theta_kp.shape[0]):
        e_k[k] = loss_and_grad(theta_kp[k], widths, out_act, x, y, block, work, partial,
                               grad_kp[k])


@kernel(parallel=True)
def loss_and_grad_batch_parallel(theta_kp, widths, out_act, x, y, block, work_k, partial_k,
                                 grad_kp, e_k):
    """As :func:`loss_and_grad_batch`, replicas spread over Numba's threads.

    ``work_k`` has shape ``(K, work_size)`` and ``partial_k`` shape ``(K, n_params)``. Each
    replica's result is bitwise identical to the serial kernel's.
    """
    for k in numba.prange(theta_kp.shape[0]):
        e_k[k] = loss_and_grad(theta_kp[k], widths, out_act, x, y, block, work_k[k],
                               partial_k[k], grad_kp[k])


@kernel
def predict_logits(theta, widths, out_act, x, block, work, logits_out):
    """Write the values entering the softmax (shape ``(n_data, n_out)``) to ``logits_out``."""
    n = x.shape[0]
    n_cls = widths[widths.shape[0] - 1]
    for blk in range(n_blocks(n, block)):
        r0 = blk * block
        r1 = min(n, r0 + block)
        rows = r1 - r0
        out_off = _forward(theta, widths, out_act, x[r0:r1], work)
        logits = work[out_off:out_off + rows * n_cls].reshape((rows, n_cls))
        for r in range(rows):
            for c in range(n_cls):
                logits_out[r0 + r, c] = logits[r, c]
