"""Threaded and batched MLP kernels: bitwise identical to the serial ones for any thread count.

See :mod:`thermonet.kernels.mlp` for the parameter layout and the block recipe.
"""

from __future__ import annotations

import numba
import numpy as np

from thermonet.kernels.jit import kernel
from thermonet.kernels.mlp import block_loss_and_grad, block_rows_t, loss, loss_and_grad, n_blocks

#: below this many partial-gradient entries (n_blocks * n_params) the ordered reduction of
#: :func:`loss_and_grad_parallel` runs on one thread (a second parallel region costs more)
_PAR_REDUCE_MIN = 1 << 17
_REDUCE_CHUNK = 2048


@kernel(parallel=True)
def loss_and_grad_parallel(theta, net, n_slots, work_s, partial_b, grad):
    """As :func:`thermonet.kernels.mlp.loss_and_grad`, with the blocks spread over Numba's
    threads (``net`` as there).

    The blocks are split into ``min(n_slots, n_blocks)`` contiguous ranges ("slots"), run in
    parallel (pass the number of threads as ``n_slots``: one slot per thread). ``work_s`` has
    shape ``(>= n_slots, work_size)``: one activation scratch per slot, reused by the slot's
    blocks while it is hot in cache (the thread id inside a kernel is a ctypes global that Numba
    cannot cache, so the slot, not the thread, owns the scratch). ``partial_b`` has shape
    ``(n_blocks, n_params)``. Slot 0 sums its blocks' gradients into ``grad`` as it goes, in
    block order, exactly as the serial kernel does; the other blocks' partial gradients are
    added afterwards, still in block order (in parallel over parameter chunks when there are
    many). So the result is bitwise identical to the serial kernel's for any ``n_slots`` and
    any thread count.
    """
    widths, out_act, x, y, block = net[0], net[1], net[2], net[3], net[4]
    n = x.shape[0]
    nb = n_blocks(n, block)
    n_p = grad.shape[0]
    if nb == 0:
        grad[:] = 0.0
        return 0.0
    ns = max(1, min(n_slots, nb))
    e_b = np.zeros(nb)
    for s in numba.prange(ns):
        b0 = (s * nb) // ns
        b1 = ((s + 1) * nb) // ns
        for blk in range(b0, b1):
            r0 = blk * block
            r1 = min(n, r0 + block)
            if blk == 0:
                e_b[0] = block_loss_and_grad(theta, (widths, out_act, x[r0:r1], y[r0:r1],
                                                      block_rows_t(net, r0, r1)), work_s[s],
                                              grad, np.bool_(False), 0.0)
            else:
                e_b[blk] = block_loss_and_grad(theta, (widths, out_act, x[r0:r1], y[r0:r1],
                                                        block_rows_t(net, r0, r1)), work_s[s],
                                                partial_b[blk],
                                                np.bool_(False), 0.0)
                if s == 0:
                    for i in range(n_p):
                        grad[i] += partial_b[blk, i]
    e = e_b[0]
    for blk in range(1, nb):
        e += e_b[blk]
        e_b[blk] = e    # a running sum (a scan) is never vectorised: the additions stay in
        #                 block order even under THERMONET_FASTMATH's "reassoc" flag
    first = nb // ns    # slot 0 holds blocks 0 .. first - 1, already summed into grad
    if (nb - first) * n_p >= _PAR_REDUCE_MIN:
        n_chunks = (n_p + _REDUCE_CHUNK - 1) // _REDUCE_CHUNK
        for ch in numba.prange(n_chunks):
            i0 = ch * _REDUCE_CHUNK
            i1 = min(n_p, i0 + _REDUCE_CHUNK)
            for blk in range(first, nb):
                for i in range(i0, i1):
                    grad[i] += partial_b[blk, i]
    else:
        for blk in range(first, nb):
            for i in range(n_p):
                grad[i] += partial_b[blk, i]
    return e


@kernel
def loss_batch(theta_kp, net, work, e_k):
    """Energies of many parameter vectors (rows of ``theta_kp``), written to ``e_k``."""
    for k in range(theta_kp.shape[0]):
        e_k[k] = loss(theta_kp[k], net, work)


@kernel
def loss_and_grad_batch(theta_kp, net, work, partial, grad_kp, e_k):
    """Energies and gradients of many parameter vectors, serially (one replica after another).

    ``grad_kp`` (shape ``(K, n_params)``) and ``e_k`` (shape ``(K,)``) are overwritten.
    """
    for k in range(theta_kp.shape[0]):
        e_k[k] = loss_and_grad(theta_kp[k], net, work, partial, grad_kp[k])


@kernel(parallel=True)
def loss_and_grad_batch_parallel(theta_kp, net, work_k, partial_k, grad_kp, e_k):
    """As :func:`loss_and_grad_batch`, replicas spread over Numba's threads.

    ``work_k`` has shape ``(K, work_size)`` and ``partial_k`` shape ``(K, n_params)``. Each
    replica's result is bitwise identical to the serial kernel's.
    """
    for k in numba.prange(theta_kp.shape[0]):
        e_k[k] = loss_and_grad(theta_kp[k], net, work_k[k], partial_k[k], grad_kp[k])
