#!/usr/bin/env python
"""First-run compile cost: a run's kernels with a cold Numba cache, then with a warm one.

Each repeat makes a fresh ``NUMBA_CACHE_DIR`` and runs two subprocesses on it: a cold one
(nothing cached, everything compiles) and a warm one (everything loads from the cache). Each
builds the run of ``--config`` as ``thermonet run`` does and calls the runner's
:func:`thermonet.runner.compile_notice.warm_kernels`, the block that compiles what the run
needs before it starts. It reports CPU seconds (this process's user + sys; the machine is
shared, so wall time is not the measure) of:

* ``build``: building the run's components (data, network, ladder; a few small kernels);
* ``warm_kernels``: the first energy, gradient and sampler transition;
* ``compiling``: the time inside Numba's top-level compiles (``numba:compile`` events), as
  thread CPU time, with a per-function breakdown (a callee compiled inside its caller is
  indented under it and its time is part of the caller's).

With ``--cli N`` the cold and warm children run the whole ``thermonet run CONFIG`` for N
iterations in-process instead (warm-up included: minutes of CPU for the quickstart), and also
count what compiles after ``warm_kernels`` (it should be nothing).

With ``--first-iteration`` each child is the command line itself, ``python -m thermonet run
CONFIG``, stopped when it reports its first iteration (after the run's warm-up, if it has
one): the wall time (from starting the process) and the CPU seconds (the process and its
children) to get there, first with a fresh Numba cache and a fresh calibration cache (a first
run on a new machine), then ``--repeats`` times with both warm, and where the CPU time goes:
``imports`` (with ``calibration``, the matrix-product backend's choice, measured on a new
machine, inside them), ``load`` (the configuration), ``build`` (data, network, ladder),
``warm_kernels`` (compiling or loading the kernels), ``initial_state`` (burn-in, and the dt
warm-up of a chain that adapts it), ``warm-up`` (a ladder's warm-up) and ``first iteration``.
The children may write Python bytecode, as an installed thermonet has it.
``--profile`` adds where a warm child's time goes (``cProfile``, cumulative), and
``--imports`` what importing the command line and the runner costs, per top-level package
(``python -X importtime``). Usage::

    python benchmarks/bench_first_run.py                      # quickstart, 2 repeats
    python benchmarks/bench_first_run.py --repeats 3 --json first_run.json
    python benchmarks/bench_first_run.py --set sampler.wall=endpoint
    python benchmarks/bench_first_run.py --config sample_runs/nrpt_M3_D50.toml
    python benchmarks/bench_first_run.py --first-iteration --config sample_runs/robot_arm.toml \
        --repeats 3 --profile --imports
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from harness import cpu_model, machine_busy, vector_flags, versions

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_CONFIG = os.path.join(ROOT, "sample_runs", "quickstart.toml")


class _CompileLog:
    """Records every ``numba:compile`` event: function, depth and thread CPU seconds."""

    def __init__(self):
        import numba.core.event as ev

        class Listener(ev.Listener):
            def on_start(inner, event):
                self._stack.append(time.thread_time())

            def on_end(inner, event):
                t0 = self._stack.pop()
                data = event.data or {}
                fn = getattr(data.get("dispatcher"), "py_func", None)
                name = (f"{fn.__module__}.{fn.__qualname__}" if fn is not None
                        else str(data.get("dispatcher")))
                self.rows.append({"name": name, "depth": len(self._stack), "phase": self.phase,
                                  "cpu": time.thread_time() - t0, "seq": self._seq,
                                  "args": str(data.get("args"))})
                self._seq += 1

        self._stack: list[float] = []
        self._seq = 0
        self.rows: list[dict] = []
        self.phase = "build"
        ev.register("numba:compile", Listener())


def _cpu() -> float:
    t = os.times()
    return t.user + t.system


def child(args) -> dict:
    """Build the run (or run the CLI) in this process and return its CPU times and compiles."""
    t0 = _cpu()
    import thermonet.kernels

    # before Numba is imported (by the listener too), as the command line does: the vector
    # width it sets is compiled into the kernels
    thermonet.kernels.configure()
    log = _CompileLog()
    import numpy as np

    from thermonet import config as cfgmod
    from thermonet.runner import compile_notice
    from thermonet.runner.components import blas_backend, build

    out: dict = {"import_cpu": _cpu() - t0}
    if args.cli:
        runner_mod = sys.modules["thermonet.runner.run"]   # not the re-exported run()
        from thermonet.cli import main as cli_main

        timing: dict = {}
        original = compile_notice.warm_kernels

        def timed_warm(*a, **k):
            log.phase = "warm_kernels"
            c = _cpu()
            try:
                return original(*a, **k)
            finally:
                timing["warm_kernels_cpu"] = _cpu() - c
                log.phase = "after"

        runner_mod.warm_kernels = timed_warm      # the name the runner calls
        with tempfile.TemporaryDirectory() as run_dir:
            c = _cpu()
            sets = [a for kv in args.set for a in ("--set", kv)]
            cli_main(["--quiet", "run", args.config, "--out", os.path.join(run_dir, "r"),
                      *sets, "--set", f"run.n_iterations={args.cli}"], standalone_mode=False)
            out["cli_cpu"] = _cpu() - c
        out.update(timing)
    else:
        c = _cpu()
        components = build(cfgmod.load(args.config, cfgmod.parse_set(args.set)))
        out["build_cpu"] = _cpu() - c
        theta = components.arch.initial_draw(np.random.default_rng(0))
        log.phase = "warm_kernels"
        c = _cpu()
        compile_notice.warm_kernels(components.engine.samplers[0], theta,
                                    components.arch.describe())
        out["warm_kernels_cpu"] = _cpu() - c
    out["blas"] = blas_backend()
    out["vectors_512"] = "-prefer-256-bit" in os.environ.get("NUMBA_CPU_FEATURES", "")
    out["compiles"] = log.rows
    top = [r for r in log.rows if r["depth"] == 0]
    out["compiling_cpu"] = sum(r["cpu"] for r in top)
    out["n_top_level"] = len(top)
    out["n_compiles"] = len(log.rows)
    out["compiling_after_warm"] = sum(r["cpu"] for r in top if r["phase"] == "after")
    out["total_cpu"] = _cpu() - t0
    return out


def run_child(args, cache_dir: str) -> dict:
    """Run :func:`child` in a subprocess on ``cache_dir`` and return its result with wall time."""
    cmd = [sys.executable, os.path.abspath(__file__), "--child", "--config", args.config]
    if args.cli:
        cmd += ["--cli", str(args.cli)]
    for kv in args.set:
        cmd += ["--set", kv]
    env = dict(os.environ, NUMBA_CACHE_DIR=cache_dir)
    m0 = machine_busy()
    w0 = time.perf_counter()
    p = subprocess.run(cmd, check=False, capture_output=True, text=True, env=env, timeout=3600)
    wall = time.perf_counter() - w0
    m1 = machine_busy()
    for line in p.stdout.splitlines()[::-1]:
        if line.startswith("RESULT:"):
            res = json.loads(line[len("RESULT:"):])
            res["wall"] = wall
            if m0 is not None and m1 is not None:
                res["other_cores"] = max(0.0, (m1 - m0) - res["total_cpu"]) / wall
            return res
    raise SystemExit(f"child failed:\n{p.stderr[-3000:]}")


#: the command line, stopped at its first progress report (``--first-iteration``)
_FIRST_ITERATION = r"""
import json, os, sys

def cpu():
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system

phases = [("interpreter", cpu())]

def timed(module, name, label=None, once=False):
    original = getattr(module, name)
    def wrapper(*a, **k):
        if once and wrapper.done:
            return original(*a, **k)
        wrapper.done = True
        phases.append(("before " + (label or name), cpu()))
        try:
            return original(*a, **k)
        finally:
            phases.append((label or name, cpu()))
    wrapper.done = False
    setattr(module, name, wrapper)

# the matrix-product backend is chosen (measured on a new machine) while the kernels import
from thermonet.kernels.matmul import backend
timed(backend, "choice", "calibration", once=True)
from thermonet.cli import options
import thermonet.cli.run, thermonet.runner, thermonet.config
runner_run = sys.modules["thermonet.runner.run"]   # the package re-exports run()
phases.append(("imports", cpu()))

timed(thermonet.config, "load")
for name in ("build", "warm_kernels", "initial_state"):
    timed(runner_run, name)      # the names the runner calls
timed(runner_run.Run, "_warm_up", "warm-up")

def first(self, report):
    if PROFILE:
        prof.disable()
        prof.dump_stats(PROFILE)
    phases.append(("first iteration", cpu()))
    print("FIRST:" + json.dumps({"cpu": phases[-1][1], "iteration": report.iteration,
                                 "phases": phases}), flush=True)
    os._exit(0)

options.RunProgress.__call__ = first
PROFILE = sys.argv[1]
from thermonet.cli import main
args = ["-q", "run", *sys.argv[2:]]
if PROFILE:
    import cProfile
    prof = cProfile.Profile()
    prof.enable()
main(args, prog_name="thermonet")
raise SystemExit("the run ended without reporting an iteration")
"""


def first_iteration(args, env: dict, out_dir: str, profile: str = "") -> dict:
    """Start ``thermonet run`` in a process of its own; wall and CPU seconds to its first
    progress report."""
    cmd = [sys.executable, "-c", _FIRST_ITERATION, profile, args.config, "--out", out_dir,
           "--overwrite", *[a for kv in args.set for a in ("--set", kv)]]
    w0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=env)
    res = None
    assert p.stdout is not None
    for line in p.stdout:
        if line.startswith("FIRST:"):
            res = json.loads(line[len("FIRST:"):])
            res["wall"] = time.perf_counter() - w0
            break
    _, err = p.communicate(timeout=3600)
    if res is None:
        raise SystemExit(f"thermonet run failed:\n{err[-3000:]}")
    return res


def _with_bytecode(environ) -> dict:
    """``environ`` without ``PYTHONDONTWRITEBYTECODE``: an installed thermonet has its modules'
    bytecode (pip writes it), and a process that may not write it compiles every module's
    source at every start (about 0.3 CPU s of the imports)."""
    return {k: v for k, v in environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def phase_line(phases: list) -> str:
    """CPU seconds per phase: ``imports 1.02, load 0.10, ...`` (``gap`` between phases)."""
    parts, last = [], 0.0
    for name, t in phases:
        if name.startswith("before "):
            if t - last >= 0.01:
                parts.append(f"other {t - last:.2f}")
        else:
            parts.append(f"{name} {t - last:.2f}")
        last = t
    return "CPU s: " + ", ".join(parts)


def run_first_iteration(args) -> dict:
    """The first run, the warm runs and the profile of `--first-iteration`, printed."""
    import pstats

    out: dict = {"cold": None, "warm": []}
    with tempfile.TemporaryDirectory(prefix="first-run-") as tmp:
        env = _with_bytecode(os.environ)
        if not args.warm_only:
            env.update(NUMBA_CACHE_DIR=os.path.join(tmp, "numba"),
                       THERMONET_CACHE_DIR=os.path.join(tmp, "thermonet"))
            out["cold"] = first_iteration(args, env, os.path.join(tmp, "run"))
            print(f"first run (fresh Numba and calibration caches): {out['cold']['cpu']:.1f} "
                  f"CPU s, {out['cold']['wall']:.1f} s wall to iteration "
                  f"{out['cold']['iteration']}; {phase_line(out['cold']['phases'])}", flush=True)
        for i in range(args.repeats):
            r = first_iteration(args, env, os.path.join(tmp, "run"))
            out["warm"].append(r)
            print(f"warm run {i + 1}: {r['cpu']:.2f} CPU s, {r['wall']:.2f} s wall to iteration "
                  f"{r['iteration']}; {phase_line(r['phases'])}", flush=True)
        if args.profile:
            path = os.path.join(tmp, "profile.out")
            first_iteration(args, env, os.path.join(tmp, "run"), profile=path)
            print(f"where a warm run's time goes (cProfile, cumulative s, top {args.profile}):")
            pstats.Stats(path).sort_stats("cumulative").print_stats(args.profile)
    med = statistics.median
    if out["warm"]:
        print(f"median warm: {med(r['cpu'] for r in out['warm']):.2f} CPU s, "
              f"{med(r['wall'] for r in out['warm']):.2f} s wall")
    return out


def import_costs(top: int = 12) -> dict[str, float]:
    """Seconds of ``import thermonet.cli.run, thermonet.runner`` per top-level package (each
    module's own time, ``python -X importtime``), largest first."""
    for _ in range(2):            # the first may write the bytecode
        p = subprocess.run([sys.executable, "-X", "importtime", "-c",
                            "import thermonet.cli.run, thermonet.runner"],
                           capture_output=True, text=True, check=True,
                           env=_with_bytecode(os.environ))
    per: dict[str, float] = {}
    for line in p.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        own, _, name = (f.strip() for f in line[len("import time:"):].split("|"))
        pkg = name.split(".")[0] if not name.startswith("thermonet.") else \
            ".".join(name.split(".")[:2])
        per[pkg] = per.get(pkg, 0.0) + int(own) / 1e6
    return dict(sorted(per.items(), key=lambda kv: -kv[1])[:top])


def print_breakdown(rows: list[dict], min_cpu: float) -> None:
    """Print the compiles in call order, callees indented, those under ``min_cpu`` hidden."""
    # events end callee-first: a caller's row comes after its callees' rows; print in
    # call order (callers before callees) by walking the events backwards
    order = []
    stack: list[tuple[int, list]] = [(-1, order)]
    for r in reversed(rows):
        while stack[-1][0] >= r["depth"]:
            stack.pop()
        node = (r, [])
        stack[-1][1].append(node)
        stack.append((r["depth"], node[1]))

    def walk(nodes, indent):
        for r, kids in reversed(nodes):
            if r["cpu"] >= min_cpu:
                print(f"  {r['cpu']:7.2f}  {'  ' * indent}{r['name']}")
            walk(kids, indent + 1)

    walk(order, 0)


def main(argv=None) -> int:
    """Parse the command line and run the cold/warm, first-iteration or import measurements."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default=DEFAULT_CONFIG)
    ap.add_argument("--repeats", type=int, default=2, help="cold/warm pairs (default 2)")
    ap.add_argument("--cli", type=int, default=0, metavar="N",
                    help="run the whole `thermonet run` for N iterations in each child")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override a config value, as `thermonet run --set` (repeatable)")
    ap.add_argument("--min", type=float, default=0.05, dest="min_cpu",
                    help="breakdown: hide compiles under this many CPU seconds")
    ap.add_argument("--json", help="write every child's result here")
    ap.add_argument("--first-iteration", action="store_true",
                    help="time `thermonet run` to its first iteration: first run, then warm")
    ap.add_argument("--warm-only", action="store_true",
                    help="with --first-iteration: no first run; the warm runs use this "
                         "process's Numba and calibration caches")
    ap.add_argument("--profile", type=int, default=0, metavar="N",
                    help="with --first-iteration: the N costliest calls of a warm run")
    ap.add_argument("--imports", action="store_true",
                    help="import time of the command line and the runner, per package")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    args.config = os.path.abspath(args.config)
    if args.child:
        print("RESULT:" + json.dumps(child(args)), flush=True)
        return 0
    if args.first_iteration or args.imports:
        print(f"machine : {cpu_model()}, {os.cpu_count()} CPUs, load "
              f"{os.getloadavg()[0]:.1f} (CPU seconds are the measure on a shared machine)")
        print(f"config  : {os.path.relpath(args.config)}"
              f"{''.join(' --set ' + kv for kv in args.set)}")
        result: dict = {"machine": cpu_model(), "config": args.config}
        if args.imports:
            result["imports"] = import_costs()
            print("import thermonet.cli.run, thermonet.runner (own seconds per package): "
                  + ", ".join(f"{k} {v:.2f}" for k, v in result["imports"].items()))
        if args.first_iteration:
            result.update(run_first_iteration(args))
        if args.json:
            with open(args.json, "w") as fh:
                json.dump(result, fh, indent=1)
        return 0

    v = versions()
    print(f"machine : {cpu_model()} (LLVM {v.get('llvm_cpu')}; {vector_flags()}), "
          f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    print(f"versions: python {v['python']}, thermonet {v['thermonet']}, numpy {v['numpy']}, "
          f"numba {v['numba']}, llvmlite {v['llvmlite']}")
    print(f"config  : {os.path.relpath(args.config)}{''.join(' --set ' + kv for kv in args.set)}"
          + (f", whole run of {args.cli} iterations" if args.cli else ", build + warm_kernels"))
    results = []
    for i in range(args.repeats):
        with tempfile.TemporaryDirectory(prefix="numba-cache-") as cache:
            cold = run_child(args, cache)
            warm = run_child(args, cache)
        results.append({"cold": cold, "warm": warm})
        print(f"repeat {i + 1}: cold warm_kernels {cold['warm_kernels_cpu']:.2f} CPU s "
              f"(compiling {cold['compiling_cpu']:.2f}, {cold['n_top_level']} top-level / "
              f"{cold['n_compiles']} compiles), process {cold['total_cpu']:.1f} CPU s; warm "
              f"{warm['warm_kernels_cpu']:.3f} CPU s (compiles: {warm['n_compiles']}); "
              f"other processes {cold.get('other_cores', float('nan')):.1f} cores; "
              f"BLAS {cold['blas']}; 512-bit vectors {cold.get('vectors_512')}", flush=True)
        if args.cli:
            print(f"          compiling after warm_kernels: {cold['compiling_after_warm']:.2f} "
                  f"CPU s; whole run {cold['cli_cpu']:.1f} CPU s cold, "
                  f"{warm['cli_cpu']:.1f} warm")
    med = statistics.median
    print(f"median  : cold warm_kernels {med(r['cold']['warm_kernels_cpu'] for r in results):.2f}"
          f" CPU s, compiling {med(r['cold']['compiling_cpu'] for r in results):.2f} CPU s; "
          f"warm {med(r['warm']['warm_kernels_cpu'] for r in results):.3f} CPU s")
    print("breakdown of the first cold child (thread CPU s, callees indented under callers):")
    print_breakdown(results[0]["cold"]["compiles"], args.min_cpu)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"machine": cpu_model(), "versions": v, "config": args.config,
                       "results": results}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
