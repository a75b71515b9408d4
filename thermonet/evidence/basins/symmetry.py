"""The exact symmetries of a network: how many copies of a basin the prior box holds.

Permuting the hidden units of a layer (each unit's incoming weights and bias, and its outgoing
weights, moved together) maps a network onto one with the same outputs, and the box prior
``|w_i| < sigma_i/2`` onto itself (units of one layer share their fan-in, so their widths).
For an odd activation (tanh) negating one unit's incoming and outgoing weights is exact too;
for the logistic, ``sigma(-x) = 1 - sigma(x)`` needs the next layer's biases to shift by the
outgoing weights, which can leave the box, so those flips are not counted. The group ``G`` of
these maps has, for hidden layers of widths ``H_l``,

    ln |G| = sum_l [ln H_l! + H_l ln 2 (odd activations only)],

and if the minimum ``w0`` is fixed by no element but the identity, its ``|G|`` images are
distinct minima with identical basins. Then the integral over the box is at least the basin's
integral times ``|G|`` (the basins of the images are disjoint copies), so
``ln Z_model >= ln Z_basin + ln |G|`` in the sense of a basin-plus-copies estimate: distinct
basins that are not images of each other are not counted, and neither is any overlap between
a basin and its images (which genericity makes implausible but does not exclude).

:func:`check_generic` tests the condition. If ``g != 1`` fixes ``w0``, take the lowest layer
in which ``g`` acts: the columns of that layer's incoming weights are untouched (the layer
below is not permuted), so for a unit ``i`` sent to ``j != i``, rows ``i`` and ``j`` of
(weights, bias) are equal (or opposite, with a sign flip), and a flipped unit left in place has
zero incoming weights and bias. So a minimum with no two such rows equal or opposite and no
zero row (for odd activations) is fixed by no non-trivial element: the check is sufficient
(and may flag points that are not fixed, e.g. equal incoming but different outgoing weights).

See docs/evidence.md, "Basin evidence and symmetry copies".
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from thermonet.types import FloatArray


def unit_symmetries(arch: Any) -> tuple[Any, ...] | None:
    """The architecture's layers of interchangeable units, or None when it states none."""
    fn = getattr(arch, "unit_symmetries", None)
    return fn() if callable(fn) else None


def log_multiplicity(arch: Any) -> float | None:
    """``ln |G|``, the log of the number of exact symmetry maps of ``arch``: the sum over
    hidden layers of ``ln H!`` and, for odd activations, ``H ln 2``. None when the
    architecture states no symmetries (``Architecture.unit_symmetries()`` returns None)."""
    layers = unit_symmetries(arch)
    if layers is None:
        return None
    total = 0.0
    for layer in layers:
        h = layer.n_units
        total += math.lgamma(h + 1.0) + (h * math.log(2.0) if layer.sign_flip else 0.0)
    return total


def describe_multiplicity(arch: Any) -> str:
    """A short formula for the table's footnote, e.g. ``3 ln 40!`` or ``ln 16! + 16 ln 2``."""
    layers = unit_symmetries(arch)
    if layers is None:
        return "no known symmetry"
    if not layers:
        return "none (no hidden units)"
    counts: dict[int, int] = {}
    for layer in layers:
        counts[layer.n_units] = counts.get(layer.n_units, 0) + 1
    terms = [f"{n} ln {h}!" if n > 1 else f"ln {h}!" for h, n in counts.items()]
    flips = sum(layer.n_units for layer in layers if layer.sign_flip)
    if flips:
        terms.append(f"{flips} ln 2")
    return " + ".join(terms)


@dataclass(frozen=True)
class Violation:
    """A way ``w0`` may be a fixed point of a non-trivial symmetry."""

    layer: int           #: hidden layer, 1 = first
    kind: str            #: "equal", "opposite" or "zero"
    units: tuple[int, ...]
    distance: float      #: max |difference| (or |value| for "zero"), over the layer's scale

    def __str__(self) -> str:
        what = {"equal": "have equal incoming weights and bias",
                "opposite": "have opposite incoming weights and bias",
                "zero": "has zero incoming weights and bias"}[self.kind]
        units = " and ".join(str(u) for u in self.units)
        return (f"layer {self.layer}: unit{'s' if len(self.units) > 1 else ''} {units} {what} "
                f"(relative distance {self.distance:.2g})")


def check_generic(arch: Any, theta: FloatArray, tol: float = 1e-6) -> list[Violation]:
    """Every reason ``theta`` may be fixed by a non-trivial symmetry of ``arch`` (see the
    module's docstring): in each hidden layer, pairs of units whose incoming weights and bias
    agree (or, with sign flips, are opposite) to within ``tol`` times the layer's largest
    incoming parameter, and, with sign flips, units whose incoming parameters are all below
    that. An empty list means the ``|G|`` images of ``theta`` are distinct."""
    theta = np.asarray(theta, dtype=np.float64)
    out: list[Violation] = []
    for num, layer in enumerate(unit_symmetries(arch) or (), start=1):
        rows = theta[layer.incoming]
        scale = float(np.max(np.abs(rows))) if rows.size else 0.0
        if scale == 0.0:
            scale = 1.0
        if layer.sign_flip:
            size = np.max(np.abs(rows), axis=1) / scale
            out.extend(Violation(num, "zero", (int(i),), float(size[i]))
                       for i in np.flatnonzero(size <= tol))
        for i in range(rows.shape[0] - 1):
            diff = np.max(np.abs(rows[i + 1:] - rows[i]), axis=1) / scale
            out.extend(Violation(num, "equal", (i, i + 1 + int(j)), float(diff[j]))
                       for j in np.flatnonzero(diff <= tol))
            if layer.sign_flip:
                opp = np.max(np.abs(rows[i + 1:] + rows[i]), axis=1) / scale
                out.extend(Violation(num, "opposite", (i, i + 1 + int(j)), float(opp[j]))
                           for j in np.flatnonzero(opp <= tol))
    return out


def act(arch: Any, theta: FloatArray, perms: list[Any], signs: list[Any] | None = None
        ) -> FloatArray:
    """The image of ``theta`` under one symmetry: in hidden layer ``l``, unit ``perms[l][i]``
    of the image is unit ``i`` of ``theta``, multiplied by ``signs[l][i]`` (±1; only for
    layers with sign flips)."""
    theta = np.asarray(theta, dtype=np.float64)
    out = theta.copy()
    layers = unit_symmetries(arch) or ()
    if len(perms) != len(layers):
        raise ValueError(f"{len(perms)} permutations for {len(layers)} hidden layers")
    for num, (layer, perm) in enumerate(zip(layers, perms, strict=True)):
        perm = np.asarray(perm)
        s = np.ones(layer.n_units) if signs is None else np.asarray(signs[num], dtype=float)
        if not layer.sign_flip and np.any(s != 1):
            raise ValueError(f"hidden layer {num + 1} has no sign flips")
        # the layers act on disjoint rows/columns, so they commute: read from the current
        # image, write the permuted units back
        inc, outg = out[layer.incoming], out[layer.outgoing]
        out[layer.incoming[perm]] = s[:, None] * inc
        out[layer.outgoing[perm]] = s[:, None] * outg
    return out


def summary_entry(arch: Any, theta: FloatArray | None, tol: float = 1e-6) -> dict[str, Any]:
    """What the evidence table shows of the symmetry at one minimum: ``log_multiplicity``
    (None: unknown), its ``multiplicity_formula``, and ``symmetry_violations`` (strings; None
    when ``theta`` is not available)."""
    viol = None if theta is None else [str(v) for v in check_generic(arch, theta, tol)]
    return {"log_multiplicity": log_multiplicity(arch),
            "multiplicity_formula": describe_multiplicity(arch),
            "symmetry_violations": viol}


__all__ = ["Violation", "act", "check_generic", "describe_multiplicity", "log_multiplicity",
           "summary_entry", "unit_symmetries"]
