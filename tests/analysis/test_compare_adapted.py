"""`compare` on runs whose warm-ups placed their rungs differently (one configuration, other
seeds): compared at the temperatures they all share, with the same statistics as on those
columns alone."""

from __future__ import annotations

import numpy as np
import pytest

from tests.runs import ADAPTED_LADDER, invoke, variant
from thermonet.analysis.compare import compare_runs
from thermonet.analysis.convergence import chain_diagnostics
from thermonet.io.trace import read_trace

RUN = variant("gaussian_3d", run="""
    n_iterations = 60
    checkpoint_every = 20
""", sampler="n_leapfrog = 4", ladder=ADAPTED_LADDER)


@pytest.fixture(scope="module")
def adapted_runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("adapted")
    cfg = base / "run.toml"
    cfg.write_text(RUN)
    dirs = []
    for seed in (1, 2):
        out = base / f"s{seed}"
        res = invoke("-q", "run", cfg, "--out", out, "--seed", seed)
        assert res.exit_code == 0, res.output
        dirs.append(out)
    return dirs


def _temperatures(run_dir):
    from thermonet.analysis.run_record import open_run

    return open_run(run_dir).temperatures


def test_adapted_ladders_are_compared_at_their_shared_rungs(adapted_runs):
    a, b = (_temperatures(d) for d in adapted_runs)
    assert not np.array_equal(a, b)            # the warm-ups placed the rungs differently
    shared = [t for t in a if t in set(b.tolist())]
    assert {0.1, 1.0, np.inf} <= set(shared)   # the two ends and the anchor never move
    c = compare_runs(adapted_runs, discard=0.0)
    assert c["common_ladder"] is False
    assert c["temperatures"] == shared
    # the same R-hat and ESS as the chain diagnostics of those columns of the two traces
    cols = [read_trace(d)["energy_k"][:, [list(t).index(s) for s in shared]]
            for d, t in zip(adapted_runs, (a, b), strict=True)]
    n = min(len(x) for x in cols)
    expected = chain_diagnostics(np.stack([x[len(x) - n:] for x in cols]))
    np.testing.assert_array_equal(c["train_energy"]["rhat"], expected["rhat"])
    np.testing.assert_array_equal(c["train_energy"]["ess_bulk"], expected["ess_bulk"])


def test_the_command_says_which_rungs_it_compared(adapted_runs):
    res = invoke("compare", *adapted_runs)
    assert res.exit_code == 0, res.output
    assert "ladders   adapted per run: compared at the" in res.output
