"""Symmetry multiplicity of the built-in networks: exact numbers, a brute-force enumeration of
the group on tiny networks (outputs, prior and distinctness), the genericity check on
constructed fixed points, and the evidence table's column and Bayes factor."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from thermonet import registry
from thermonet.api import Architecture
from thermonet.evidence import report
from thermonet.evidence.basins import symmetry as sym

LN40 = math.log(math.factorial(40))    # exact integer, then one rounding


def test_exact_multiplicities_of_the_paper_models():
    assert LN40 == pytest.approx(110.32063971475740, rel=1e-15)
    assert sym.log_multiplicity(registry.get_architecture("M1")) == pytest.approx(LN40, 1e-14)
    assert sym.log_multiplicity(registry.get_architecture("M3")) == pytest.approx(3 * LN40,
                                                                                  1e-14)
    assert sym.log_multiplicity(registry.get_architecture("M3*")) == pytest.approx(3 * LN40,
                                                                                   1e-14)
    # the M3-vs-M1 shift of the log Bayes factor: 2 ln 40!
    m3, m1 = (sym.log_multiplicity(registry.get_architecture(n)) for n in ("M3", "M1"))
    assert m3 - m1 == pytest.approx(220.64127942951, abs=1e-9)
    assert sym.describe_multiplicity(registry.get_architecture("M3")) == "3 ln 40!"


def test_tanh_adds_h_ln2_and_logistic_does_not():
    logi = registry.get_architecture("mlp", n_inputs=5, hidden=[7, 3], n_outputs=2)
    tanh = registry.get_architecture("mlp", n_inputs=5, hidden=[7, 3], n_outputs=2,
                                     hidden_activation="tanh")
    base = math.log(math.factorial(7) * math.factorial(3))
    assert sym.log_multiplicity(logi) == pytest.approx(base, rel=1e-14)
    assert sym.log_multiplicity(tanh) == pytest.approx(base + 10 * math.log(2), rel=1e-14)
    assert sym.describe_multiplicity(tanh) == "ln 7! + ln 3! + 10 ln 2"
    reg = registry.get_architecture("mlp-regression", n_inputs=2, hidden=[16], n_outputs=2)
    assert sym.log_multiplicity(reg) == pytest.approx(math.log(math.factorial(16) * 2 ** 16),
                                                      rel=1e-14)
    softmax_regression = registry.get_architecture("mlp", n_inputs=4, hidden=[], n_outputs=3)
    assert sym.log_multiplicity(softmax_regression) == 0.0


def test_an_architecture_stating_no_symmetry_has_none():
    class Plain(Architecture):
        name = "plain"

        @property
        def n_params(self) -> int:
            return 3

        def fan_in(self):
            return np.ones(3, dtype=np.int64)

        def potential(self, data=None, **options):
            raise NotImplementedError

    assert sym.log_multiplicity(Plain()) is None
    assert sym.check_generic(Plain(), np.zeros(3)) == []
    assert sym.summary_entry(Plain(), np.zeros(3))["log_multiplicity"] is None


def group(arch):
    """Every element of the stated group, as (perms, signs)."""
    layers = sym.unit_symmetries(arch)
    per_layer = []
    for layer in layers:
        h = layer.n_units
        signs = list(itertools.product((1, -1), repeat=h)) if layer.sign_flip else [(1,) * h]
        per_layer.append(list(itertools.product(itertools.permutations(range(h)), signs)))
    for choice in itertools.product(*per_layer):
        yield [c[0] for c in choice], [c[1] for c in choice]


def signed_index_map(arch, perms, signs):
    """The map as a signed permutation of coordinates: image[j] = sign[j] * theta[src[j]]."""
    n = arch.n_params
    img = sym.act(arch, np.arange(1.0, n + 1.0), perms, signs)
    src = np.abs(img).astype(np.int64) - 1
    assert sorted(src) == list(range(n))          # a permutation of coordinates
    return src, np.sign(img)


TINY = [("mlp", {"n_inputs": 3, "hidden": [2, 3], "n_outputs": 2}, 2 * 6),
        ("mlp", {"n_inputs": 3, "hidden": [2, 3], "n_outputs": 2,
                 "hidden_activation": "tanh"}, 2 * 6 * 2 ** 5),
        ("mlp-regression", {"n_inputs": 2, "hidden": [2, 2], "n_outputs": 2, "ard": True},
         2 * 2 * 2 ** 4)]


@pytest.mark.parametrize(("name", "kw", "order"), TINY)
def test_brute_force_group_on_tiny_networks(name, kw, order):
    """Enumerate the group: every element keeps the outputs and the prior, the images of a
    generic vector are distinct, and their number is exp(ln|G|)."""
    arch = registry.get_architecture(name, **kw)
    rng = np.random.default_rng(3)
    x = rng.normal(size=(20, kw["n_inputs"]))
    theta = rng.uniform(-0.9, 0.9, arch.n_params) * arch.prior_widths() / 2
    if name == "mlp":
        pot = arch.potential(x=x, y=rng.integers(0, 2, 20))
        outputs = pot.logits
    else:
        pot = arch.potential(x=x, y=rng.normal(size=(20, 2)))
        outputs = pot.energy      # likelihood plus the Gaussian (ARD) prior term
    widths = arch.prior_widths()
    ref = outputs(theta)
    images = set()
    n = 0
    for perms, signs in group(arch):
        n += 1
        src, sgn = signed_index_map(arch, perms, signs)
        np.testing.assert_array_equal(widths[src], widths)       # the box onto itself
        image = sym.act(arch, theta, perms, signs)
        np.testing.assert_array_equal(image, sgn * theta[src])
        np.testing.assert_allclose(outputs(image), ref, rtol=1e-12, atol=1e-12)
        images.add(image.tobytes())
    assert n == order == len(images)
    assert math.exp(sym.log_multiplicity(arch)) == pytest.approx(order, rel=1e-12)
    assert sym.check_generic(arch, theta) == []


def test_logistic_sign_flip_is_not_a_symmetry_of_the_box():
    """Negating a logistic unit needs the next biases to shift by its outgoing weights; at a
    point near the edge of the box that shift leaves the box, so it is not counted."""
    arch = registry.get_architecture("mlp", n_inputs=3, hidden=[2], n_outputs=2)
    (layer,) = sym.unit_symmetries(arch)
    assert not layer.sign_flip
    rng = np.random.default_rng(0)
    x = rng.normal(size=(10, 3))
    half = arch.prior_widths() / 2
    theta = rng.uniform(-0.5, 0.5, arch.n_params) * half
    out_bias = np.arange(arch.n_params - 2, arch.n_params)
    theta[out_bias] = 0.95 * half[out_bias]
    theta[layer.outgoing[0]] = 0.5 * half[layer.outgoing[0]]
    pot = arch.potential(x=x, y=np.zeros(10, dtype=np.int64))
    flipped = theta.copy()
    flipped[layer.incoming[0]] *= -1
    flipped[layer.outgoing[0]] *= -1
    flipped[out_bias] += theta[layer.outgoing[0]]          # sigma(-z) = 1 - sigma(z)
    np.testing.assert_allclose(pot.logits(flipped), pot.logits(theta), rtol=1e-12)
    assert np.any(np.abs(flipped) >= half)                 # outside the box
    with pytest.raises(ValueError, match="no sign flips"):
        sym.act(arch, theta, [[0, 1]], [[-1, 1]])


def _tiny(act="tanh"):
    return registry.get_architecture("mlp", n_inputs=3, hidden=[3, 2], n_outputs=2,
                                     hidden_activation=act)


def test_check_generic_flags_constructed_fixed_points():
    arch = _tiny()
    l1, l2 = sym.unit_symmetries(arch)
    theta = np.random.default_rng(5).uniform(-1, 1, arch.n_params)
    assert sym.check_generic(arch, theta) == []

    swap = theta.copy()                      # units 0 and 2 of layer 1 identical
    swap[l1.incoming[2]] = swap[l1.incoming[0]]
    swap[l1.outgoing[2]] = swap[l1.outgoing[0]]
    np.testing.assert_array_equal(sym.act(arch, swap, [[2, 1, 0], [0, 1]]), swap)
    (v,) = sym.check_generic(arch, swap)
    assert (v.layer, v.kind, v.units, v.distance) == (1, "equal", (0, 2), 0.0)
    assert "layer 1: units 0 and 2 have equal incoming" in str(v)

    opp = theta.copy()                       # units 0 and 1 of layer 2 opposite
    opp[l2.incoming[1]] = -opp[l2.incoming[0]]
    opp[l2.outgoing[1]] = -opp[l2.outgoing[0]]
    np.testing.assert_array_equal(sym.act(arch, opp, [[0, 1, 2], [1, 0]],
                                          [[1, 1, 1], [-1, -1]]), opp)
    assert [(v.layer, v.kind, v.units) for v in sym.check_generic(arch, opp)] == [
        (2, "opposite", (0, 1))]

    dead = theta.copy()                      # unit 1 of layer 1 switched off entirely
    dead[l1.incoming[1]] = 0.0
    dead[l1.outgoing[1]] = 0.0
    np.testing.assert_array_equal(sym.act(arch, dead, [[0, 1, 2], [0, 1]],
                                          [[1, -1, 1], [1, 1]]), dead)
    assert [(v.kind, v.units) for v in sym.check_generic(arch, dead)] == [("zero", (1,))]

    near = theta.copy()                      # within the tolerance, relative to the layer
    near[l1.incoming[2]] = near[l1.incoming[0]] + 1e-9
    assert [v.kind for v in sym.check_generic(arch, near)] == ["equal"]
    assert sym.check_generic(arch, near, tol=1e-12) == []
    # a logistic layer has no flips: opposite and zero units are not fixed points there
    assert sym.check_generic(_tiny("logistic"), opp) == []
    assert sym.check_generic(_tiny("logistic"), dead) == []


def test_every_fixed_point_on_a_lattice_is_flagged_and_orbits_are_full_otherwise():
    """The check is sufficient: on parameters drawn from {-1, 0, 1}, mostly 0 (51 of the 300
    draws are fixed by some symmetry), every point fixed by a non-identity element is flagged, and every
    unflagged point has |G| distinct images (the orbit-counting form of the multiplicity)."""
    arch = registry.get_architecture("mlp", n_inputs=2, hidden=[2, 2], n_outputs=2,
                                     hidden_activation="tanh")
    elements = list(group(arch))
    order = round(math.exp(sym.log_multiplicity(arch)))
    assert len(elements) == order == 2 * 2 * 2 ** 4
    rng = np.random.default_rng(11)
    n_fixed = n_clean = 0
    for _ in range(300):
        theta = rng.choice([-1.0, 0.0, 1.0], arch.n_params, p=[0.25, 0.5, 0.25])
        # + 0.0 turns -0.0 (a flipped zero) into 0.0, the same parameter
        images = {(sym.act(arch, theta, p, s) + 0.0).tobytes() for p, s in elements}
        fixed = len(images) < order              # a non-trivial stabiliser
        flagged = bool(sym.check_generic(arch, theta))
        assert flagged or not fixed, theta
        n_fixed += fixed
        n_clean += not flagged
    assert n_fixed > 10 and n_clean > 10         # both cases were exercised


def _row(model, g, viol=None):
    return {"model": model, "minimum": 0, "n_params": 3, "energy0": 0.0,
            "log_integral": 1.0, "log_integral_error": 3.0, "log_volume": 2.0,
            "log_evidence": -1.0 if model == "M1" else -104.4, "log_evidence_error": 3.0,
            "laplace_log_evidence": None, "converged": True, "failed": [],
            "log_multiplicity": g, "multiplicity_formula": "n ln 40!",
            "symmetry_violations": viol}


def test_table_shows_the_column_and_the_basin_plus_copies_factor():
    rows = [_row("M1", LN40), _row("M3", 3 * LN40)]
    bf = report.bayes_factors(rows, ["M1", "M3"])
    assert bf[0]["ti"] == pytest.approx(-103.4)
    assert bf[0]["ti_with_copies"] == pytest.approx(-103.4 + 2 * LN40)
    assert bf[0]["generic"] is True
    summary = {"temperature": 1.0, "repeats": 1, "data": "D500", "method": "converged",
               "rows": rows, "models": [], "convergence_checked": False, "converged": None,
               "bayes_factors": bf}
    text = report.format_table(summary)
    assert "ln|G|" in text.splitlines()[1]
    m3 = next(ln for ln in text.splitlines() if ln.startswith("M3 "))
    assert " 330.96 " in m3
    line = next(ln for ln in text.splitlines() if "basin + copies" in ln)
    assert line.startswith("ln[p(M3|D)/p(M1|D)] basin + copies = 117.2 ± 4.2")
    assert "+220.64" in line and "may coincide" not in line

    rows[1] = _row("M3", 3 * LN40, ["layer 2: units 0 and 5 have equal incoming ..."])
    bf = report.bayes_factors(rows, ["M1", "M3"])
    assert bf[0]["generic"] is False
    text = report.format_table({**summary, "rows": rows, "bayes_factors": bf})
    assert " 330.96* " in next(ln for ln in text.splitlines() if ln.startswith("M3 "))
    assert "* minimum 0 of M3 may be fixed by a symmetry" in text
    assert "may coincide" in next(ln for ln in text.splitlines() if "basin + copies" in ln)

    rows = [_row("A", None), _row("B", None)]      # no known symmetry: no copies line
    bf = report.bayes_factors(rows, ["A", "B"])
    assert "ti_with_copies" not in bf[0]
    text = report.format_table({**summary, "rows": rows, "bayes_factors": bf})
    assert "basin + copies" not in text and "ln|G|:" not in text


@pytest.mark.parametrize("act", ["tanh", "logistic"])
def test_agrees_with_the_mackay_symmetry_factor(act):
    """The MacKay evidence counts the same modes from (widths, activation) directly."""
    from thermonet.evidence.mackay.framework import log_symmetry_factor

    arch = registry.get_architecture("mlp-regression", n_inputs=2, hidden=[5, 3], n_outputs=2,
                                     hidden_activation=act)
    assert sym.log_multiplicity(arch) == pytest.approx(log_symmetry_factor([5, 3], act),
                                                       rel=1e-15)
