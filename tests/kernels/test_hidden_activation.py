"""The hidden activation chosen at compile time (``thermonet.kernels.mlp.activation_code``).

A code typed by :func:`activation_code` must give bitwise what the plain-int code (tested at
run time, both activations compiled) gives (that a cold process compiles its own hidden
activation only: ``test_cold_compile.py``).
"""

from __future__ import annotations

import numpy as np
import pytest

from thermonet.kernels import mlp as k


def _net(code, hidden_tanh, dtype):
    rng = np.random.default_rng(3)
    widths = np.array([5, 4, 3, 3], dtype=np.int64)
    x = rng.normal(size=(11, 5)).astype(dtype)
    y = rng.integers(0, 3, 11)
    theta = (0.7 * rng.normal(size=k.n_params(widths))).astype(dtype)
    out = code | (k.HIDDEN_TANH if hidden_tanh else 0)
    return theta, widths, out, x, y


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("hidden_tanh", [False, True])
@pytest.mark.parametrize("output", [k.LINEAR, k.LOGISTIC])
def test_typed_code_gives_the_run_time_codes_numbers_bitwise(output, hidden_tanh, dtype):
    """Energy, gradient (two blocks, so the serial block sum runs) and logits of a two-hidden-
    layer network: the typed code's kernels against the plain int's, exact equality."""
    theta, widths, out, x, y = _net(output, hidden_tanh, dtype)
    typed = k.activation_code(out)
    assert isinstance(typed, np.uint16 if hidden_tanh else np.uint8) and int(typed) == out
    work = np.empty(k.work_size(widths, 6), dtype=dtype)
    results = []
    for code in (out, typed):
        net = tuple(k.Net(widths, code, x, y, 6))
        grad = np.empty_like(theta)
        e = k.loss_and_grad(theta, net, work, np.empty_like(theta), grad)
        logits = np.empty((x.shape[0], 3), dtype=dtype)
        k.predict_logits(theta, widths, code, x, 6, work, logits)
        results.append((e, k.loss(theta, net, work), grad, logits))
    (e0, l0, g0, z0), (e1, l1, g1, z1) = results
    assert e1 == e0 and l1 == l0
    np.testing.assert_array_equal(g1, g0)
    np.testing.assert_array_equal(z1, z0)
