"""The kernels' house rules: short argument lists, one leapfrog loop, matrix products in their
sub-package, and the sampler contract's deprecation of version 1."""

from __future__ import annotations

import ast
import warnings
from pathlib import Path

import numpy as np
import pytest

from thermonet.api import Proposal, Sampler

KERNELS = Path(__file__).resolve().parents[1] / "thermonet" / "kernels"
MAX_PARAMETERS = 8

def _n_parameters(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    a = node.args
    return (len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs) + (a.vararg is not None)
            + (a.kwarg is not None))


def _long_functions() -> dict[str, int]:
    found = {}
    for path in sorted(KERNELS.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = _n_parameters(node)
                if n > MAX_PARAMETERS:
                    found[f"{path.relative_to(KERNELS).as_posix()}:{node.name}"] = n
    return found


def test_no_kernel_takes_more_than_eight_parameters():
    """Kernels take grouped arguments (NamedTuples, passed as plain tuples) instead of long
    positional lists."""
    long = _long_functions()
    assert not long, (f"kernel functions with more than {MAX_PARAMETERS} parameters: {long}; "
                      "group them in a NamedTuple (thermonet/kernels/leapfrog.py says how)")


def test_the_parameter_count_sees_every_kind_of_parameter():
    tree = ast.parse("def f(a, /, b, *c, d, **e): pass")
    assert _n_parameters(tree.body[0]) == 5


def test_one_leapfrog_loop():
    """Only leapfrog.py loops over the steps of a trajectory; the other kernels pass it their
    gradient (``trajectory_kernels``)."""
    loops = []
    for path in sorted(KERNELS.rglob("*.py")):
        src = path.read_text(encoding="utf-8")
        if "for s in range(n_steps)" in src:
            loops.append(path.name)
    assert loops == ["leapfrog.py"]


def test_matrix_product_modules_live_in_matmul():
    flat = {p.stem for p in KERNELS.glob("*.py")}
    moved = {"backend", "blas", "gemm", "gemm_timing", "calibration", "simd", "reduce"}
    assert not flat & moved
    assert moved <= {p.stem for p in (KERNELS / "matmul").glob("*.py")}


class _V1Info(tuple):
    pass


def test_a_version_1_sampler_loads_with_one_deprecation_warning():
    """A third-party sampler written against contract version 1 (an anonymous 5-tuple from
    ``propose``) still defines, builds and steps, with exactly one DeprecationWarning."""
    from thermonet.registry import SUPPORTED_API_VERSIONS, validate
    from thermonet.testsystems import Gaussian

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")

        class OldSampler(Sampler):
            name = "old"
            api_version = 1
            Config = dict
            State = tuple
            Info = _V1Info

            def init(self, theta0):
                return (np.asarray(theta0, dtype=float), 0.0)

            def propose(self, state, rng):
                theta = state[0] + rng.standard_normal(state[0].shape)
                return theta, 0.0, np.zeros_like(theta), _V1Info((True,)), 0.0

            def step(self, state, rng):
                theta, e, _, info, _ = self.propose(state, rng)
                return (theta, e), info

        validate("sampler", OldSampler)
        s = OldSampler(Gaussian(2).potential(), config={})
        state, _ = s.step(s.init(np.zeros(2)), np.random.default_rng(0))
    deprecations = [w for w in caught if issubclass(w.category, DeprecationWarning)]
    assert len(deprecations) == 1, [str(w.message) for w in caught]
    assert "api_version 1" in str(deprecations[0].message)
    assert 1 in SUPPORTED_API_VERSIONS and OldSampler.api_version == 1
    assert state[0].shape == (2,)
    # the base class's step-size cap and momentum scale serve version 1 as well
    assert s.step_size_max == np.inf and np.array_equal(s.momentum_scale, np.ones(2))


def test_version_2_is_the_default_and_warns_nothing():
    with warnings.catch_warnings():
        warnings.simplefilter("error")

        class NewSampler(Sampler):
            def init(self, theta0):
                return theta0

            def step(self, state, rng):
                return state, None

    assert NewSampler.api_version == 2
    assert Proposal._fields == ("theta", "energy", "grad", "info", "log_u")


@pytest.mark.parametrize("prior_scale, cap, expect", [(None, None, np.inf), (None, 0.3, 0.3),
                                                      (2.0, None, "median")])
def test_step_size_cap_and_momentum_scale_in_the_base_class(prior_scale, cap, expect):
    """``step_size_max``: the config's value, else the median box half-width, else inf;
    ``momentum_scale = sqrt(m T)``."""
    from thermonet.priors import BoxPrior
    from thermonet.samplers.hmc import HMC
    from thermonet.testsystems import Gaussian

    arch = Gaussian(3)
    prior = None
    if prior_scale is not None:
        prior = BoxPrior(np.array([1.0, 2.0, 6.0]))
    s = HMC(arch.potential(), prior=prior, temperature=2.0, masses=np.array([1.0, 4.0, 9.0]),
            step_size_max=cap)
    want = float(np.median(prior.half_width)) if expect == "median" else expect
    assert s.step_size_max == want
    assert np.array_equal(s.momentum_scale, np.sqrt(np.array([2.0, 8.0, 18.0])))
