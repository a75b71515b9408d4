"""Slow, obviously correct NumPy references for the kernels and the statistics (independent of
thermonet)."""

from __future__ import annotations

import numpy as np


def unpack(theta, widths):
    """Split the flat vector into [(W, b), ...] with W of shape (out, in)."""
    layers, pos = [], 0
    for n_in, n_out in zip(widths[:-1], widths[1:], strict=True):
        w = theta[pos:pos + n_out * n_in].reshape(n_out, n_in)
        pos += n_out * n_in
        b = theta[pos:pos + n_out]
        pos += n_out
        layers.append((w, b))
    assert pos == theta.size
    return layers


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def logits(theta, widths, x, logistic_output=False):
    layers = unpack(np.asarray(theta, np.float64), widths)
    a = np.asarray(x, np.float64)
    for i, (w, b) in enumerate(layers):
        z = a @ w.T + b
        a = sigmoid(z) if (i < len(layers) - 1 or logistic_output) else z
    return a


def energy(theta, widths, x, y, logistic_output=False):
    z = logits(theta, widths, x, logistic_output)
    m = z.max(axis=1, keepdims=True)
    lse = (m + np.log(np.exp(z - m).sum(axis=1, keepdims=True)))[:, 0]
    return float(np.sum(lse - z[np.arange(len(y)), y]))


def energy_and_grad(theta, widths, x, y, logistic_output=False):
    """Plain backpropagation written from scratch with NumPy."""
    layers = unpack(np.asarray(theta, np.float64), widths)
    acts = [np.asarray(x, np.float64)]
    for i, (w, b) in enumerate(layers):
        z = acts[-1] @ w.T + b
        acts.append(sigmoid(z) if (i < len(layers) - 1 or logistic_output) else z)
    z = acts[-1]
    m = z.max(axis=1, keepdims=True)
    p = np.exp(z - m)
    s = p.sum(axis=1, keepdims=True)
    e = float(np.sum((m + np.log(s))[:, 0] - z[np.arange(len(y)), y]))
    delta = p / s
    delta[np.arange(len(y)), y] -= 1.0
    if logistic_output:
        delta = delta * z * (1 - z)
    grads = []
    for i in range(len(layers) - 1, -1, -1):
        w, _ = layers[i]
        grads.append((delta.T @ acts[i], delta.sum(axis=0)))
        if i > 0:
            delta = (delta @ w) * acts[i] * (1 - acts[i])
    flat = np.concatenate([np.concatenate([gw.ravel(), gb]) for gw, gb in reversed(grads)])
    return e, flat


def integrated_autocorrelation_time(x: np.ndarray, c: float = 5.0) -> float:
    """Independent tau_int: the autocorrelation by direct sums (no FFT), Sokal's window."""
    d = x - x.mean()
    acf = np.correlate(d, d, mode="full")[d.size - 1:]
    taus = 2.0 * np.cumsum(acf / acf[0]) - 1.0
    ok = np.arange(taus.size) >= c * taus
    return float(max(taus[int(np.argmax(ok)) if ok.any() else taus.size - 1], 1.0))
