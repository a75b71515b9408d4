"""What a cold run compiles, and only that.

One process per hidden activation, with an empty Numba cache, evaluates a network's gradient
and runs its reflecting trajectory and a reflecting TI bridge trajectory (what a
quickstart-like run and a TI run use). Each process is a cold compile (about 20 CPU s), so the
tests below share the two.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Callable

import pytest

from tests.kernels.compiled_names import RECORD_COMPILED

_CHILD = RECORD_COMPILED + textwrap.dedent("""
    import sys
    import numpy as np
    from thermonet.architectures.mlp import MLP
    from thermonet.evidence.ti.integration import BridgePotential, Reference
    from thermonet.kernels import leapfrog as lf

    arch = MLP(n_inputs=6, hidden=[5], n_outputs=3, hidden_activation=sys.argv[1])
    rng = np.random.default_rng(0)
    pot = arch.potential(x=rng.normal(size=(40, 6)), y=rng.integers(0, 3, 40))
    n = arch.n_params
    theta = 0.3 * rng.normal(size=n)
    ref = Reference(theta, np.ones(n), np.zeros(n, bool), pot.energy(theta))
    for p in (pot, BridgePotential(pot, ref, 0.5)):
        _, g = p.energy_and_grad(theta)
        p.trajectory(theta.copy(), np.ones(n), g.copy(), np.ones(n), 0.01, 3,
                     lf.WALL_REFLECT, np.full(n, 9.0), 10.0)
    print(" ".join(compiled))
""")


@pytest.fixture(scope="module")
def cold_run(tmp_path_factory) -> Callable[[str], list[str]]:
    """``cold_run(hidden)``: the names the cold process compiled, in order (run once each)."""
    runs: dict[str, list[str]] = {}

    def names(hidden: str) -> list[str]:
        if hidden not in runs:
            env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path_factory.mktemp(hidden))}
            out = subprocess.run([sys.executable, "-c", _CHILD, hidden], env=env,
                                 capture_output=True, text=True, timeout=600)
            assert out.returncode == 0, out.stderr
            runs[hidden] = out.stdout.split()
        return runs[hidden]

    return names


#: the end-point mode's helpers, which a reflecting trajectory must not compile
ENDPOINT_ONLY = {"runs", "drift_check", "drift_runaway", "kick_drift_runaway",
                 "kick_drift_check_runs", "kick_drift_check", "_kick_drift_count", "_drift_count"}


@pytest.mark.slow
def test_a_cold_reflecting_run_compiles_only_what_it_uses(cold_run):
    """The block gradient compiles once (the kick mode's flag is a run-time value, not a
    literal type that would compile it again); none of the end-point mode's helpers, not
    ``loss_and_kick`` (the trajectory calls the kick-mode block directly) and not the
    gradient adapter ``_mlp_gradient`` as a kernel of its own (it is inlined into the
    trajectory), nor the network helpers ``n_params``, ``fan_in`` and ``work_size`` (plain
    Python)."""
    names = cold_run("logistic")
    assert {"mlp_trajectory_reflect", "mlp_bridge_trajectory_reflect", "drift_reflect"} \
        <= set(names)
    assert names.count("block_loss_and_grad") == 1
    assert not ENDPOINT_ONLY & set(names)
    assert not {"loss_and_kick", "mlp_trajectory_endpoint", "_mlp_gradient", "n_params",
                "fan_in", "work_size"} & set(names)


@pytest.mark.slow
@pytest.mark.parametrize("hidden, own, other", [
    ("logistic", {"sigmoid_inplace", "logistic_hidden_delta"},
     {"tanh_inplace", "tanh_hidden_delta"}),
    # sigmoid_inplace is also the logistic output layer's, chosen at run time: it compiles
    ("tanh", {"tanh_inplace", "tanh_hidden_delta"}, {"logistic_hidden_delta"}),
])
def test_a_cold_run_compiles_only_its_hidden_activation(cold_run, hidden, own, other):
    """The hidden units' forward and backward kernels compile, the other activation's not
    (``thermonet.kernels.mlp.activation_code`` types the code at compile time)."""
    names = set(cold_run(hidden))
    assert {"block_loss_and_grad", "mlp_trajectory_reflect"} <= names
    assert own <= names
    assert not other & names
