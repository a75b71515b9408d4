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


def heat_capacity_of_chains(e: np.ndarray, temperature: float) -> tuple[float, float, float]:
    """``Var(E)/T^2`` of chains ``e`` (n, C), pooled about the pooled mean, and its error:
    each chain's ``sqrt(var(d) tau / n)`` of ``d = (E - <E>)^2`` combined as the error of the
    mean of the chains' means, times ``sqrt(chi2 / (C - 1))`` when the chains' means of ``d``
    disagree (chi-square about their inverse-variance weighted mean, p < 0.05). Also
    returns that p-value (NaN for one chain)."""
    from scipy.stats import chi2 as chi2_dist

    n, n_c = e.shape
    n_all = e.size
    d = (e - e.mean()) ** 2
    errs = np.array([np.sqrt(np.var(d[:, j], ddof=1) * integrated_autocorrelation_time(d[:, j])
                             / n) for j in range(n_c)])
    err = np.sqrt(np.sum(errs ** 2)) / n_c
    p = float("nan")
    if n_c > 1:
        m = d.mean(axis=0)
        w = 1.0 / errs ** 2
        chi2 = float(np.sum(w * (m - np.sum(w * m) / np.sum(w)) ** 2))
        p = float(chi2_dist.sf(chi2, n_c - 1))
        if p < 0.05:
            err *= np.sqrt(chi2 / (n_c - 1))
    t2 = temperature ** 2
    return float(d.sum() / (n_all - 1) / t2), float(err * n_all / (n_all - 1) / t2), p


def mean_of_chains(x: np.ndarray) -> tuple[float, float]:
    """The mean of chains ``x`` (n, C) as the mean of their means, and its error from each
    chain's own ``sqrt(var(x_c) tau_c / n)``, ``sqrt(sum err_c^2) / C``."""
    n, n_c = x.shape
    errs = [np.sqrt(np.var(x[:, j], ddof=1) * integrated_autocorrelation_time(x[:, j]) / n)
            for j in range(n_c)]
    return float(x.mean(axis=0).mean()), float(np.sqrt(np.sum(np.square(errs))) / n_c)
