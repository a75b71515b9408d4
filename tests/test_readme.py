"""The README's Python example runs as written, through the public surface only."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

import thermonet as tn

ROOT = Path(__file__).resolve().parents[1]


def _python_blocks() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def test_readme_python_example_runs(capsys):
    (block,) = _python_blocks()
    imports = set(re.findall(r"^(?:from|import) (\S+)", block, flags=re.M))
    assert imports <= {"numpy", "thermonet"}, imports
    assert "thermonet." not in block.replace("import thermonet as tn", "")
    namespace: dict = {}
    exec(compile(block, "README.md", "exec"), namespace)
    out = capsys.readouterr().out
    assert abs(float(out.splitlines()[0]) - 28960.436) < 1e-3
    info, state = namespace["info"], namespace["state"]
    assert info.energy_k.shape == (8,) and np.all(np.isfinite(info.energy_k))
    assert sorted(state.replica_k) == list(range(8))
    # the ladder is the one asked for: geometric from 0.1 to 10
    np.testing.assert_allclose(namespace["engine"].ladder.temperature_k,
                               np.geomspace(0.1, 10.0, 8), rtol=1e-14)


def test_public_surface_is_lazy_and_complete():
    assert set(tn.__all__) >= {"Ladder", "ReplicaExchange", "HMC", "sample", "run", "Run",
                               "get_architecture", "get_sampler", "get_minimiser",
                               "load_data", "BoxPrior", "evaluate", "__version__"}
    for name in tn.__all__:
        assert getattr(tn, name) is not None
    assert tn.get_sampler("hmc") is tn.HMC


def test_sample_yields_each_step_and_is_reproducible():
    from thermonet.testsystems import Gaussian

    pot = Gaussian(n=3).potential()
    engine = tn.ReplicaExchange(tn.HMC, pot, tn.Ladder.from_temperatures([1.0, 2.0]))
    runs = []
    for _ in range(2):
        streams = engine.make_streams(seed=4)
        state = engine.init(np.zeros(3))
        steps = list(tn.sample(engine, state, streams, n=4))
        assert len(steps) == 4
        runs.append(np.stack([s.slots[0].theta for s, _ in steps]))
    np.testing.assert_array_equal(runs[0], runs[1])
    assert not np.array_equal(runs[0][0], runs[0][1])


def test_python_dash_m_thermonet_help():
    import subprocess
    import sys

    res = subprocess.run([sys.executable, "-m", "thermonet", "--help"], capture_output=True,
                         text=True, check=False, cwd=ROOT)
    assert res.returncode == 0, res.stderr
    assert "Usage" in res.stdout and "run" in res.stdout
