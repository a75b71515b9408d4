"""The measured choice of the matrix-product backend (thermonet/kernels/matmul/calibration.py,
backend.py): what is measured, the per-machine cache (hit, miss, corrupt, unwritable, key),
THERMONET_BLAS and resume precedence, the record in a run and `thermonet calibrate`.

Nothing here asserts a speed: the measurement is replaced by fixed rates where the cache logic
is tested, and the real measurement is checked for what it computes, not how fast.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from tests.runs import TINY as GAUSS
from thermonet.cli import main
from thermonet.io import checkpoint as ckpt
from thermonet.kernels.matmul import backend, calibration

MKL_LIB, _ = backend.load_mkl()
needs_mkl = pytest.mark.skipif(MKL_LIB is None, reason="MKL is not installed")


def _rates(numpy_us: float, mkl_us: float | None) -> dict:
    out = {"numpy": {"us_per_block": numpy_us, "gflops": 8.0 / numpy_us * 1e3, "rounds": 5}}
    if mkl_us is not None:
        out["mkl"] = {"us_per_block": mkl_us, "gflops": 8.0 / mkl_us * 1e3, "rounds": 5}
    return out


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty cache directory, and a measurement that counts its calls (mkl 10% faster)."""
    monkeypatch.setenv("THERMONET_CACHE_DIR", str(tmp_path / "cache"))
    calls = []

    def fake_measure(dgemms, budget_s=calibration.BUDGET_S):
        calls.append(sorted(dgemms))
        return _rates(100.0, 90.0 if "mkl" in dgemms else None)

    monkeypatch.setattr(calibration, "measure", fake_measure)
    return tmp_path / "cache" / calibration.CACHE_FILE, calls


CANDIDATES = ("numpy", "mkl")


def _cal(names=CANDIDATES, **kw):
    return calibration.calibrate(names, lambda: dict.fromkeys(names), **kw)


# --- what is measured ---------------------------------------------------------------------

def test_products_are_the_kernels_block_products():
    """11 products per block; their FLOP are the 62,560 per data point of docs/performance.md
    (forward and weight gradients of every layer, input deltas of every layer but the first)."""
    for name in ("numpy", "mkl"):
        prods = calibration.products(name)
        assert len(prods) == 11
        assert calibration.flops(prods) == 62_560 * calibration.ROWS
    # the np.dot kernels take the transposed small weights: only the first forward is (N, T)
    assert [p[:2] for p in calibration.products("numpy")[:4]] == [(False, True)] + [(False, False)] * 3
    assert [p[:2] for p in calibration.products("mkl")[:4]] == [(False, True)] * 4


@pytest.mark.parametrize("name", ["numpy", "mkl"])
def test_measured_calls_compute_the_products(name):
    """The ctypes calls the calibration times are the right products (a wrong transposition or
    leading dimension would give other numbers)."""
    dgemms = backend.candidates()
    if name not in dgemms:
        pytest.skip("MKL is not installed")
    prods = calibration.products(name)
    calls, arrays = calibration.block_calls(dgemms[name], prods, np.random.default_rng(1))
    for f, *args in calls:
        f(*args)
    for i, (ta, tb, m, n, k) in enumerate(prods):
        a, b, c = arrays[3 * i: 3 * i + 3]
        assert c.shape == (m, n)
        ref = (a.T if ta else a) @ (b.T if tb else b)
        np.testing.assert_allclose(c, ref, rtol=1e-12, atol=1e-12 * np.abs(ref).max())


def test_real_measurement_reports_every_candidate():
    dgemms = backend.candidates()
    rates = calibration.measure(dgemms, budget_s=0.01)
    assert set(rates) == set(dgemms)
    for r in rates.values():
        assert r["rounds"] >= 5 and r["us_per_block"] > 0
        flop = calibration.flops(calibration.products("numpy"))
        assert r["gflops"] == pytest.approx(flop / r["us_per_block"] / 1e3)


def test_choice_rule_keeps_numpy_on_a_tie():
    assert calibration.choose(_rates(100.0, 97.0)) == "mkl"
    assert calibration.choose(_rates(100.0, 99.0)) == "numpy"     # within MARGIN
    assert calibration.choose(_rates(100.0, 120.0)) == "numpy"
    assert calibration.choose(_rates(100.0, None)) == "numpy"


# --- the cache ----------------------------------------------------------------------------

def test_cache_miss_then_hit(cache):
    path, calls = cache
    first = _cal()
    assert first["how"] == "measured" and first["backend"] == "mkl" and len(calls) == 1
    stored = json.loads(path.read_text())
    assert list(stored["entries"]) == [calibration.key_id(calibration.machine_key())]
    second = _cal()
    assert second["how"] == "cached" and len(calls) == 1
    assert second["rates"] == first["rates"] and second["backend"] == "mkl"
    forced = _cal(force=True)
    assert forced["how"] == "measured" and len(calls) == 2


def test_new_candidate_set_is_measured_again(cache):
    _, calls = cache
    _cal(("numpy",))
    assert _cal()["how"] == "measured" and len(calls) == 2


def test_key_changes_with_cpu_and_library_versions(monkeypatch):
    base = calibration.key_id(calibration.machine_key("MKL 1"))
    assert calibration.key_id(calibration.machine_key("MKL 1")) == base
    assert calibration.key_id(calibration.machine_key("MKL 2")) != base
    monkeypatch.setattr(np, "__version__", "0.0.1")
    assert calibration.key_id(calibration.machine_key("MKL 1")) != base
    monkeypatch.undo()
    real = metadata.version

    def numba_changed(dist):
        return "0.0.1" if dist == "numba" else real(dist)

    monkeypatch.setattr(metadata, "version", numba_changed)
    key = calibration.machine_key("MKL 1")
    assert key["numba"] == "0.0.1" and calibration.key_id(key) != base
    monkeypatch.undo()
    key = calibration.machine_key("MKL 1")
    for field in ("cpu_model", "cpu_name", "avx2", "avx512f", "compiled_avx512", "n_cpus",
                  "scipy", "own_products"):
        assert field in key
        other = {**key, field: "another"}
        assert calibration.key_id(other) != base
    # kernels held to AVX2 on an AVX-512 CPU are measured apart from the native ones
    monkeypatch.setenv("NUMBA_CPU_NAME", "haswell")
    monkeypatch.setenv("NUMBA_CPU_FEATURES", "-avx512f")
    held = calibration.machine_key("MKL 1")
    assert held["compiled_avx512"] is False
    assert (calibration.key_id(held) != base) == bool(key["compiled_avx512"])
    monkeypatch.setenv("NUMBA_CPU_FEATURES", "+avx2,+avx512f,-prefer-256-bit")
    assert calibration.machine_key("MKL 1")["compiled_avx512"] is True
    # the own products' source is part of the key (a changed gemm.py is measured again)
    from thermonet.kernels.matmul import gemm

    with open(gemm.__file__, "rb") as fh:
        digest = hashlib.sha256(fh.read()).hexdigest()[:16]
    assert key["own_products"] == digest


def test_version_change_measures_again_and_keeps_both(cache):
    path, calls = cache
    _cal(mkl_version="MKL 1")
    again = _cal(mkl_version="MKL 2")
    assert again["how"] == "measured" and len(calls) == 2
    assert len(json.loads(path.read_text())["entries"]) == 2
    assert _cal(mkl_version="MKL 1")["how"] == "cached"


@pytest.mark.parametrize("content", ["{not json", '{"entries": {"k": {"backend": "cuda"}}}',
                                     "[1, 2]", "\udcff"])
def test_corrupt_cache_warns_and_is_replaced(cache, content):
    path, calls = cache
    path.parent.mkdir(parents=True)
    path.write_text(content, errors="surrogateescape")
    with pytest.warns(RuntimeWarning, match="measuring the matrix-product backends again"):
        record = _cal()
    assert record["how"] == "measured" and len(calls) == 1
    assert _cal()["how"] == "cached"     # replaced by a good file


def test_unwritable_cache_warns_and_still_chooses(cache, tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("THERMONET_CACHE_DIR", str(blocker / "sub"))   # a file in the way
    with pytest.warns(RuntimeWarning, match="could not write the calibration cache"):
        record = _cal()
    assert record["backend"] == "mkl"


def test_cache_dir_follows_the_platform_conventions(monkeypatch):
    monkeypatch.delenv("THERMONET_CACHE_DIR", raising=False)
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setenv("XDG_CACHE_HOME", "/x/cache")
    assert calibration.cache_dir() == os.path.join("/x/cache", "thermonet")
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert calibration.cache_dir() == os.path.expanduser("~/.cache/thermonet")
    monkeypatch.setenv("THERMONET_CACHE_DIR", "/y")
    assert calibration.cache_dir() == "/y"


# --- precedence: THERMONET_BLAS, the cache, pin -------------------------------------------

_PROBE = r"""
import json, sys
from thermonet.kernels.matmul import backend
if len(sys.argv) > 1:
    print(json.dumps({"pinned": backend.pin(sys.argv[1], "test")}))
print(json.dumps(backend.choice()))
"""


def _probe(tmp_path, blas, cached=None, pin=None):
    env = {**os.environ, "THERMONET_CACHE_DIR": str(tmp_path)}
    env.pop("THERMONET_BLAS", None)
    if blas is not None:
        env["THERMONET_BLAS"] = blas
    if cached is not None:         # this machine's entry says `cached` is faster
        key = calibration.machine_key(backend.mkl_version(MKL_LIB) if MKL_LIB else "")
        rates = _rates(100.0, 50.0 if cached == "mkl" else 150.0)
        if MKL_LIB is None:
            rates.pop("mkl")
        calibration.write_cache(str(tmp_path / calibration.CACHE_FILE), {
            calibration.key_id(key): {"backend": cached, "key": key, "rates": rates,
                                      "measured_utc": "x",
                                      "load": {"loadavg_1min": 0.0, "n_cpus": 1}}})
    out = subprocess.run([sys.executable, "-c", _PROBE, *([pin] if pin else [])], env=env,
                         capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    return [json.loads(line) for line in out.stdout.splitlines()]


@needs_mkl
@pytest.mark.parametrize("cached", ["mkl", "numpy"])
def test_auto_uses_the_cached_choice(tmp_path, cached):
    (c,) = _probe(tmp_path, None, cached)
    assert (c["backend"], c["how"]) == (cached, "cached")
    assert c["reason"].startswith("measured earlier on this machine")
    (c,) = _probe(tmp_path, "auto", cached)
    assert (c["backend"], c["how"]) == (cached, "cached")


@needs_mkl
@pytest.mark.parametrize("forced", ["numpy", "openblas", "mkl"])
def test_thermonet_blas_overrides_the_cache(tmp_path, forced):
    want = "numpy" if forced == "openblas" else forced
    (c,) = _probe(tmp_path, forced, "numpy" if want == "mkl" else "mkl")
    assert (c["backend"], c["how"], c["rates"]) == (want, "override", {})


@needs_mkl
def test_pin_wins_over_the_cache_but_not_over_thermonet_blas(tmp_path):
    pinned, c = _probe(tmp_path, None, "mkl", pin="numpy")
    assert pinned == {"pinned": True} and (c["backend"], c["how"]) == ("numpy", "pinned")
    pinned, c = _probe(tmp_path, "mkl", None, pin="numpy")
    assert pinned == {"pinned": False} and (c["backend"], c["how"]) == ("mkl", "override")


@needs_mkl
def test_a_failing_measurement_falls_back_to_numpy_with_a_warning(tmp_path):
    code = ("import json, warnings\n"
            "from thermonet.kernels.matmul import backend, calibration\n"
            "def broken(dgemms, budget_s=0.5):\n"
            "    raise OSError('no timer')\n"
            "calibration.measure = broken\n"
            "with warnings.catch_warnings(record=True) as caught:\n"
            "    warnings.simplefilter('always')\n"
            "    c = backend.choice()\n"
            "print(json.dumps([c, [str(w.message) for w in caught]]))\n")
    env = {**os.environ, "THERMONET_CACHE_DIR": str(tmp_path)}
    env.pop("THERMONET_BLAS", None)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    c, caught = json.loads(out.stdout.strip().splitlines()[-1])
    assert (c["backend"], c["how"]) == ("numpy", "fallback")
    assert "OSError: no timer" in c["reason"] and caught == [c["reason"]]


@pytest.mark.skipif(MKL_LIB is not None, reason="MKL is installed")
def test_without_mkl_numpy_and_own_are_measured(tmp_path):
    (c,) = _probe(tmp_path, None)
    assert c["how"] == "measured" and set(c["rates"]) == {"numpy", "own"}
    assert c["backend"] == calibration.choose(c["rates"])
    assert (tmp_path / calibration.CACHE_FILE).exists()


def test_the_chosen_backend_matches_the_numpy_reference(d500):
    """Whatever was chosen in this process, M(3)'s energy and gradient agree with an
    independent NumPy implementation within the documented rounding (docs/performance.md:
    the backends agree to ~1e-13 relative)."""
    from tests.reference import energy_and_grad
    from thermonet.architectures.mlp import M3

    x, y = d500.x[:300], d500.y[:300]             # three blocks of rows
    pot = M3().potential(x=x, y=y)
    theta = np.random.default_rng(3).uniform(-0.06, 0.06, pot.n_params)
    e, g = pot.energy_and_grad(theta)
    e_ref, g_ref = energy_and_grad(theta, (256, 40, 40, 40, 10), x, y)
    assert e == pytest.approx(e_ref, rel=1e-12)
    assert np.max(np.abs(g - g_ref)) <= 1e-11 * np.max(np.abs(g_ref))


# --- a run records the choice; `thermonet info` and `thermonet calibrate` print it --------

def test_run_records_the_backend_and_info_prints_it(tmp_path):
    cfg = tmp_path / "g.toml"
    cfg.write_text(GAUSS)
    out = tmp_path / "r"
    res = CliRunner().invoke(main, ["-q", "run", str(cfg), "--out", str(out)])
    assert res.exit_code == 0, res.output
    ck = ckpt.read_checkpoint(out)
    now = backend.choice()
    assert ck.blas_backend == now["backend"]
    assert ck.blas_choice == {k: now[k] for k in ("how", "reason", "rates")}
    assert ckpt.recorded_backend(out) == now["backend"]
    text = CliRunner().invoke(main, ["info", str(out)]).output
    assert f"blas       {now['backend']} ({now['reason']})" in text
    s = json.loads(CliRunner().invoke(main, ["info", str(out), "--json"]).stdout)
    assert (s["blas_backend"], s["blas_reason"]) == (now["backend"], now["reason"])
    assert f"matrix products: {now['backend']}" in (out / "thermonet.log").read_text()


@pytest.mark.slow
@needs_mkl
def test_resume_keeps_the_checkpoints_backend(tmp_path):
    """A run written with np.dot resumes with np.dot although the cache now says MKL (the
    backends round differently): `thermonet resume` pins the recorded backend."""
    cfg = tmp_path / "g.toml"
    cfg.write_text(GAUSS)
    out = tmp_path / "r"
    env = {**os.environ, "THERMONET_CACHE_DIR": str(tmp_path / "cache"),
           "THERMONET_BLAS": "numpy"}
    cmd = [sys.executable, "-m", "thermonet.cli", "-q"]
    run = subprocess.run([*cmd, "run", str(cfg), "--out", str(out)], env=env,
                         capture_output=True, text=True, timeout=600, check=False)
    assert run.returncode == 0, run.stderr[-2000:]
    assert ckpt.read_checkpoint(out).blas_choice["how"] == "override"
    _probe(tmp_path / "cache", None, "mkl")          # the cache now prefers MKL
    env.pop("THERMONET_BLAS")
    res = subprocess.run([*cmd, "resume", str(out), "--iterations", "15"], env=env,
                         capture_output=True, text=True, timeout=600, check=False)
    assert res.returncode == 0, res.stderr[-2000:]
    ck = ckpt.read_checkpoint(out)
    assert ck.iteration == 15
    assert (ck.blas_backend, ck.blas_choice["how"]) == ("numpy", "pinned")
    assert "checkpoint" in ck.blas_choice["reason"]


@pytest.mark.slow
def test_calibrate_command_prints_the_table_and_caches(tmp_path, monkeypatch):
    monkeypatch.setenv("THERMONET_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(calibration, "machine_load",
                        lambda: {"loadavg_1min": 0.25, "n_cpus": 2})
    monkeypatch.delenv("THERMONET_BLAS", raising=False)
    first = CliRunner().invoke(main, ["calibrate", "--json"])
    assert first.exit_code == 0, first.output
    rec = json.loads(first.stdout)
    assert rec["how"] == "measured"
    assert set(rec["rates"]) == set(backend.candidates()) | {"own"}
    assert rec["backend"] == calibration.choose(rec["rates"])
    assert Path(rec["cache"]) == tmp_path / calibration.CACHE_FILE
    text = CliRunner().invoke(main, ["calibrate"]).output
    assert text.startswith("matrix products of one 128-row block of M(3) (11 products, 8.01 "
                           "MFLOP)")
    rows = {line.split()[0]: line for line in text.splitlines()[2:2 + len(rec["rates"])]}
    assert set(rows) == set(rec["rates"])
    assert rows[rec["backend"]].endswith("<- chosen")
    for name, r in rec["rates"].items():
        assert f"{r['us_per_block']:.1f}" in rows[name] and f"{r['gflops']:.1f}" in rows[name]
    assert "\nmeasured earlier (" in text                         # second call: the cache
    assert "load 0.25 on 2 CPUs" in text and "busy" not in text
    assert "measured now" in CliRunner().invoke(main, ["calibrate", "--force"]).output
    monkeypatch.setenv("THERMONET_BLAS", "numpy")
    assert ("THERMONET_BLAS=numpy overrides the measurement: thermonet uses numpy"
            in CliRunner().invoke(main, ["calibrate"]).output)


@pytest.mark.slow
def test_timing_the_own_products_leaves_the_kernels_products_cached(tmp_path, monkeypatch):
    """The timing child calls the compiled C product the kernels call, so a first run loads
    it from the cache instead of compiling it a second time."""
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    rate = calibration.measure_own(budget_s=0.05)
    assert rate["rounds"] >= 5
    assert any(tmp_path.rglob("gemm._c_product-*.nbi"))
    assert not any(tmp_path.rglob("gemm._c_product32-*.nbi"))     # float32: not needed
