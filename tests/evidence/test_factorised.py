"""The factorisation of MacKay's Hessian: the eigendecomposition and the Cholesky factor give
the same log determinant, inverse diagonal, solves and error bars as NumPy's dense algebra,
and the framework gives the same evidence with either."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.evidence.test_mackay import _exact_log_evidence, _problem
from tests.evidence.test_mackay_classify import _softmax_data
from thermonet.errors import ConfigError
from thermonet.evidence.mackay import factorised
from thermonet.evidence.mackay.classify import (
    GaussianPriorClassifier,
    mackay_classifier,
    moderated_outputs,
)
from thermonet.evidence.mackay.factorised import factorise
from thermonet.evidence.mackay.framework import evaluate_at, predictive, reestimate
from thermonet.registry import get_architecture


def _spd(d=30, seed=0):
    rng = np.random.default_rng(seed)
    m = rng.normal(size=(d, d))
    return m @ m.T / d + np.diag(rng.uniform(0.1, 2.0, d))


@pytest.mark.parametrize("method", ["eigh", "cholesky"])
def test_every_quantity_equals_dense_numpy(method):
    a = _spd()
    before = a.copy()
    fac = factorise(a, method)
    assert fac.method == method and fac.positive_definite
    assert np.array_equal(a, before)                               # not overwritten
    inv = np.linalg.inv(a)
    assert fac.log_det == pytest.approx(np.linalg.slogdet(a)[1], rel=1e-12)
    assert np.allclose(fac.diag_inverse(), np.diag(inv), rtol=1e-10, atol=0)
    assert np.allclose(fac.diag_inverse(), fac.diag_inverse(floored=True), rtol=1e-12)
    b = np.random.default_rng(1).normal(size=(30, 4))
    assert np.allclose(fac.solve(b), np.linalg.solve(a, b), rtol=1e-9, atol=1e-12)
    assert np.allclose(fac.solve(b[:, 0]), np.linalg.solve(a, b[:, 0]), rtol=1e-9, atol=1e-12)
    g = np.random.default_rng(2).normal(size=(5, 2, 30))
    r = fac.whiten(g)
    assert r.shape == g.shape
    assert np.allclose(np.einsum("nkd,nld->nkl", r, r),
                       np.einsum("nkd,de,nle->nkl", g, inv, g), rtol=1e-9, atol=1e-12)
    assert np.allclose(fac.diagonal(), np.diag(a), rtol=1e-12)
    assert np.allclose(fac.covariance(), inv, rtol=1e-9, atol=1e-12)
    assert (fac.eigenvalues is None) == (method == "cholesky")
    s_root = fac.from_white(np.eye(30))                               # S, S S^T = A^-1
    assert np.allclose(s_root @ s_root.T, inv, rtol=1e-9, atol=1e-12)
    v = b[:, 1]
    assert np.allclose(fac.to_white(v), s_root.T @ v, rtol=1e-10, atol=1e-12)
    assert np.allclose(fac.from_white(v), s_root @ v, rtol=1e-10, atol=1e-12)
    assert fac.quadratic(v) == pytest.approx(float(v @ a @ v), rel=1e-12)
    z = np.random.default_rng(3).normal(size=30)                    # a white point's length
    assert fac.quadratic(fac.from_white(z)) == pytest.approx(float(z @ z), rel=1e-10)


def test_auto_switches_at_the_size_limit_and_a_saddle_falls_back_to_eigh(monkeypatch):
    monkeypatch.setattr(factorised, "EIGH_MAX", 29)
    assert factorise(_spd(29)).method == "eigh"
    assert factorise(_spd(30)).method == "cholesky"
    a = _spd(30)
    a[0, 0] = -5.0                                                  # indefinite
    fac = factorise(a, "cholesky")
    assert fac.method == "eigh" and not fac.positive_definite and fac.lambda_min < 0
    assert math.isnan(fac.log_det) and np.all(np.isnan(fac.diag_inverse()))
    assert np.all(np.isfinite(fac.diag_inverse(floored=True)))
    a[1, 1] = np.nan
    assert not factorise(a, "cholesky").positive_definite
    with pytest.raises(ConfigError, match="expected one of"):
        factorise(a, "lu")


def test_the_framework_is_the_same_with_either_factorisation():
    pot = _problem()
    runs = {m: reestimate(pot, np.zeros(pot.n_params), [1.0, 1.0, 1.0], tol=1e-10,
                          factorisation=m) for m in ("eigh", "cholesky")}
    e, c = runs["eigh"], runs["cholesky"]
    assert c.factorised is not None and c.factorised.method == "cholesky" and c.converged
    assert c.eigenvalues.size == 0
    assert c.log_evidence_fixed == pytest.approx(e.log_evidence_fixed, rel=1e-10)
    assert c.log_evidence_fixed == pytest.approx(
        _exact_log_evidence(pot, [*c.alpha, c.beta]), rel=1e-8)
    assert np.allclose(c.alpha, e.alpha, rtol=1e-8) and c.gamma == pytest.approx(e.gamma)
    x = np.random.default_rng(3).normal(size=(6, pot.phi.shape[1]))
    for a, b in zip(predictive(c, pot, x), predictive(e, pot, x), strict=True):
        assert np.allclose(a, b, rtol=1e-9)


def test_a_classifier_is_the_same_with_either_factorisation():
    data = _softmax_data()
    arch = get_architecture("mlp", n_inputs=2, hidden=[3], n_outputs=3,
                            hidden_activation="tanh")
    groups = {"layer1": np.arange(0, 9), "layer2": np.arange(9, arch.n_params)}
    # Both factorisations are evaluated at the same weight decays: re-estimated separately,
    # each run stops at an alpha set by its own rounding, and the stopping point (not the
    # factorisation) would then decide the difference.
    fit = mackay_classifier(arch, data, seed=0, tol=1e-7, max_iter=300, groups=groups,
                            factorisation="eigh")
    assert fit.converged
    pot = GaussianPriorClassifier(arch.potential(data), groups)
    runs = {m: evaluate_at(pot, fit.theta, fit.alpha, factorisation=m)
            for m in ("eigh", "cholesky")}
    e, c = runs["eigh"], runs["cholesky"]
    assert c.factorised is not None and c.factorised.method == "cholesky"
    # backward-stable factorisations of A (d x d, condition kappa) perturb ln det A by at
    # most about d^2 kappa eps, and w_MP (a stationary point of the evidence's exponent)
    # only to second order: the tolerance is that bound, times 10
    lam = e.eigenvalues
    bound = 10.0 * lam.size ** 2 * (lam[-1] / lam[0]) * np.finfo(float).eps
    assert abs(c.log_evidence - e.log_evidence) <= bound
    assert np.allclose(c.gamma_groups, e.gamma_groups, rtol=0, atol=bound)
    pot.set_hyperparameters(c.alpha, 1.0)
    pc, sc = moderated_outputs(c, pot, data.x[:5])
    pe, se = moderated_outputs(e, pot, data.x[:5])
    assert np.allclose(pc, pe, rtol=0, atol=bound) and np.allclose(sc, se, rtol=0, atol=bound)
