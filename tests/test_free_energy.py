"""log Z along a ladder with a prior rung, against the exact values for a Gaussian in a box."""

from __future__ import annotations

import numpy as np
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
