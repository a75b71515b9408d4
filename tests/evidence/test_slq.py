"""Stochastic Lanczos quadrature and Hutchinson's estimator (``factorisation = "slq"``): the
estimates of ln det A and of the group traces of A^-1 agree with dense algebra within their
own standard errors, and the framework evaluated with them agrees with the exact one."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.evidence.test_mackay_classify import _softmax_data
from thermonet.errors import ConfigError
from thermonet.evidence.mackay.classify import GaussianPriorClassifier, mackay_classifier
from thermonet.evidence.mackay.framework import evaluate_at
from thermonet.evidence.mackay.stochastic import stochastic_factorise
from thermonet.registry import get_architecture


def _spd(d=300, seed=0):
    rng = np.random.default_rng(seed)
    m = rng.normal(size=(d, d))
    return m @ m.T / d + np.diag(rng.uniform(0.05, 3.0, d))


def test_estimates_agree_with_dense_algebra_within_their_errors():
    a = _spd()
    st = stochastic_factorise(lambda v: v @ a, 300, n_probes=64, seed=1)
    assert st.positive_definite and st.method == "slq" and st.eigenvalues is None
    exact = np.linalg.slogdet(a)[1]
    assert abs(st.log_det - exact) < 4 * st.log_det_error and st.log_det_error < 0.01 * exact
    inv = np.linalg.inv(a)
    for g in (np.arange(0, 100), np.arange(100, 300)):
        est = float(st.diag_inverse()[g].sum())
        assert abs(est - np.trace(inv[np.ix_(g, g)])) < 4 * st.group_trace_error(g)
    b = np.random.default_rng(2).normal(size=300)
    assert np.allclose(st.solve(b), inv @ b, rtol=0, atol=1e-4 * np.abs(inv @ b).max())
    assert 0 < st.lambda_min and st.lambda_min >= np.linalg.eigvalsh(a)[0] * (1 - 1e-8)
    # the same seed, the same probes: identical estimates
    again = stochastic_factorise(lambda v: v @ a, 300, n_probes=64, seed=1)
    assert again.log_det == st.log_det
    with pytest.raises(ConfigError, match="factorised Hessian"):
        st.whiten(np.ones((1, 300)))


def test_an_indefinite_operator_is_reported_not_positive_definite():
    a = _spd(100)
    a[0, 0] = -5.0
    st = stochastic_factorise(lambda v: v @ a, 100, n_probes=8, seed=1)
    assert not st.positive_definite and math.isnan(st.log_det)
    assert np.all(np.isnan(st.diag_inverse()))
    with pytest.raises(ConfigError, match="n_probes"):
        stochastic_factorise(lambda v: v @ a, 100, n_probes=1)


def test_the_framework_with_slq_matches_the_dense_one_at_fixed_hyperparameters():
    data = _softmax_data()
    arch = get_architecture("mlp", n_inputs=2, hidden=[3], n_outputs=3,
                            hidden_activation="logistic")
    groups = {"layer1": np.arange(0, 9), "layer2": np.arange(9, arch.n_params)}
    r = mackay_classifier(arch, data, seed=0, tol=1e-6, max_iter=200, groups=groups)
    pot = GaussianPriorClassifier(arch.potential(data), groups)
    dense = evaluate_at(pot, r.theta, r.alpha)
    slq = evaluate_at(pot, r.theta, r.alpha, factorisation="slq")
    fac = slq.factorised
    assert fac is not None and fac.method == "slq" and fac.n_products > 0
    assert np.allclose(slq.theta, dense.theta, atol=1e-6)
    assert abs(slq.log_evidence_fixed - dense.log_evidence_fixed) < 4 * 0.5 * fac.log_det_error
    for c, idx in enumerate(groups.values()):
        err = r.alpha[c] * fac.group_trace_error(idx)
        assert abs(slq.gamma_groups[c] - dense.gamma_groups[c]) < 4 * err + 1e-9
    with pytest.raises(ConfigError, match="expected one of"):
        evaluate_at(pot, r.theta, r.alpha, factorisation="lanczos")
