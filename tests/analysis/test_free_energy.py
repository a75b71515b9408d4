"""log Z along a ladder with a prior rung, against the exact values for a Gaussian in a box."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import special

from thermonet.analysis.free_energy import free_energies
from thermonet.priors import BoxPrior
from thermonet.samplers.hmc import HMC
from thermonet.tempering import DeterministicEvenOdd, Ladder, ReplicaExchange
from thermonet.testsystems import Gaussian

Z = 4.5


def _exact_log_z(beta, k, a):
    """log ∫ exp(-beta sum k_i w_i^2 / 2) dw / (2a)^n over the box |w_i| < a."""
    if beta == 0.0:
        return 0.0
    s = np.sqrt(beta * k / 2)
    return float(np.sum(np.log(special.erf(a * s) * np.sqrt(np.pi) / s / (2 * a))))


@pytest.mark.slow
def test_stepping_stone_and_beta_integration_recover_log_z_of_a_gaussian_in_a_box():
    k = np.array([1.0, 3.0, 10.0])
    arch = Gaussian(3, stiffness=list(k), prior_scale=6.0)        # box |w_i| < 3
    ladder = Ladder.geometric(0.1, 50.0, 12).with_prior_rung()
    re = ReplicaExchange(HMC, arch.potential(), ladder, prior=BoxPrior.for_architecture(arch),
                         swap=DeterministicEvenOdd(),
                         sampler_config=HMC.Config(n_leapfrog=6, step_size=0.2))
    streams = re.make_streams(21)
    st = re.burn_in(arch.initial_draw, streams, blocks=(20,))
    rows = []
    for i in range(1, 6001):
        st, info = re.step(st, streams, iteration=i)
        if i > 300:
            rows.append(info.energy_k)
    fe = free_energies(re.ladder.beta_k, np.array(rows))
    assert fe.absolute
    exact = np.array([_exact_log_z(b, k, 3.0) for b in re.ladder.beta_k])
    for j in range(ladder.n_temperatures):
        assert abs(fe.log_z_ss_k[j] - exact[j]) < Z * fe.log_z_ss_err_k[j] + 1e-9, j
    # the trapezoid rule is biased by the rung spacing; at the coldest rung it must still be
    # within a few percent of the depth log Z(beta_0)
    assert abs(fe.log_z_ti_k[0] - exact[0]) < 0.05 * abs(exact[0])
    # and a wrong energy record is caught: shift the energies of one rung
    bad = np.array(rows)
    bad[:, 2] += 0.5                      # rung 2 weights the ratio to rung 1 by exp(-dbeta E)
    moved = free_energies(re.ladder.beta_k, bad)
    assert abs(moved.log_z_ss_k[0] - exact[0]) > Z * moved.log_z_ss_err_k[0]


def test_the_joint_error_bars_are_batch_means_of_each_iterations_summed_contributions():
    """Independent NumPy references: the trapezoid error is the batch-means error of each
    iteration's trapezoid integral (np.trapezoid), the stepping-stone error that of the
    delta method's series sum_j exp(-d_j E_j+1,i) / mean_i exp(-d_j E_j+1,i); the
    independent-rung errors add per-rung batch-means errors in quadrature."""
    from thermonet.stats import batch_means

    rng = np.random.default_rng(3)
    beta = np.array([2.0, 1.0, 0.5, 0.2, 0.0])
    # correlated energies: a shared AR(1) component at every rung, plus rung noise
    n = 2000
    common = np.zeros(n)
    for i in range(1, n):
        common[i] = 0.9 * common[i - 1] + rng.normal()
    e = 3.0 + 0.5 / (beta + 0.3) + common[:, None] + 0.5 * rng.normal(size=(n, 5))
    fe = free_energies(beta, e)
    for k in range(4):
        b = beta[k:]
        # beta descends along the slots, so the trapezoid over x = beta is already -int E
        lz = np.trapezoid(e[:, k:], x=b, axis=1)
        assert fe.log_z_ti_k[k] == pytest.approx(lz.mean(), rel=1e-12)
        assert fe.log_z_ti_err_k[k] == pytest.approx(batch_means(lz)[1], rel=1e-10)
        r = np.exp(-(b[:-1] - b[1:])[None] * e[:, k + 1:])
        y = (r / r.mean(axis=0)).sum(axis=1)
        assert fe.log_z_ss_k[k] == pytest.approx(np.log(r.mean(axis=0)).sum(), rel=1e-12)
        assert fe.log_z_ss_err_k[k] == pytest.approx(batch_means(y)[1], rel=1e-10)
        indep = np.sqrt(sum((batch_means(r[:, j])[1] / r[:, j].mean()) ** 2
                            for j in range(r.shape[1])))
        assert fe.log_z_ss_indep_err_k[k] == pytest.approx(indep, rel=1e-10)
    assert fe.log_z_ss_err_k[4] == fe.log_z_ti_err_k[4] == 0.0      # the prior rung: exact
    # positively correlated rungs: the joint error of the sum is larger than in quadrature
    assert fe.log_z_ti_err_k[0] > 1.5 * fe.log_z_ti_indep_err_k[0]


@pytest.mark.slow
def test_the_joint_error_bar_covers_the_exact_log_z_as_often_as_it_should():
    """40 independent runs (fixed seeds): |stepping stone - exact| < 2 sigma at the coldest
    rung in a fraction consistent with the 2-sigma coverage of a batch-means error with 19
    degrees of freedom (0.94), within 3 binomial standard errors; the independent-rung error
    bar, blind to the swaps' correlations, covers far less often (0.57-0.74 in
    benchmarks/free_energy_coverage.py)."""
    k = np.array([1.0, 3.0, 10.0])
    arch = Gaussian(3, stiffness=list(k), prior_scale=6.0)
    ladder = Ladder.geometric(0.1, 50.0, 10).with_prior_rung()   # the benchmark's ladder
    exact = _exact_log_z(ladder.beta_k[0], k, 3.0)
    joint, indep = [], []
    for seed in range(40):
        re = ReplicaExchange(HMC, arch.potential(), ladder,
                             prior=BoxPrior.for_architecture(arch), swap=DeterministicEvenOdd(),
                             sampler_config=HMC.Config(n_leapfrog=5, step_size=0.2))
        streams = re.make_streams(1000 + seed)
        st = re.burn_in(arch.initial_draw, streams, blocks=(20,))
        rows = []
        for i in range(1, 2401):
            st, info = re.step(st, streams, iteration=i)
            if i > 400:
                rows.append(info.energy_k)
        fe = free_energies(re.ladder.beta_k, np.array(rows))
        dev = abs(fe.log_z_ss_k[0] - exact)
        joint.append(dev < 2 * fe.log_z_ss_err_k[0])
        indep.append(dev < 2 * fe.log_z_ss_indep_err_k[0])
    p = 0.94
    binomial = np.sqrt(p * (1 - p) / 40)
    assert abs(np.mean(joint) - p) < 3 * binomial, np.mean(joint)
    assert np.mean(indep) < np.mean(joint) - 2 * binomial, (np.mean(indep), np.mean(joint))
