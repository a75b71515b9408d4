"""The posterior of a hierarchical model's hyperparameters, as ``thermonet info`` and
``analyse`` report it: per temperature, the posterior mean of each width ``1/sqrt(precision)``
with its autocorrelation-aware standard error, from the recorded hyperparameters
(``hyper_k``) and, for Neal's scale factors, from the stored states."""

from __future__ import annotations

from typing import Any

import numpy as np

from thermonet.analysis.ladder import join_chains, series_stats


def _summary(names: list[str], w_nkj: np.ndarray) -> dict[str, Any]:
    """Per slot, the posterior mean of each width in ``w_nkj`` (draws x slots x widths) with
    its autocorrelation-aware standard error."""
    stats = [[series_stats(w_nkj[:, k, j])[:2] for j in range(w_nkj.shape[2])]
             for k in range(w_nkj.shape[1])]
    return {"names": list(names), "quantity": "posterior mean of 1/sqrt(precision)",
            "width": [[float(m) for m, _ in row] for row in stats],
            "width_err": [[float(e) for _, e in row] for row in stats]}


def hyper_widths(arch: Any, split: Any, h_nkj: Any) -> dict[str, Any]:
    """Posterior means of the widths ``1/sqrt(h)`` of recorded hyperparameters (``hyper_k``
    of an ``hmc-gibbs`` run: group precisions, then the noise precision), per temperature,
    with autocorrelation-aware standard errors; names from the potential's ``hyper_model``."""
    hm = getattr(arch.potential(split.train), "hyper_model", None)
    h = np.asarray(h_nkj, dtype=np.float64)
    if hm is None or h.ndim != 3 or h.shape[2] == 0:
        return {}
    names = hm().names()
    if len(names) != h.shape[2]:
        return {}
    return _summary(names, 1.0 / np.sqrt(h))


def with_state_widths(hyper: dict[str, Any], names: list[str], w_nkj: Any) -> dict[str, Any]:
    """``hyper`` (from :func:`hyper_widths`) with the widths of groups whose precisions are
    coordinates of the state (Neal's scale factors; ``w_nkj``: stored samples x slots x
    groups) put first, as the direct parameterisation lists its groups."""
    first = _summary(names, np.asarray(w_nkj, dtype=np.float64))
    if not hyper:
        return first
    return {**first, "names": first["names"] + list(hyper["names"]),
            **{key: [a + list(b) for a, b in zip(first[key], hyper[key], strict=True)]
               for key in ("width", "width_err")}}


def joined_chains(hyper: dict[str, Any]) -> dict[str, Any]:
    """``hyper`` whose slots are the independent chains of one rung (equal lengths), as one
    slot (:func:`thermonet.analysis.ladder.join_chains`)."""
    if not hyper:
        return hyper
    width, err = join_chains(hyper["width"], hyper["width_err"])
    return {**hyper, "width": [width.tolist()], "width_err": [err.tolist()]}


__all__ = ["hyper_widths", "joined_chains", "with_state_widths"]
