"""MPI: runs under ``mpiexec -n 2`` and ``-n 3`` are bit for bit the thread executor's run,
resume across executors, and end cleanly (no hang) when a rank fails.

The tests marked ``mpi`` start ``mpiexec`` as a subprocess; they skip with the reason when
mpi4py or mpiexec is missing (and fail under CI, which installs the test extra and so both).
The unit tests at the end need neither.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.runs import assert_same, tree
from thermonet import config as cfgmod
from thermonet import parallel
from thermonet.errors import ConfigError
from thermonet.io import checkpoint as ckpt
from thermonet.io.lock import DirLock, RunLockedError
from thermonet.parallel import mpi
from thermonet.runner import Run, detach_log

ROOT = Path(__file__).resolve().parents[2]
RE_SMALL = ROOT / "tests" / "configs" / "re_small.toml"
#: a small run (M3 on D50, 8 rungs: blocks of 3, 3, 2 on 3 ranks) cut to seconds
SHORT = {"run.n_iterations": 6, "run.checkpoint_every": 2, "run.sample_every": 2,
         "run.adapt_every": 4, "init.burn_in": [2], "minimiser.max_steps": 30,
         "sampler.n_leapfrog": 5}
TIMEOUT = 240


def _mpiexec() -> str | None:
    beside = Path(sys.executable).parent / "mpiexec"
    return str(beside) if beside.is_file() else shutil.which("mpiexec")


def _missing() -> str | None:
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return "mpi4py is not installed (pip install 'thermonet[mpi]')"
    if _mpiexec() is None:
        return "no mpiexec beside the Python executable or on the PATH"
    return None


@pytest.fixture(scope="module")
def mpiexec() -> str:
    reason = _missing()
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(reason + " (CI installs the test extra, which includes MPI)")
        pytest.skip(reason)
    return str(_mpiexec())


def _sets() -> list[str]:
    out = []
    for key, value in SHORT.items():
        out += ["--set", f"{key}={value}".replace(" ", "")]
    return out


def launch(mpiexec: str, n: int, args: list, *, script: list | None = None,
           env: dict | None = None) -> subprocess.CompletedProcess:
    """``mpiexec -n n python -m thermonet.cli ARGS`` (or a script), this worktree first."""
    environ = {**os.environ, **(env or {})}
    environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT),
                                                          environ.get("PYTHONPATH")]))
    environ.pop("CI", None)
    command = script or ["-m", "thermonet.cli"]
    argv = [mpiexec, "-n", str(n), sys.executable, *map(str, [*command, *args])]
    # its own session, so that a job that does not end is killed whole (ranks included)
    # instead of leaving ranks to load the machine for the tests after it
    proc = subprocess.Popen(argv, env=environ, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=ROOT, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise AssertionError(f"mpiexec -n {n} did not end within {TIMEOUT} s; the end of its "
                             f"stderr:\n{err[-3000:]}\nstdout:\n{out[-1000:]}") from None
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def _released(run_dir: Path) -> Path:
    """``run_dir`` once the aborted job's last process has let its lock go: mpiexec may
    return a moment before every killed rank is gone."""
    deadline = time.monotonic() + 60
    while True:
        try:
            DirLock(run_dir).acquire().release()
            return run_dir
        except RunLockedError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def run_on_threads(out: Path, workers: int = 1, **overrides) -> Path:
    """The short re_small run (with ``overrides``) in this process on ``workers`` threads."""
    cfg = cfgmod.load(RE_SMALL, {**SHORT, "run.workers": workers, **overrides})
    Run.create(cfg, out).run(quiet=True)
    detach_log()
    return out


@pytest.fixture(scope="module")
def straight(tmp_path_factory) -> dict:
    """The short run on one thread, uninterrupted."""
    return tree(run_on_threads(tmp_path_factory.mktemp("threads") / "run"))


# --- bit for bit ----------------------------------------------------------------------------

@pytest.mark.mpi
@pytest.mark.parametrize("ranks,workers", [(2, 1), (3, 1), (2, 2)])
def test_mpi_run_is_bit_identical_to_threads(mpiexec, straight, tmp_path, ranks, workers):
    out = tmp_path / "mpi"
    res = launch(mpiexec, ranks, ["-q", "run", RE_SMALL, "--out", out, *_sets(),
                                   "--set", f"run.workers={workers}"])
    assert res.returncode == 0, res.stderr
    assert_same(straight, tree(out))
    # rank 0 wrote everything, once: one segment per checkpoint interval, no stray files
    assert sorted(p.name for p in (out / "trace").iterdir()) == [
        "it000000001-000000002.h5", "it000000003-000000004.h5", "it000000005-000000006.h5"]


#: the short run on the recommended scheme: prior rung, deo, ladder rounds and the step-size
#: re-tune along the chain (with swap sweeps between its transitions), then production
NRPT = {"sampler.adapt_method": "chain", "sampler.warmup_transitions": 6,
        "sampler.wall": "reflect", "ladder.prior_rung": True, "ladder.swap_scheme": "deo",
        "ladder.adapt_rounds": 2, "ladder.adapt_round_length": 2, "run.adapt_every": 0}


@pytest.mark.mpi
def test_mpi_warm_up_and_nrpt_are_bit_identical_to_threads(mpiexec, tmp_path):
    """Every part of the warm-up moves streams on the ranks that run the slots; all ranks must
    hold them (the checkpoint and the swaps after it depend on every one)."""
    reference = tree(run_on_threads(tmp_path / "threads", **NRPT))
    out = tmp_path / "mpi"
    sets = [a for key, value in NRPT.items()
            for a in ("--set", f"{key}={str(value).lower() if isinstance(value, bool) else value}")]
    res = launch(mpiexec, 3, ["-q", "run", RE_SMALL, "--out", out, *_sets(), *sets])
    assert res.returncode == 0, res.stderr
    assert_same(reference, tree(out))
    # killed while writing its 6th checkpoint: the one on disk is the warm-up's position just
    # after the first round's re-tune, written by rank 0 after transitions whose slots ran on
    # all 3 ranks; resumed on threads it must give the same run
    killed = tmp_path / "killed"
    res = launch(mpiexec, 3, ["-q", "run", RE_SMALL, "--out", killed, *_sets(), *sets],
                  env={"THERMONET_TEST_CRASH": "before-replace:checkpoint:6"})
    assert res.returncode != 0
    ck = ckpt.read_checkpoint(killed)
    assert ck.iteration == 0
    assert {k: ck.counters["warmup"][k] for k in ("stage", "phase", "round", "done")} == {
        "stage": "ladder", "phase": "sample", "round": 1, "done": 0}
    Run.open(_released(killed), workers=1, executor="threads").run(quiet=True)
    detach_log()
    assert_same(reference, tree(killed))


@pytest.mark.mpi
def test_two_runs_on_threads_agree(tmp_path, straight):
    """The reference itself: 1 and 2 threads (the property MPI extends to ranks)."""
    assert_same(straight, tree(run_on_threads(tmp_path / "two", workers=2)))


@pytest.mark.mpi
def test_mpi_run_resumes_on_threads_and_back(mpiexec, straight, tmp_path):
    a = tmp_path / "a"          # 2 ranks to iteration 3 (off the checkpoint grid), then threads
    res = launch(mpiexec, 2, ["-q", "run", RE_SMALL, "--out", a, *_sets(),
                               "--set", "run.n_iterations=3"])
    assert res.returncode == 0, res.stderr
    assert ckpt.read_checkpoint(a).iteration == 3
    Run.open(a, n_iterations=6, workers=2, executor="threads").run(quiet=True)
    detach_log()
    assert_same(straight, tree(a))
    b = run_on_threads(tmp_path / "b", **{"run.n_iterations": 2})    # threads, then 3 ranks
    res = launch(mpiexec, 3, ["-q", "resume", b, "--iterations", 6])
    assert res.returncode == 0, res.stderr
    assert_same(straight, tree(b))


# --- failures ---------------------------------------------------------------------------------

@pytest.mark.mpi
def test_a_killed_rank_ends_the_job_and_the_run_resumes(mpiexec, straight, tmp_path):
    out = tmp_path / "killed"   # rank 0 dies (kill -9) while replacing its second checkpoint
    res = launch(mpiexec, 2, ["-q", "run", RE_SMALL, "--out", out, *_sets()],
                  env={"THERMONET_TEST_CRASH": "before-replace:checkpoint:3"})
    assert res.returncode != 0
    assert ckpt.read_checkpoint(out).iteration == 2
    res = launch(mpiexec, 3, ["-q", "resume", _released(out)])
    assert res.returncode == 0, res.stderr
    assert_same(straight, tree(out))


@pytest.mark.mpi
def test_an_error_on_one_rank_alone_aborts_the_job(mpiexec, straight, tmp_path):
    out = tmp_path / "abort"    # rank 1 raises at its 2nd commit, while rank 0 waits for it
    res = launch(mpiexec, 2, ["-q", "run", RE_SMALL, "--out", out, *_sets()],
                  script=[str(ROOT / "tests" / "mpi_fault.py"), "rank", 2])
    assert res.returncode != 0
    assert "Error on MPI rank 1 of 2" in res.stderr
    assert "RuntimeError: injected on rank 1 alone" in res.stderr
    assert "MPI_Abort" in res.stderr
    assert ckpt.read_checkpoint(out).iteration == 2     # the first commit is kept
    Run.open(_released(out)).run(quiet=True)
    detach_log()
    assert_same(straight, tree(out))


@pytest.mark.mpi
def test_an_error_in_a_slot_ends_every_rank_with_one_report(mpiexec, straight, tmp_path):
    # rank 1 holds slots 3-5: 2 burn-in transitions each, then 2 per iteration each, so its
    # 21st transition is in iteration 3, after the checkpoint of iteration 2
    out = tmp_path / "slot"
    res = launch(mpiexec, 3, ["-q", "run", RE_SMALL, "--out", out, *_sets()],
                  script=[str(ROOT / "tests" / "mpi_fault.py"), "slot", 21])
    assert res.returncode == 1, res.stderr
    assert res.stderr.count("FloatingPointError: injected in a slot on rank 1") == 1
    assert "raised on MPI rank 1" in res.stderr
    assert "MPI_Abort" not in res.stderr     # every rank knew: no abort was needed
    assert ckpt.read_checkpoint(out).iteration == 2
    Run.open(out, workers=2).run(quiet=True)
    detach_log()
    assert_same(straight, tree(out))


@pytest.mark.mpi
def test_ranks_with_different_blas_backends_are_refused_before_anything_is_written(
        mpiexec, tmp_path):
    """Rank 0 on OpenBLAS and rank 1 on MKL (as two CPU models could each measure fastest):
    the job stops with one line on every rank and leaves no run directory."""
    from thermonet.kernels.matmul import backend

    if backend.load_mkl()[0] is None:
        pytest.skip("MKL is not installed: no second backend to disagree with")
    out = tmp_path / "mixed"
    environ = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    environ.pop("CI", None)
    rank = [sys.executable, "-m", "thermonet.cli", "-q", "run", str(RE_SMALL), "--out",
            str(out), *_sets()]
    res = subprocess.run([mpiexec, "-n", "1", "-env", "THERMONET_BLAS", "numpy", *rank, ":",
                          "-n", "1", "-env", "THERMONET_BLAS", "mkl", *rank],
                         env=environ, capture_output=True, text=True, timeout=TIMEOUT, cwd=ROOT)
    assert res.returncode != 0
    assert "rank 0: numpy, rank 1: mkl" in res.stderr, res.stderr
    assert "THERMONET_BLAS" in res.stderr and "Traceback" not in res.stderr
    assert not out.exists()


# --- without MPI --------------------------------------------------------------------------------

def test_a_rank_that_disagrees_is_refused_on_every_rank_alike():
    class TwoRanks:
        size = 2

        def __init__(self, values):
            self.values = values

        def allgather(self, value):
            return list(self.values)

    parallel.require_same(TwoRanks(["a", "a"]), "letters", "a", "fix it")   # agreeing: fine
    with pytest.raises(ConfigError, match=r"different letters \(rank 0: a, rank 1: b\)"
                       r".*; fix it") as err:
        parallel.require_same(TwoRanks(["a", "b"]), "letters", "a", "fix it")
    assert parallel.is_collective(err.value)
    assert parallel.LOCAL.allgather(3) == [3]


@pytest.mark.parametrize("n_items", [0, 1, 7, 8, 112])
@pytest.mark.parametrize("size", [1, 2, 3, 8])
def test_blocks_are_contiguous_cover_every_item_once_and_differ_by_at_most_one(n_items, size):
    blocks = [mpi.block(n_items, size, r) for r in range(size)]
    assert blocks[0][0] == 0 and blocks[-1][1] == n_items
    for (_, hi), (lo, _) in zip(blocks, blocks[1:], strict=False):
        assert hi == lo
    lengths = [hi - lo for lo, hi in blocks]
    assert max(lengths) - min(lengths) <= 1
    assert lengths == sorted(lengths, reverse=True)


def test_executor_mpi_without_mpi4py_is_a_one_line_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "mpi4py", None)   # import mpi4py raises ImportError
    monkeypatch.setattr(mpi, "_world", None)
    with pytest.raises(ConfigError, match=r"executor = \"mpi\" but mpi4py is not installed.*"
                                          r"pip install 'thermonet\[mpi\]'"):
        parallel.make_executor(1, "mpi")


def test_a_launcher_without_mpi4py_is_refused_not_run_n_times(monkeypatch):
    monkeypatch.setitem(sys.modules, "mpi4py", None)
    monkeypatch.setattr(mpi, "_world", None)
    monkeypatch.setenv("PMI_SIZE", "4")
    with pytest.raises(ConfigError, match="MPI launcher started 4 processes but mpi4py"):
        parallel.world("auto")
    with pytest.raises(ConfigError, match="started 4 processes, which would each run"):
        parallel.world("threads")


def test_no_launcher_means_one_process_without_importing_mpi4py(monkeypatch):
    for name in (*mpi.SIZE_VARIABLES, *mpi.RANK_VARIABLES):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setitem(sys.modules, "mpi4py", None)
    assert parallel.world("auto") is parallel.LOCAL
    assert isinstance(parallel.make_executor(2, "auto"), parallel.ThreadExecutor)


def test_executor_key_is_checked(tmp_path):
    with pytest.raises(ConfigError, match="executor.*one of auto, threads, mpi"):
        cfgmod.load(RE_SMALL, {"run.executor": "dask"})


def test_an_error_that_does_not_pickle_still_reaches_the_other_ranks():
    class Local(Exception):
        def __init__(self, a, b):
            super().__init__(f"{a} {b}")

    copy = mpi.portable(Local(1, 2), rank=3)
    assert str(copy) == "Local: 1 2"
    assert copy.thermonet_origin.startswith("raised on MPI rank 3:")
