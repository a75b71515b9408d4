"""Fully connected networks on a flat parameter vector: energy and gradient kernels.

Layout (as in Baldock & Marzari's released code): for each layer in order (hidden 1, ...,
hidden H, output), the weights ``W`` of shape ``(out, in)`` flattened row-major
(``index = o*in + i``), then the biases ``b`` (length ``out``).

The network is described by data, not by code, so one compiled kernel serves M(1), M(3), M(3*)
and every user-defined MLP:

``widths`` : int64 array ``[n_in, h_1, ..., h_H, n_out]``
``out_act`` : the activation code: 0 for a linear output layer (M1, M3), 1 for a logistic
output layer (M3*), plus :data:`HIDDEN_TANH` (2) for tanh hidden units instead of logistic
ones (Neal 1993; Rasmussen 1996). A plain int makes the kernels test the hidden activation at
run time, so both compile; :func:`activation_code` gives the code in an integer type that
names the hidden activation, and the kernels then compile only that one (a run uses one)

The data term depends on the type of the targets ``y``, resolved at compile time (so the
classification kernels are the same machine code with or without regression):

* ``y`` int64 labels, shape ``(n,)``: the summed cross-entropy
  ``E(D|w) = sum_n [logsumexp(z_n) - z_n[y_n]]`` (not a mean), computed with the max-shift
  log-sum-exp;
* ``y`` float targets, shape ``(n, n_out)``: half the summed squared error
  ``S(w) = sum_n |f(x_n) - y_n|^2 / 2`` (the Gaussian likelihood's data term at unit noise
  precision; the noise precision and the normalising constant are applied by the caller,
  :mod:`thermonet.kernels.mlp_regression`).

Energies are accumulated in float64 whatever the dtype of the arrays.

Blocks
------
The data set is processed in blocks of ``block`` rows. Each block's gradient is a separate
partial sum, and partials are added in block order. The serial kernel
(:func:`loss_and_grad`) and the threaded one
(:func:`thermonet.kernels.mlp_parallel.loss_and_grad_parallel`) perform exactly
the same floating-point operations in the same order, so their results are bitwise identical
for any number of threads. The block size is part of the numerical recipe; the thread count is
not.

Scratch
-------
Kernels take a caller-owned ``work`` array (see :func:`work_size`) so that no large array is
allocated inside a sampling loop. (The only allocation per block is a float64 array of
``block * (n_out + 1)`` entries for the softmax.)

Speed (docs/performance.md)
---------------------------
The matrix products go through :func:`thermonet.kernels.matmul.blas.gemm`: Intel MKL, ``np.dot``
(SciPy's OpenBLAS) or thermonet's own register-blocked products, whichever was measured fastest
here, in layouts each handles well (with OpenBLAS the small weight matrices above the first
layer are transposed into scratch for the forward products, with thermonet's own products
every layer's are; a narrow first layer is computed from the inputs transposed:
:mod:`thermonet.kernels.mlp_layers`). Everything else is written so that LLVM vectorises it:
the logistic units are one rational step each, :func:`thermonet.kernels.elementwise.logistic`
(float64) and :func:`logistic32` (float32 kernels), instead of the scalar libm ``math.exp`` (no SVML
here), and the softmax takes its exponentials in one flat loop. Parallel kernels leave BLAS
single-threaded per Numba thread (:func:`thermonet.kernels.threads.limit`); they live in
:mod:`thermonet.kernels.mlp_parallel`.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import types
from numba.extending import overload

from thermonet.kernels.elementwise import ONE_F, add_bias, sigmoid_inplace
from thermonet.kernels.hidden_units import (
    HIDDEN_TANH,  # noqa: F401 (the activation code is named here too, beside its kernels)
    LINEAR,  # noqa: F401
    LOGISTIC,
    OUTPUT_MASK,
    activation_code,  # noqa: F401
    hidden_delta,
    hidden_units,
)
from thermonet.kernels.jit import kernel
from thermonet.kernels.losses import block_data_term
from thermonet.kernels.matmul import blas
from thermonet.kernels.mlp_layers import (
    first_layer,
    first_layer_transposed,
    hidden_layer,
    transposed_size,
)


class Net(NamedTuple):
    """A network and its data: the ``net`` of :func:`loss`, :func:`loss_and_grad`,
    :func:`loss_and_kick` and :mod:`thermonet.kernels.mlp_parallel`'s kernels. Kernels take it
    as a plain tuple (``tuple(Net(...))``; thermonet.kernels.leapfrog says why). The tuple may
    carry a sixth field, the inputs transposed block by block in their dtype
    (:func:`thermonet.kernels.mlp_layers.transposed_blocks`) or an empty array: a narrow first
    layer is then computed from them, with the same bits, faster."""

    #: int64 ``[n_in, h_1, ..., n_out]``
    widths: np.ndarray
    #: the activation code (module docstring)
    out_act: int
    #: the inputs, shape ``(n_data, n_in)``, C-contiguous, in the kernels' dtype
    x: np.ndarray
    #: int64 labels ``(n_data,)`` or float targets ``(n_data, n_out)``
    y: np.ndarray
    #: rows per block
    block: int


def block_rows_t(net, r0, r1):
    """Rows ``r0:r1`` (a block) of ``net``'s transposed inputs if it carries them (a sixth
    field), else an empty array."""


@overload(block_rows_t)
def _block_rows_t_typed(net, r0, r1):
    if len(net.types) > 5:
        return lambda net, r0, r1: net[5][r0 * net[2].shape[1]:r1 * net[2].shape[1]]
    return lambda net, r0, r1: no_rows_t(net[2])


def no_rows_t(x):
    """The empty transposed block of inputs like ``x``: a view of no elements of a C-contiguous
    ``x`` (no allocation per block), else a new empty array; 1-D C-contiguous either way."""


@overload(no_rows_t)
def _no_rows_t_typed(x):
    if x.layout == "C":
        return lambda x: x.reshape(x.size)[:0]
    return lambda x: np.empty(0, x.dtype)


# n_params, fan_in and work_size are called from Python only (building a network), so they
# are plain Python: a kernel each would be a compile of its own at every first run

def n_params(widths):
    """Number of parameters of the MLP ``widths`` (weights plus biases of every layer)."""
    w = [int(v) for v in widths]
    return sum((w[layer] + 1) * w[layer + 1] for layer in range(len(w) - 1))


def fan_in(widths, out):
    """Write the fan-in, *including the bias*, of the neuron each parameter feeds into.

    ``out`` (int64, shape ``(n_params,)``) is overwritten. This is ``k_i`` of the paper's
    Sec. 3.2: 257 for every parameter of the first layer of a 256-input network.
    """
    w = [int(v) for v in widths]
    pos = 0
    for layer in range(len(w) - 1):
        k = w[layer] + 1
        m = k * w[layer + 1]
        out[pos:pos + m] = k
        pos += m


def work_size(widths, block):
    """Length of the scratch array one block of ``block`` rows needs: what the kernels'
    offsets (:func:`_act_width`, :func:`~thermonet.kernels.mlp_layers.transposed_size`,
    :func:`_widest`) add up to, or more."""
    w = [int(v) for v in widths]
    outs = w[1:]
    act_width = sum(outs) + 2 * max(outs)
    # room for the first layer's transposed weights whatever the backend: reading it here
    # would choose it (measure) when a network is built, for kernels that may call no product
    wt_size = max([w[layer] * w[layer + 1] for layer in range(len(w) - 1)], default=0)
    return int(block) * act_width + wt_size + max(outs)


@kernel
def _widest(widths):
    """Room for one layer's bias gradient (the kick mode of :func:`_block_loss_and_grad`)."""
    m = 0
    for layer in range(1, widths.shape[0]):
        m = max(m, widths[layer])
    return m


@kernel
def _act_width(widths):
    """Scratch entries per data row: the activations of every layer plus two delta buffers."""
    total = 0
    widest = 0
    for layer in range(1, widths.shape[0]):
        total += widths[layer]
        widest = max(widest, widths[layer])
    return total + 2 * widest


@kernel
def n_blocks(n_data, block):
    """Number of blocks of at most ``block`` rows covering ``n_data`` rows (0 for no data)."""
    return (n_data + block - 1) // block


@kernel
def layer_views(theta, work, p_off, a_off, rows, n_in, n_out):
    """One layer's weights ``W`` (shape ``(n_out, n_in)``) and biases ``b`` in ``theta`` from
    ``p_off`` (the layout of the module docstring), and its ``(rows, n_out)`` activations in
    ``work`` from ``a_off``: views, as every forward pass walks the layers."""
    w = theta[p_off:p_off + n_out * n_in].reshape((n_out, n_in))
    b = theta[p_off + n_out * n_in:p_off + n_out * n_in + n_out]
    z = work[a_off:a_off + rows * n_out].reshape((rows, n_out))
    return w, b, z


@kernel
def forward(theta, widths, out_act, xb, xtb, work):
    """Forward pass of one block; returns the offset of the output activations in ``work``.

    Activations of layer ``l`` (after its non-linearity) are stored row-major in ``work``.
    ``xtb``: the block's inputs transposed (:func:`block_rows_t`), or empty.
    """
    rows = xb.shape[0]
    n_layers = widths.shape[0] - 1
    t_off = rows * _act_width(widths)
    d_off = t_off - 2 * rows * _widest(widths)     # the delta buffers, free until backward
    p_off = 0
    a_off = 0
    prev_off = -1
    for layer in range(n_layers):
        n_in = widths[layer]
        n_out = widths[layer + 1]
        w, b, z = layer_views(theta, work, p_off, a_off, rows, n_in, n_out)
        if layer == 0 and xtb.shape[0] > 0:
            first_layer_transposed(xtb, w, work[d_off:t_off], z)
        elif layer == 0:
            first_layer(xb, w, work, t_off, z)
        else:
            a_prev = work[prev_off:prev_off + rows * n_in].reshape((rows, n_in))
            hidden_layer(a_prev, w, work, t_off, z)
        if layer < n_layers - 1:
            hidden_units(z, b, out_act)
        elif (out_act & OUTPUT_MASK) == LOGISTIC:
            sigmoid_inplace(z, b)
        else:
            add_bias(z, b)
        p_off += n_out * n_in + n_out
        prev_off = a_off
        a_off += rows * n_out
    return prev_off


@kernel
def _block_energy_and_delta(logits, yb, delta):
    """Data term of one block; writes its derivative by the outputs to ``delta``."""
    return block_data_term(logits, yb, delta, True)


@kernel
def _block_energy(logits, yb):
    return block_data_term(logits, yb, logits, False)


@kernel
def _bias_out(out, acc, kick):
    """The bias part of :func:`block_loss_and_grad`'s output from the column sums ``acc``."""
    for c in range(out.shape[0]):
        out[c] = out[c] - kick * acc[c]


@kernel
def _logistic_delta(logits, delta):
    """``delta`` (by the outputs) times the logistic outputs' derivative ``a (1 - a)``."""
    for r in range(logits.shape[0]):
        for c in range(logits.shape[1]):
            a = logits[r, c]
            delta[r, c] *= a * (ONE_F - a)


@kernel
def _column_sums(delta, gb):
    """``gb`` = the column sums of ``delta``, rows in ascending order."""
    for c in range(delta.shape[1]):
        gb[c] = 0.0
    for r in range(delta.shape[0]):
        for c in range(delta.shape[1]):
            gb[c] += delta[r, c]


@kernel
def block_loss_and_grad(theta, net, work, grad, kicking, kick):
    """Energy of one block (``net = (widths, out_act, xb, yb, xtb)``: the block's rows and
    their transpose, :func:`block_rows_t`) and its gradient written (not added) to ``grad``,
    with ``kicking`` false (``kick`` is then unused).

    With ``kicking`` true (float64 only) ``grad`` is instead the momentum vector ``p`` and
    receives ``p -= kick * gradient`` directly: the weight gradients are accumulated into ``p``
    by the matrix products (:func:`thermonet.kernels.matmul.blas.gemm_acc`) and the bias gradients
    (column sums, formed in scratch at the end of ``work``) are subtracted afterwards. The
    gradient itself is never written to memory, which saves the leapfrog pass two streams
    over the parameters (docs/performance.md).

    Callers pass ``kicking`` as ``np.bool_(False)`` or ``np.bool_(True)``, a run-time value:
    a plain ``True``/``False`` reaches Numba as a literal type, which compiles this function
    once per value (about 1.3 CPU s more of a cold start, docs/performance.md).
    """
    widths, out_act, xb, yb, xtb = net
    rows = xb.shape[0]
    n_layers = widths.shape[0] - 1
    out_off = forward(theta, widths, out_act, xb, xtb, work)
    n_cls = widths[n_layers]
    widest = _widest(widths)
    d_off = rows * (_act_width(widths) - 2 * widest)      # past every layer's activations
    logits = work[out_off:out_off + rows * n_cls].reshape((rows, n_cls))
    delta = work[d_off:d_off + rows * n_cls].reshape((rows, n_cls))
    e = _block_energy_and_delta(logits, yb, delta)
    if (out_act & OUTPUT_MASK) == LOGISTIC:
        _logistic_delta(logits, delta)
    # Backward, from the output layer down. ``cur`` and ``nxt`` alternate between the two
    # delta buffers at the end of ``work``. Each layer's bias gradient (the column sums of its
    # delta, rows in ascending order) is accumulated in the same pass that forms that delta.
    p_end = theta.shape[0]
    acc_off = rows * _act_width(widths) + transposed_size(widths)
    gb = work[acc_off:acc_off + n_cls] if kicking else grad[p_end - n_cls:p_end]
    _column_sums(delta, gb)
    if kicking:
        _bias_out(grad[p_end - n_cls:p_end], gb, kick)
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
            if kicking:
                blas.gemm_acc(True, False, dz, xb, gw, -kick)
            else:
                blas.gemm(True, False, dz, xb, gw)
        else:
            prev_off = a_off - rows * n_in
            a_prev = work[prev_off:prev_off + rows * n_in].reshape((rows, n_in))
            if kicking:
                blas.gemm_acc(True, False, dz, a_prev, gw, -kick)
            else:
                blas.gemm(True, False, dz, a_prev, gw)
            w = theta[p_off:p_off + n_out * n_in].reshape((n_out, n_in))
            da = work[nxt:nxt + rows * n_in].reshape((rows, n_in))
            blas.gemm(False, False, dz, w, da)
            # the bias gradient of the layer below
            gb = work[acc_off:acc_off + n_in] if kicking else grad[p_off - n_in:p_off]
            hidden_delta(a_prev, da, gb, out_act)
            if kicking:
                _bias_out(grad[p_off - n_in:p_off], gb, kick)
            cur, nxt = nxt, cur
            a_off = prev_off
        p_end = p_off
    return e


@kernel
def loss(theta, net, work):
    """Energy ``E(D|w)`` (summed cross-entropy, float64) of the MLP at ``theta``.

    Parameters
    ----------
    theta : ndarray of float64 or float32, shape (n_params,)
    net : tuple
        ``tuple(Net(widths, out_act, x, y, block))``: ``widths`` int64 of shape
        ``(n_layers + 1,)``, ``out_act`` the activation code, ``x`` of theta's dtype and shape
        ``(n_data, widths[0])``, C-contiguous, ``y`` int64 labels in ``[0, widths[-1])`` of
        shape ``(n_data,)`` (or float targets), ``block`` rows per block
    work : ndarray, same dtype as theta, shape (>= work_size(widths, block),)

    Returns
    -------
    float
        The energy in nats; NaN or inf if the forward pass overflowed.
    """
    widths, out_act, x, y, block = net[0], net[1], net[2], net[3], net[4]
    n = x.shape[0]
    n_layers = widths.shape[0] - 1
    n_cls = widths[n_layers]
    e = 0.0
    for blk in range(n_blocks(n, block)):
        r0 = blk * block
        r1 = min(n, r0 + block)
        rows = r1 - r0
        out_off = forward(theta, widths, out_act, x[r0:r1], block_rows_t(net, r0, r1), work)
        logits = work[out_off:out_off + rows * n_cls].reshape((rows, n_cls))
        e += _block_energy(logits, y[r0:r1])
    return e


@kernel
def loss_and_grad(theta, net, work, partial, grad):
    """Energy and gradient in one pass, serially over blocks.

    ``grad`` (shape ``(n_params,)``) is overwritten with dE/dtheta; ``partial`` is scratch of
    shape ``(n_params,)``. Returns the energy (float64). Other arguments as in :func:`loss`.
    """
    widths, out_act, x, y, block = net[0], net[1], net[2], net[3], net[4]
    n = x.shape[0]
    nb = n_blocks(n, block)
    if nb == 0:
        grad[:] = 0.0
        return 0.0
    r1 = min(n, block)
    e = block_loss_and_grad(theta, (widths, out_act, x[0:r1], y[0:r1],
                                    block_rows_t(net, 0, r1)), work, grad, np.bool_(False), 0.0)
    for blk in range(1, nb):
        r0 = blk * block
        r1 = min(n, r0 + block)
        e += block_loss_and_grad(theta, (widths, out_act, x[r0:r1], y[r0:r1],
                                         block_rows_t(net, r0, r1)), work,
                                 partial, np.bool_(False), 0.0)
        for i in range(grad.shape[0]):
            grad[i] += partial[i]
    return e


def kick_block(theta, block_net, work, p, kick):
    """``(True, energy)`` after the kick-mode block kernel on ``block_net`` (a block's net, as
    :func:`block_loss_and_grad` takes it) when every array is float64, else ``(False, 0.0)``
    without doing anything (resolved at compile time, below)."""
    raise NotImplementedError("only callable from compiled code")


@overload(kick_block, jit_options={"nogil": True})
def _kick_block_typed(theta, block_net, work, p, kick):
    x = block_net.types[2]
    if all(getattr(a, "dtype", None) == types.float64 for a in (theta, x, work, p)):
        def impl(theta, block_net, work, p, kick):
            return True, block_loss_and_grad(theta, block_net, work, p, np.bool_(True), kick)
    else:
        def impl(theta, block_net, work, p, kick):
            return False, 0.0
    return impl


@kernel
def loss_and_kick(theta, net, work, partial, grad, p, kick):
    """Energy, and the momentum update ``p -= kick * dE/dtheta`` (a leapfrog kick).

    With the data in one block and float64 arrays the gradient goes straight into ``p``
    (:func:`block_loss_and_grad`'s kick mode) and ``grad`` is left untouched; otherwise the
    gradient is computed into ``grad`` by :func:`loss_and_grad` and ``p`` updated from it.
    Either way ``p`` ends up equal to ``p - kick * gradient`` up to the rounding of the matrix
    products (bitwise equal with the ``np.dot`` backend). Returns the energy, bitwise that of
    :func:`loss_and_grad`.
    """
    widths, out_act, x, y, block = net[0], net[1], net[2], net[3], net[4]
    n = x.shape[0]
    if n_blocks(n, block) == 1:
        done, e = kick_block(theta, (widths, out_act, x, y, block_rows_t(net, 0, n)), work, p,
                             kick)
        if done:
            return e
    e = loss_and_grad(theta, net, work, partial, grad)
    for i in range(p.shape[0]):
        p[i] = p[i] - kick * grad[i]
    return e


@kernel
def predict_logits(theta, widths, out_act, x, block, work, logits_out):
    """Write the values entering the softmax (shape ``(n_data, n_out)``) to ``logits_out``."""
    n = x.shape[0]
    n_cls = widths[widths.shape[0] - 1]
    for blk in range(n_blocks(n, block)):
        r0 = blk * block
        r1 = min(n, r0 + block)
        rows = r1 - r0
        out_off = forward(theta, widths, out_act, x[r0:r1], no_rows_t(x), work)
        logits = work[out_off:out_off + rows * n_cls].reshape((rows, n_cls))
        for r in range(rows):
            for c in range(n_cls):
                logits_out[r0 + r, c] = logits[r, c]

