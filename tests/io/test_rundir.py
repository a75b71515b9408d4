"""A run directory under hostile use: the user's files, refusals that change nothing, the lock,
signals, interrupted initialisation, full disks, and outputs checked before any work."""

from __future__ import annotations

import errno
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import h5py
import numpy as np
import pytest

from tests.runs import TINY as GAUSS
from tests.runs import assert_same, invoke, one_error_line, tree
from thermonet import config as cfgmod
from thermonet.io import checkpoint as ckpt
from thermonet.io.atomic import TEMP_SUFFIX, temp_path
from thermonet.io.digest import sign
from thermonet.io.lock import LOCK_NAME, DirLock, RunLockedError
from thermonet.runner import Run, detach_log


def _snapshot(run_dir: Path) -> dict[str, bytes]:
    """Every file of a run directory but the lock, by content."""
    return {str(p.relative_to(run_dir)): p.read_bytes() for p in sorted(run_dir.rglob("*"))
            if p.is_file() and p.name != LOCK_NAME}


def _cli(args, **kw):
    return subprocess.Popen([sys.executable, "-m", "thermonet.cli", *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def _wait_for_lock(run_dir: Path, proc, timeout: float = 120.0) -> None:
    """Until ``proc`` holds the run directory's lock (so its signal handlers are in place)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        lock = run_dir / LOCK_NAME
        if lock.exists() and lock.read_text().strip() == str(proc.pid):
            return
        if proc.poll() is not None:
            raise AssertionError(f"process ended early: {proc.communicate()}")
        time.sleep(0.01)
    raise AssertionError("the process never took the lock")


@pytest.fixture
def gauss_cfg(tmp_path):
    p = tmp_path / "gauss.toml"
    p.write_text(GAUSS)
    return p


# --- 1. the user's config.toml ------------------------------------------------------------------

def test_run_into_the_configs_own_directory_never_replaces_the_users_config(tmp_path,
                                                                         monkeypatch):
    (tmp_path / "config.toml").write_text(GAUSS)
    monkeypatch.chdir(tmp_path)
    for extra in ([], ["--overwrite"]):
        res = invoke("-q", "run", "config.toml", "--out", ".", *extra)
        assert res.exit_code != 0
        line = one_error_line(res)
        assert "is not a configuration thermonet wrote" in line and "another --out" in line
        assert (tmp_path / "config.toml").read_text() == GAUSS
        assert sorted(p.name for p in tmp_path.iterdir()) == ["config.toml"]


def test_a_run_directorys_own_config_may_be_run_again_over_it(gauss_cfg, tmp_path):
    out = tmp_path / "r"
    assert invoke("-q", "run", gauss_cfg, "--out", out).exit_code == 0
    before = tree(out)
    res = invoke("-q", "run", out / "config.toml", "--out", out, "--overwrite")
    assert res.exit_code == 0, res.output
    assert_same(before, tree(out))        # the resolved config is the same configuration


# --- 2. temporary files --------------------------------------------------------------------------

def test_overwrite_and_resume_remove_only_thermonets_temporary_files(gauss_cfg, tmp_path):
    assert temp_path(Path("x/checkpoint.h5")).name == "checkpoint.h5" + TEMP_SUFFIX
    assert TEMP_SUFFIX != ".tmp"
    out = tmp_path / "r"
    assert invoke("-q", "run", gauss_cfg, "--out", out, "--set",
                   "run.n_iterations=6").exit_code == 0
    mine = [out / "notes.tmp", out / "trace" / "plot.tmp", out / "checkpoint.tmp"]
    for p in mine:
        p.write_text("mine")
    ours = [temp_path(out / "checkpoint.h5"), out / "checkpoint.h5.tmp",
            temp_path(out / "trace" / "it000000007-000000009.h5"),
            out / "trace" / "it000000007-000000009.h5.tmp"]
    for p in ours:
        p.write_bytes(b"half written")
    assert invoke("-q", "resume", out, "--iterations", "9").exit_code == 0
    assert all(p.read_text() == "mine" for p in mine)
    assert not any(p.exists() for p in ours)
    assert invoke("-q", "run", gauss_cfg, "--out", out, "--overwrite").exit_code == 0
    assert all(p.read_text() == "mine" for p in mine)


# --- 3. a refused command changes nothing --------------------------------------------------------

def test_a_refused_resume_changes_nothing(gauss_cfg, tmp_path):
    out = tmp_path / "r"
    Run.create(cfgmod.load(gauss_cfg), out).run()
    detach_log()
    before = _snapshot(out)
    res = invoke("-q", "resume", out, "--iterations", "10")
    assert res.exit_code != 0 and "below the 12 iterations already done" in one_error_line(res)
    assert _snapshot(out) == before
    # refused late, after the configuration was resolved: the stored energies do not match
    with h5py.File(out / "checkpoint.h5", "r+") as fh:
        fh["state/energy"][0] += 1.0
        sign(fh)        # a consistent checkpoint of other data, not a damaged file
    before = _snapshot(out)
    res = invoke("-q", "resume", out, "--iterations", "20")
    assert res.exit_code != 0 and "E(theta) of slot 0" in one_error_line(res)
    assert _snapshot(out) == before                       # config.toml still says 12
    assert "n_iterations = 12" in (out / "config.toml").read_text()


# --- 4. a directory holding part of a run; segments of another run -------------------------------

def test_run_refuses_a_directory_with_a_trace_but_no_checkpoint(gauss_cfg, tmp_path):
    out = tmp_path / "r"
    assert invoke("-q", "run", gauss_cfg, "--out", out).exit_code == 0
    (out / "checkpoint.h5").unlink()
    before = _snapshot(out)
    res = invoke("-q", "run", gauss_cfg, "--out", out, "--set", "run.n_iterations=6")
    assert res.exit_code != 0
    line = one_error_line(res)
    assert "holds an unfinished run" in line and "--overwrite" in line
    assert _snapshot(out) == before
    res = invoke("-q", "run", gauss_cfg, "--out", out, "--set", "run.n_iterations=6",
                  "--overwrite")
    assert res.exit_code == 0, res.output
    assert [p.name for p in sorted((out / "trace").iterdir())] == [
        "it000000001-000000003.h5", "it000000004-000000006.h5"]     # no stale segments
    assert invoke("info", out).exit_code == 0


def test_a_checkpoint_deleted_after_iterations_is_not_called_an_interrupted_initialisation(
        gauss_cfg, tmp_path):
    out = tmp_path / "r"
    assert invoke("-q", "run", gauss_cfg, "--out", out).exit_code == 0
    (out / "checkpoint.h5").unlink()
    before = _snapshot(out)
    for command in (["info", out], ["-q", "resume", out]):
        res = invoke(*command)
        assert res.exit_code == 1, res.output
        line = one_error_line(res)
        assert "4 trace segments (iterations 1-12)" in line and "deleted or lost" in line
        # --overwrite would discard the 4 segments: not offered as the way on
        assert "initialisation" not in line and "--overwrite" not in line
        assert f"restore it (from a backup) and `thermonet resume {out}`" in line
    res = invoke("-q", "run", gauss_cfg, "--out", out)
    line = one_error_line(res)
    assert "deleted or lost" in line and "interrupted during initialisation" not in line
    assert "--overwrite to discard that trace" in line
    assert _snapshot(out) == before


def test_resume_refuses_trace_segments_of_another_run(gauss_cfg, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for out, seed in ((a, 1), (b, 2)):
        assert invoke("-q", "run", gauss_cfg, "--out", out, "--seed", seed, "--set",
                       "run.n_iterations=6").exit_code == 0
    name = "it000000001-000000003.h5"
    uuid_a, uuid_b = ckpt.read_checkpoint(a).run_uuid, ckpt.read_checkpoint(b).run_uuid
    shutil.copy(b / "trace" / name, a / "trace" / name)
    before = _snapshot(a)
    res = invoke("-q", "resume", a, "--iterations", "12")
    assert res.exit_code != 0
    line = one_error_line(res)
    assert name in line and uuid_a in line and uuid_b in line and "move it" in line
    assert _snapshot(a) == before


# --- 5. the lock ----------------------------------------------------------------------------------

def test_a_lock_is_exclusive_and_a_stale_lock_file_does_not_block(tmp_path):
    (tmp_path / LOCK_NAME).write_text("999999999\n")      # left by a process that died
    first = DirLock(tmp_path).acquire()
    assert (tmp_path / LOCK_NAME).read_text().strip() == str(os.getpid())
    with pytest.raises(RunLockedError, match=f"PID {os.getpid()}"):
        DirLock(tmp_path).acquire()
    first.release()
    with DirLock(tmp_path):
        pass


def test_a_second_process_on_a_run_directory_is_refused(gauss_cfg, tmp_path):
    out = tmp_path / "r"
    Run.create(cfgmod.load(gauss_cfg, {"run.n_iterations": 1}), out).run()
    detach_log()
    proc = _cli(["-q", "resume", out, "--iterations", "1000000"])
    try:
        _wait_for_lock(out, proc)
        for args in (["-q", "resume", out], ["-q", "run", gauss_cfg, "--out", out,
                                             "--overwrite"]):
            res = invoke(*args)
            assert res.exit_code != 0
            line = one_error_line(res)
            assert f"PID {proc.pid}" in line and "in use by another thermonet process" in line
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err
    res = invoke("-q", "resume", out, "--iterations", str(ckpt.read_checkpoint(out).iteration
                                                           + 2))
    assert res.exit_code == 0, res.output                  # released when the process ended


# --- 6. SIGINT and SIGTERM -------------------------------------------------------------------------

@pytest.mark.slow
def test_sigint_and_sigterm_stop_at_a_safe_point_and_resume_is_exact(tmp_path):
    cfg = tmp_path / "long.toml"
    cfg.write_text(GAUSS.replace("n_iterations = 12", "n_iterations = 1500")
                   .replace("checkpoint_every = 3", "checkpoint_every = 7"))
    straight = tmp_path / "straight"
    Run.create(cfgmod.load(cfg), straight).run()
    detach_log()
    victim = tmp_path / "victim"
    rng = np.random.default_rng(6)
    stops: list[int] = []
    attempt = 0
    # at least 8 stops, and on until one lands off the checkpoint grid (on a loaded machine a
    # stop may land on it several times in a row)
    while attempt < 8 or (not any(s % 7 for s in stops) and attempt < 30):
        sig = (signal.SIGINT, signal.SIGTERM)[attempt % 2]
        args = ["-q", "run", cfg, "--out", victim] if attempt == 0 else ["-q", "resume", victim]
        attempt += 1
        proc = _cli(args)
        _wait_for_lock(victim, proc)
        while not (victim / "checkpoint.h5").exists():   # past the initialisation (test 7)
            time.sleep(0.01)
        # into production: past the checkpoint it started from, then a random moment
        last = stops[-1] if stops else 0
        while proc.poll() is None and ckpt.read_checkpoint(victim).iteration <= last:
            time.sleep(0.01)
        time.sleep(float(rng.uniform(0.0, 0.2)))
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 128 + sig, err
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("Stopped:"), err
        assert signal.Signals(sig).name in lines[0] and "Traceback" not in err
        done = ckpt.read_checkpoint(victim).iteration         # intact and readable
        stops.append(done)
        assert f"at iteration {done} of 1500" in lines[0]
    assert not list(victim.rglob("*" + TEMP_SUFFIX))
    assert stops == sorted(stops) and stops[-1] < 1500
    assert any(s % 7 for s in stops)        # stopped off the checkpoint grid, committed anyway
    res = invoke("-q", "resume", victim)
    assert res.exit_code == 0, res.output
    assert_same(tree(straight), tree(victim))


# --- 7. interrupted initialisation -----------------------------------------------------------------

@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_a_run_interrupted_during_initialisation_is_recognised(gauss_cfg, tmp_path, sig):
    cfg = tmp_path / "slow.toml"
    cfg.write_text(GAUSS.replace("burn_in = [3]", "burn_in = [100000000]"))
    out = tmp_path / "r"
    proc = _cli(["-q", "run", cfg, "--out", out])
    _wait_for_lock(out, proc)
    time.sleep(0.5)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    if sig == signal.SIGINT:
        assert proc.returncode == 130, err
        (line,) = err.strip().splitlines()
        assert "during the initialisation" in line and "--overwrite" in line
    else:
        assert proc.returncode == -signal.SIGKILL
    assert not (out / "checkpoint.h5").exists()
    res = invoke("-q", "resume", out)
    assert res.exit_code != 0
    line = one_error_line(res)
    assert "was interrupted during initialisation (no checkpoint yet" in line
    command = f"thermonet run {out / 'config.toml'} --out {out} --overwrite"
    assert command in line
    res = invoke("-q", *command.split()[1:], "--set", "init.burn_in=[3]")   # it works
    assert res.exit_code == 0, res.output
    assert ckpt.read_checkpoint(out).iteration == 12


# --- 8. a full disk -----------------------------------------------------------------------------------

def test_a_full_disk_during_a_checkpoint_is_one_line_and_loses_nothing(gauss_cfg, tmp_path,
                                                                      monkeypatch):
    import thermonet.io.checkpoint as ckmod

    straight = tmp_path / "straight"
    Run.create(cfgmod.load(gauss_cfg), straight).run()
    detach_log()
    real = ckmod.write_checkpoint
    calls = []

    def full_disk(run_dir, ck):
        calls.append(ck.iteration)
        if len(calls) == 3:          # iterations 0 and 3 are written, 6 is not
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(run_dir, ck)

    monkeypatch.setattr(ckmod, "write_checkpoint", full_disk)
    out = tmp_path / "r"
    res = invoke("-q", "run", gauss_cfg, "--out", out)
    assert res.exit_code != 0
    line = one_error_line(res)
    assert line == (f"Error: disk full while writing {out / 'checkpoint.h5'}; the last good "
                    "checkpoint is iteration 3 and nothing before it is lost; free space and "
                    f"`thermonet resume {out}`")
    monkeypatch.setattr(ckmod, "write_checkpoint", real)
    assert ckpt.read_checkpoint(out).iteration == 3
    assert invoke("-q", "resume", out).exit_code == 0
    assert_same(tree(straight), tree(out))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_FSIZE semantics")
@pytest.mark.slow
def test_a_file_size_limit_during_a_trace_write_is_one_line_and_loses_nothing(tmp_path):
    import resource

    cfg = tmp_path / "big.toml"
    cfg.write_text(GAUSS.replace("n_iterations = 12", "n_iterations = 600")
                   .replace("checkpoint_every = 3", "checkpoint_every = 300")
                   .replace("sample_every = 2", "sample_every = 1"))
    straight = tmp_path / "straight"
    Run.create(cfgmod.load(cfg), straight).run()
    detach_log()
    # the checkpoint (~16 kB) fits, a 300-iteration segment (~97 kB) does not
    limit = 50_000

    def small_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    out = tmp_path / "r"
    proc = _cli(["-q", "run", cfg, "--out", out], preexec_fn=small_files)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 1, err
    (line,) = err.strip().splitlines()
    assert line.startswith("Error: file-size limit (ulimit -f) reached while writing "
                           f"{out / 'trace' / 'it000000001-000000300.h5'}; the last good "
                           "checkpoint is iteration 0")
    assert not list(out.rglob("*" + TEMP_SUFFIX))
    assert invoke("-q", "resume", out).exit_code == 0
    assert_same(tree(straight), tree(out))


# --- 9. outputs checked before any work, written atomically ----------------------------------------

def _bad_outs(tmp_path: Path) -> list[tuple[Path, str]]:
    (tmp_path / "file.txt").write_text("mine")
    return [(tmp_path / "missing" / "w.npy", f"directory {tmp_path / 'missing'} does not exist"),
            (tmp_path / "file.txt" / "w.npy", f"{tmp_path / 'file.txt'} is a file, not a "
                                              "directory")]


def test_minimise_and_baseline_check_out_before_any_work(tmp_path, monkeypatch):
    import thermonet.baseline
    import thermonet.data

    def no_work(*args, **kwargs):
        raise AssertionError("worked before checking --out")

    monkeypatch.setattr(thermonet.data, "load_data", no_work)
    monkeypatch.setattr(thermonet.baseline, "standard_optimisation", no_work)
    for out, expected in _bad_outs(tmp_path):
        for command in (["minimise", "--arch", "M1", "--data", "D50"],
                        ["baseline", "--arch", "M1", "--data", "D50", "--draws", "2"]):
            res = invoke(*command, "--out", out)
            assert res.exit_code == 1, res.output
            assert expected in one_error_line(res)
    res = invoke("minimise", "--arch", "M1", "--data", "D50", "--out", tmp_path / "w.txt")
    assert res.exit_code == 1 and "expected a file name ending in .npy or .json" in res.output
    assert (tmp_path / "file.txt").read_text() == "mine"


def test_plot_checks_out_before_any_work(tmp_path):
    for out, expected in _bad_outs(tmp_path):
        res = invoke("plot", tmp_path / "nothing", "--kind", "ladder", "--out",
                      out.with_suffix(".png"))
        assert res.exit_code == 1
        assert expected in one_error_line(res)


def test_minimise_writes_its_result_atomically(tmp_path, monkeypatch):
    out = tmp_path / "w.npy"
    out.write_bytes(b"the previous result")
    real = np.save

    def interrupted(file, arr, *args, **kwargs):
        real(file, arr[: len(arr) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(np, "save", interrupted)
    res = invoke("minimise", "--arch", "M1", "--data", "D50", "--test", "official",
                  "--set", "max_steps=2", "--out", out)
    assert res.exit_code != 0
    line = one_error_line(res)                              # no traceback
    assert "disk full while writing" in line and "repeats the result exactly" in line
    assert out.read_bytes() == b"the previous result"       # never half a file
    assert not list(tmp_path.glob("*" + TEMP_SUFFIX))
    monkeypatch.setattr(np, "save", real)
    res = invoke("minimise", "--arch", "M1", "--data", "D50", "--test", "official",
                  "--set", "max_steps=2", "--out", out)
    assert res.exit_code == 0, res.output
    assert np.load(out).shape == (np.load(out).size,)


def test_a_signal_inside_the_jit_compiler_is_sent_again_not_raised(monkeypatch):
    """In immediate mode the handler raises at once, except inside Numba's or llvmlite's
    Python code (where LLVM's callbacks would swallow the exception and the process could
    crash at exit, as a run stopped during a cold compile did): there it sends the signal
    again a moment later."""
    import os
    import sys

    from thermonet import interrupt

    sent = []
    monkeypatch.setattr(interrupt.os, "kill", lambda pid, sig: sent.append((pid, sig)))
    scope: dict = {}
    exec(compile("import sys\ndef f():\n    return sys._getframe()\n",
                 os.sep.join(["", "x", "numba", "core", "fake.py"]), "exec"), scope)
    compiler_frame = scope["f"]()
    stop = interrupt.StopSignals()
    with stop.immediate():
        stop.handle(signal.SIGINT, compiler_frame)          # no exception here
        deadline = time.monotonic() + 5
        while not sent and time.monotonic() < deadline:
            time.sleep(0.01)
        assert sent == [(os.getpid(), signal.SIGINT)]
        with pytest.raises(interrupt.RunInterrupted, match="SIGINT"):
            stop.handle(signal.SIGINT, sys._getframe())
    assert stop.signum == signal.SIGINT
    assert not interrupt.in_unsafe_code(sys._getframe())
    # an import in progress, or another thread inside the compiler, defers the stop as well
    exec(compile("import sys\ndef g():\n    return sys._getframe()\n",
                 "<frozen importlib._bootstrap>", "exec"), scope)
    assert interrupt.in_unsafe_code(scope["g"]())
    inside, release = threading.Event(), threading.Event()
    exec(compile("def wait(inside, release):\n    inside.set()\n    release.wait(10)\n",
                 os.sep.join(["", "x", "llvmlite", "binding", "fake.py"]), "exec"), scope)
    worker = threading.Thread(target=scope["wait"], args=(inside, release))
    worker.start()
    try:
        assert inside.wait(10)
        assert interrupt.unsafe_in_any_thread(sys._getframe())   # the other thread compiles
        assert not interrupt.in_unsafe_code(sys._getframe())     # this one does not
    finally:
        release.set()
        worker.join()
    assert not interrupt.unsafe_in_any_thread(sys._getframe())


def test_a_kernel_call_with_a_generator_is_unsafe_to_interrupt_throughout():
    """Passing a NumPy Generator to a compiled kernel runs Python code from inside Numba's C
    dispatcher: its typeof, then ``ctypes.cast`` from the unboxing, where an exception raised by
    the signal handler crashed the process (segmentation fault in 9 of 80 runs stopped during
    their burn-in; none in 80 since ctypes is in the unsafe list). Every Python frame the call
    runs must be seen as unsafe, so the stop is deferred until the call has returned."""
    from thermonet import interrupt
    from thermonet.kernels import momenta as mom

    rng = np.random.default_rng(1)
    p, one = np.empty(5), np.ones(5)
    mom.draw_momenta(rng, one, one, p)                # compiled (or loaded) outside the trace
    frames = []

    def trace(frame, event, arg):
        if event == "call":
            frames.append((frame.f_code.co_filename, interrupt.in_unsafe_code(frame)))

    sys.settrace(trace)
    try:
        mom.draw_momenta(rng, one, one, p)
    finally:
        sys.settrace(None)
    in_ctypes = [ok for name, ok in frames if f"{os.sep}ctypes{os.sep}" in name]
    assert in_ctypes, frames                # the premise: the unboxing calls back into ctypes
    assert all(ok for _, ok in frames), [f for f in frames if not f[1]]


def test_resume_shows_progress_unless_quiet(gauss_cfg, tmp_path):
    """A resumed run reports its progress as a new one does (it used to be silent for hours)."""
    out = tmp_path / "r"
    assert invoke("-q", "run", gauss_cfg, "--out", out).exit_code == 0
    res = invoke("resume", out, "--iterations", "15")
    assert res.exit_code == 0, res.output
    assert f"resuming {out} at iteration 12" in res.output
    assert "iteration 15/15" in res.output and "done: the run in" in res.output
    quiet = invoke("-q", "resume", out, "--iterations", "18")
    assert quiet.exit_code == 0 and quiet.output == ""


def test_a_stop_request_raised_where_python_cannot_propagate_it_is_silent(capfd):
    """A signal during the initialisation raises RunInterrupted at once; arriving inside a
    __del__ (or any finaliser), Python swallows it and printed "Exception ignored in ...
    RunInterrupted" with a traceback. The request stays recorded, so the message is noise."""
    from thermonet import interrupt

    class Finalised:
        def __del__(self):
            signal.raise_signal(signal.SIGINT)    # the handler runs inside __del__
            time.sleep(0)

    with interrupt.handling() as stop, pytest.raises(interrupt.RunInterrupted):
        with stop.immediate():
            Finalised()          # collected at once: the signal arrives in its __del__
            stop.raise_if_requested("stopped")
    assert stop.signum == signal.SIGINT
    err = capfd.readouterr().err
    assert "Exception ignored" not in err and "Traceback" not in err, err
