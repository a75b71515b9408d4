"""A census of basins: a lower bound on a model's evidence from the basins TI has measured.

Thermodynamic integration from a minimum measures the evidence of the basin around it
(docs/evidence.md, "Basin evidence and symmetry copies"). With TI from m minima of one model,
the basins found that are **not** symmetry images of one another add up, and each has
``|G|`` exact copies, so

    ln Z_model  >=  ln Σ_{distinct basins b} Z_b  +  ln |G|

(a lower bound up to the basins' own error bars: basins never found are missing, and the
bound assumes the copies of distinct basins do not overlap). With a global estimate of
``ln Z_model`` (stepping stone from a prior-anchored ladder that mixed,
:mod:`thermonet.analysis.model_evidence`) the **fraction it explains** is
``exp(bound - global)``.

Which minima are the same basin up to symmetry? Their images share every observable that the
symmetries leave unchanged, so :func:`network_signature` collects such observables (the
training energy at the minimum and, per hidden layer, the sorted norms of the units' incoming
and outgoing weights: permutations reorder the units, sign flips leave the norms alone) and
:func:`distinct_basins` groups minima whose signatures agree within a relative tolerance.
Failure modes (docs/evidence.md, "A census of basins"): two minimisations that stop at
different points of one basin differ by the minimiser's tolerance and the basin's flat
directions, and count twice if that exceeds ``rtol`` (the bound then overshoots); two
distinct basins whose invariants agree within ``rtol`` count once (the bound stays a bound,
but a looser one). Within a group the basin's log evidence is the group's mean.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from thermonet.evidence.basins.symmetry import unit_symmetries
from thermonet.types import FloatArray

#: default relative tolerance of two signatures of the same basin
SIGNATURE_RTOL = 1e-3


def network_signature(arch: Any, theta: FloatArray, energy: float) -> FloatArray:
    """Observables of a minimum that the architecture's symmetries leave unchanged: the
    energy, then per hidden layer the sorted norms of each unit's incoming weights (and
    bias) and of its outgoing weights. Images of one minimum have equal signatures. For an
    architecture that states no symmetries the signature is the energy and the point itself
    (no images to merge)."""
    theta = np.asarray(theta, dtype=np.float64)
    parts = [np.array([float(energy)])]
    layers = unit_symmetries(arch)
    if layers is None:          # no known symmetry: no images, a basin is its point
        return np.concatenate([parts[0], theta])
    for layer in layers:
        parts.append(np.sort(np.linalg.norm(theta[layer.incoming], axis=1)))
        parts.append(np.sort(np.linalg.norm(theta[layer.outgoing], axis=1)))
    return np.concatenate(parts)


def signature_of(arch: Any, theta: FloatArray | None, energy: float) -> list[float] | None:
    """:func:`network_signature` as a list (JSON-ready), None without a point."""
    return None if theta is None else network_signature(arch, theta, energy).tolist()


def signature_distance(a: Any, b: Any) -> float:
    """Largest relative difference between two signatures, component by component, each
    relative to the larger magnitude (an absolute floor of 1e-300 keeps 0 against 0 at 0);
    inf when their lengths differ or one is None (unknown)."""
    if a is None or b is None:
        return math.inf
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return math.inf
    scale = np.maximum(np.maximum(np.abs(a), np.abs(b)), 1e-300)
    return float(np.max(np.abs(a - b) / scale)) if a.size else 0.0


def distinct_basins(signatures: Sequence[Any], rtol: float = SIGNATURE_RTOL) -> list[int]:
    """The group of each minimum: minima whose signatures agree within ``rtol`` (directly or
    through a chain of such minima) share a group; groups are numbered in order of first
    appearance."""
    n = len(signatures)
    parent = list(range(n))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i in range(n):
        for j in range(i + 1, n):
            if signature_distance(signatures[i], signatures[j]) <= rtol:
                parent[root(j)] = root(i)
    label: dict[int, int] = {}
    return [label.setdefault(root(i), len(label)) for i in range(n)]


def log_sum_exp(values: Sequence[float], errors: Sequence[float]) -> tuple[float, float]:
    """``ln Σ exp(v_b)`` and its error from independent errors ``e_b`` (delta method: the
    terms weighted by their shares ``exp(v_b)/Σ``)."""
    v = np.asarray(values, dtype=np.float64)
    e = np.asarray(errors, dtype=np.float64)
    m = float(v.max())
    w = np.exp(v - m)
    total = float(w.sum())
    share = w / total
    return m + math.log(total), float(np.sqrt(np.sum((share * e) ** 2)))


@dataclass
class Census:
    """The census of one model's basins (see the module's docstring)."""

    n_minima: int
    groups: list[int]                    #: each minimum's basin
    basin_log_evidence: list[float]      #: per distinct basin: mean over its minima
    basin_error: list[float]
    log_multiplicity: float | None       #: ln|G|, None when unknown (counted as 0)
    bound: float                         #: ln Σ_b Z_b + ln|G|
    bound_error: float
    global_log_evidence: float | None = None
    global_error: float | None = None
    global_mixed: bool | None = None
    fraction: float | None = None        #: exp(bound - global)
    fraction_error: float | None = None
    #: the bound lies more than 2 combined errors above the global estimate: impossible for
    #: a lower bound, so the copies overlap (no separated basins) or an estimate is wrong
    exceeds_global: bool | None = None
    rtol: float = SIGNATURE_RTOL
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def n_basins(self) -> int:
        return len(self.basin_log_evidence)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "n_basins": self.n_basins}


def census(log_evidence: Sequence[float], errors: Sequence[float], signatures: Sequence[Any],
           log_multiplicity: float | None, *, rtol: float = SIGNATURE_RTOL,
           global_log_evidence: float | None = None, global_error: float | None = None,
           global_mixed: bool | None = None) -> Census:
    """The census bound from the basin log evidences (with errors) of m minima and their
    signatures; with a global estimate, the fraction of it the bound explains (its error
    from both errors, in quadrature)."""
    le = np.asarray(log_evidence, dtype=np.float64)
    er = np.asarray(errors, dtype=np.float64)
    if le.size == 0 or le.shape != er.shape or len(signatures) != le.size:
        raise ValueError(f"{le.size} log evidences, {er.size} errors and {len(signatures)} "
                         "signatures; expected the same number, at least one")
    groups = distinct_basins(signatures, rtol)
    vals, errs = [], []
    for g in range(max(groups) + 1):
        idx = [i for i, h in enumerate(groups) if h == g]
        vals.append(float(le[idx].mean()))
        errs.append(float(math.sqrt(np.sum(er[idx] ** 2)) / len(idx)))
    total, total_err = log_sum_exp(vals, errs)
    bound = total + (log_multiplicity or 0.0)
    out = Census(int(le.size), groups, vals, errs, log_multiplicity, bound, total_err,
                 rtol=rtol)
    if global_log_evidence is not None:
        g_err = 0.0 if global_error is None else float(global_error)
        out.global_log_evidence, out.global_error = float(global_log_evidence), g_err
        out.global_mixed = global_mixed
        out.fraction = math.exp(bound - global_log_evidence)
        out.fraction_error = out.fraction * math.hypot(total_err, g_err)
        out.exceeds_global = bound - global_log_evidence > 2 * math.hypot(total_err, g_err)
    return out


def model_census(settings: dict[str, Any], rows: Sequence[dict[str, Any]],
                 rtol: float = SIGNATURE_RTOL) -> dict[str, Any]:
    """The census of one model in an evidence summary: from its rows (``log_evidence``,
    ``log_evidence_error``, ``signature``, ``log_multiplicity``) and the model's
    ``global_log_evidence`` setting ([] or [value, error]); a JSON-ready dict."""
    glob = list(settings.get("global_log_evidence") or [])
    c = census([r["log_evidence"] for r in rows], [r["log_evidence_error"] for r in rows],
               [r.get("signature") for r in rows], rows[0].get("log_multiplicity"),
               rtol=rtol, global_log_evidence=glob[0] if glob else None,
               global_error=glob[1] if glob else None)
    return c.to_dict()


def describe(name: str, c: dict[str, Any]) -> list[str]:
    """The census lines of the evidence table, from :meth:`Census.to_dict`."""
    g = "" if c["log_multiplicity"] is None else f" + ln|G| {c['log_multiplicity']:.2f}"
    lines = [f"census of {name}: {c['n_basins']} distinct basin(s) among {c['n_minima']} "
             f"minima (signatures within rtol {c['rtol']:g}); ln Σ Z_basin{g} = "
             f"{c['bound']:.2f} ± {c['bound_error']:.2f}, a lower bound on the model's log "
             "evidence"]
    if c["global_log_evidence"] is not None:
        mixed = ("; NOT mixed, so the global number itself may miss basins"
                 if c["global_mixed"] is False else "")
        lines.append(f"  global (prior-anchored ladder) {c['global_log_evidence']:.2f} ± "
                     f"{c['global_error']:.2g}: the basins found explain a fraction "
                     f"{c['fraction']:.3g} ± {c['fraction_error']:.2g} of it{mixed}")
        if c.get("exceeds_global"):
            lines.append("  THE BOUND EXCEEDS THE GLOBAL ESTIMATE: the basins' copies overlap "
                         "(at this temperature the minima do not sit in separated basins, so "
                         "ln|G| over-counts), or one of the estimates is not converged")
    return lines


__all__ = ["SIGNATURE_RTOL", "Census", "census", "describe", "distinct_basins", "log_sum_exp",
           "model_census", "network_signature", "signature_distance", "signature_of"]
