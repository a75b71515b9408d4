#!/usr/bin/env python
"""Speed of the M(3) energy+gradient: thermonet vs PyTorch vs JAX vs the machine's GEMM peak.

Usage::

    python benchmarks/bench_mlp.py            # full run (~3 min on 2 cores)
    python benchmarks/bench_mlp.py --quick    # fewer, shorter rounds (~1.5 min)

Everything is measured in ONE run and printed as one table: evals/s, ratios to PyTorch and JAX
measured in the same run, and percentages of the float64 GEMM peak measured in the same run.

* Data: random inputs x ~ N(0, 1) of shape (N, 256) and random labels 0..9 (real data is not
  needed for timing). Parameters: theta_i ~ N(0, 1/fan_in). The float32-vs-float64 error table
  at the end uses the paper's real training sets D50/D500/D5000 (embedded in thermonet).
* Each (implementation, thread count) lives in its own persistent subprocess, so thread pools
  never mix (JAX fixes its thread count at start-up; PyTorch and Numba bring their own OpenMP
  runtimes). The driver measures in ROUNDS: every round runs one timed loop (>= ``min_time``
  seconds, after warm-up) of every configuration in turn, so that load from other processes
  is spread over all configurations instead of hitting one. The table shows the BEST round
  (``--stat median`` for the median); the JSON has both.
* ``cpu/wall``: this configuration's CPU time over wall time (cores it kept busy). ``other``:
  cores used by OTHER processes during its timed loops (/proc/stat): a warning is printed when
  the machine was not idle.
* Threads: "1 thread" means one core in total: the 1-thread subprocesses are pinned to one CPU
  (``os.sched_setaffinity``; ``--no-pin`` disables it), and in addition BLAS is capped with
  threadpoolctl, Numba ``set_num_threads(1)``, ``torch.set_num_threads(1)``, and JAX gets
  ``XLA_FLAGS=--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1`` (which recent
  XLA versions no longer fully honour: without the pinning JAX keeps ~1.9 cores busy).
  "2 threads": Numba ``set_num_threads(2)`` with thermonet's ``threads=2`` potential (which
  caps BLAS at 1 thread inside its parallel region), ``torch.set_num_threads(2)``, JAX default.
* FLOP counts (GEMM work only): one M(3) gradient costs 62,560 FLOP per data point when the
  gradient w.r.t. the input pixels is skipped (thermonet, PyTorch and JAX all skip it), and
  83,040 FLOP per data point if it is included (the count quoted in the issue: 41.5 MFLOP at
  N = 500). "% peak" is given on both counts, labelled.

* BLAS: the ``thermonet`` rows use the backend thermonet chooses by itself (``THERMONET_BLAS``
  unset: the faster of Intel MKL and NumPy's ``np.dot`` on this machine, measured once and
  cached; ``thermonet calibrate`` shows it). The ``tn-openblas`` and ``tn-mkl`` rows are the
  same kernels forced onto ``np.dot`` (``THERMONET_BLAS=numpy``) and, when it is installed, onto
  MKL (``THERMONET_BLAS=mkl``), measured in the same run.

PyTorch and JAX are optional (measured when importable); they are not thermonet dependencies.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

from harness import (
    WIDTHS,
    calibrate,
    cpu_flags,
    cpu_model,
    fmt,
    limit_blas,
    make_data,
    timed_loop,
    versions,
)

SIZES = (50, 500, 5000)
GEMM_N = 2048


def flops_per_point(with_input_grad: bool) -> int:
    """GEMM FLOPs of one energy+gradient per data point for the MLP ``WIDTHS``."""
    pairs = list(itertools.pairwise(WIDTHS))
    fwd = sum(2 * a * b for a, b in pairs)          # z = a W^T
    gw = fwd                                        # dW = dz^T a
    da = sum(2 * a * b for a, b in pairs[1:])       # da = dz W for hidden layers
    dx = 2 * pairs[0][0] * pairs[0][1] if with_input_grad else 0
    return fwd + gw + da + dx


FLOP_SKIP = flops_per_point(False)   # 62,560
FLOP_FULL = flops_per_point(True)    # 83,040


# --------------------------------------------------------------------------------------------
# timing


# --------------------------------------------------------------------------------------------
# workers: each sets up callables, keyed by a string, in its own subprocess


def setup_gemm(args):
    """GEMM callables (float64, float32 and scipy's dgemm) of ``GEMM_N`` square matrices."""
    import numpy as np
    from scipy.linalg.blas import dgemm

    keep = limit_blas(args.threads)
    rng = np.random.default_rng(0)
    n = GEMM_N
    fns = {}
    for name, dt in (("float64", np.float64), ("float32", np.float32)):
        a = rng.standard_normal((n, n)).astype(dt)
        b = rng.standard_normal((n, n)).astype(dt)
        c = np.empty((n, n), dtype=dt)
        fns[name] = (lambda a=a, b=b, c=c: np.matmul(a, b, out=c))
    af = np.asfortranarray(rng.standard_normal((n, n)))
    bf = np.asfortranarray(rng.standard_normal((n, n)))
    fns["scipy_dgemm"] = lambda: dgemm(1.0, af, bf)   # the OpenBLAS Numba's np.dot calls
    return fns, {"_keep": keep}


def setup_thermonet(args):
    """The thermonet M(3) energy+gradient callables for every size, and BLAS and thread facts."""
    import numpy as np

    import thermonet.kernels  # noqa: F401  (before Numba: it chooses the vector width)

    keep = limit_blas(args.blas_threads if args.blas_threads else args.threads)
    import numba

    from thermonet.architectures.mlp import M3

    numba.set_num_threads(args.threads)
    dt = np.dtype(args.dtype)
    fns, info = {}, {"_keep": keep, "first_call_s": {}}
    for n in args.sizes:
        x, y, theta = make_data(n)
        kw = {} if args.block is None else {"block": args.block}
        pot = M3().potential(x=x, y=y, dtype=dt, threads=args.threads, **kw)
        th = theta.astype(dt)
        g = np.empty(th.shape[0], dtype=dt)
        t0 = time.perf_counter()
        pot.energy_and_grad(th, g)
        info["first_call_s"][str(n)] = time.perf_counter() - t0
        fns[str(n)] = (lambda pot=pot, th=th, g=g: pot.energy_and_grad(th, g))
    from thermonet.kernels.matmul import blas

    info["blas"] = blas.info()
    info["numba_cpu_features_512"] = "-prefer-256-bit" in os.environ.get("NUMBA_CPU_FEATURES", "")
    try:
        info["threading_layer"] = numba.threading_layer()
    except ValueError:
        info["threading_layer"] = None
    return fns, info


def setup_torch(args):
    """PyTorch autograd M(3) energy+gradient callables for every size, and their energies."""
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(args.threads)
    with contextlib.suppress(RuntimeError):
        torch.set_num_interop_threads(1)
    fns, info = {}, {"num_threads": torch.get_num_threads(), "energy": {}}
    n_layers = len(WIDTHS) - 1
    for n in args.sizes:
        x, y, theta = make_data(n)
        xt = torch.from_numpy(x)
        yt = torch.from_numpy(y)
        params, pos = [], 0
        for a, b in itertools.pairwise(WIDTHS):
            params.append(torch.tensor(theta[pos:pos + a * b].reshape(b, a), requires_grad=True))
            pos += a * b
            params.append(torch.tensor(theta[pos:pos + b], requires_grad=True))
            pos += b

        def f(xt=xt, yt=yt, params=params):
            h = xt
            for i in range(n_layers):
                h = F.linear(h, params[2 * i], params[2 * i + 1])
                if i < n_layers - 1:
                    h = torch.sigmoid(h)
            loss = F.cross_entropy(h, yt, reduction="sum")
            grads = torch.autograd.grad(loss, params)
            return loss.item(), grads

        info["energy"][str(n)] = f()[0]
        fns[str(n)] = f
    return fns, info


def setup_jax(args):
    """Jitted JAX M(3) energy+gradient callables for every size, and their energies."""
    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    shapes, pos = [], 0
    for a, b in itertools.pairwise(WIDTHS):
        shapes.append((pos, a, b))
        pos += a * b + b

    def loss(theta, x, y):
        h = x
        for i, (p, a, b) in enumerate(shapes):
            w = theta[p:p + a * b].reshape(b, a)
            bb = theta[p + a * b:p + a * b + b]
            h = h @ w.T + bb
            if i < len(shapes) - 1:
                h = jax.nn.sigmoid(h)
        lse = jax.nn.logsumexp(h, axis=1)
        return jnp.sum(lse - jnp.take_along_axis(h, y[:, None], axis=1)[:, 0])

    vg = jax.jit(jax.value_and_grad(loss))
    fns, info = {}, {"devices": [str(d) for d in jax.devices()], "energy": {}}
    for n in args.sizes:
        x, y, theta = make_data(n)
        xj, yj, tj = jnp.asarray(x), jnp.asarray(y), jnp.asarray(theta)
        assert xj.dtype == jnp.float64

        def f(xj=xj, yj=yj, tj=tj):
            return jax.block_until_ready(vg(tj, xj, yj))

        info["energy"][str(n)] = float(f()[0])
        fns[str(n)] = f
    return fns, info


SETUPS = {"gemm": setup_gemm, "thermonet": setup_thermonet, "torch": setup_torch,
          "jax": setup_jax}


def serve(args) -> int:
    """Worker main loop: set up, then answer one JSON command per stdin line."""
    fns, info = SETUPS[args.worker](args)
    keep = info.pop("_keep", None)  # noqa: F841  (the BLAS thread cap lives as long as this)
    counts: dict[str, int] = {}
    out = sys.stdout
    out.write(json.dumps({"ready": True, "keys": list(fns), "info": info}) + "\n")
    out.flush()
    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd.get("op") == "quit":
            break
        key = cmd["key"]
        f = fns[key]
        if key not in counts:
            for _ in range(3):
                f()
            counts[key] = calibrate(f, cmd["min_time"])[0]
        out.write(json.dumps(timed_loop(f, counts[key])) + "\n")
        out.flush()
    return 0


class Worker:
    """A persistent worker subprocess."""

    def __init__(self, label: str, kind: str, args, threads: int, extra=(), env=None):
        self.label, self.kind, self.threads = label, kind, threads
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", kind,
               "--threads", str(threads), "--sizes", ",".join(str(s) for s in args.sizes)]
        if not args.pin:
            cmd.append("--no-pin")
        cmd += list(extra)
        e = dict(os.environ)
        e.update(env or {})
        self.err = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 - the worker's stderr, read in wait_ready
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=self.err, text=True, env=e)
        self.keys, self.info, self.error = [], {}, None

    def wait_ready(self) -> bool:
        line = self.p.stdout.readline()
        if not line:
            self.p.wait()
            self.err.seek(0)
            err = self.err.read().strip().splitlines()[-3:]
            self.error = " | ".join(err)
            return False
        msg = json.loads(line)
        self.keys, self.info = msg["keys"], msg["info"]
        return True

    def time(self, key: str, min_time: float) -> dict:
        self.p.stdin.write(json.dumps({"op": "time", "key": key, "min_time": min_time}) + "\n")
        self.p.stdin.flush()
        return json.loads(self.p.stdout.readline())

    def close(self) -> None:
        try:
            self.p.stdin.write(json.dumps({"op": "quit"}) + "\n")
            self.p.stdin.flush()
            self.p.wait(timeout=30)
        except Exception:
            self.p.kill()


# --------------------------------------------------------------------------------------------
# one-shot workers: compile cost and precision


def worker_compile(args) -> dict:
    """First-call cost of every kernel a sampler uses (serial, parallel, energy; f64, f32)."""
    t0 = time.perf_counter()
    import numpy as np

    from thermonet.architectures.mlp import M3
    t_import = time.perf_counter() - t0
    x, y, theta = make_data(600)
    out = {"import_s": t_import}
    total = 0.0
    for dt in (np.float64, np.float32):
        for threads in (1, 2):
            pot = M3().potential(x=x, y=y, dtype=dt, threads=threads)
            th = theta.astype(dt)
            t0 = time.perf_counter()
            pot.energy_and_grad(th)
            if threads == 1:
                pot.energy(th)
            dt_s = time.perf_counter() - t0
            out[f"{np.dtype(dt).name}_threads{threads}_s"] = dt_s
            total += dt_s
    out["total_first_calls_s"] = total
    return out


def worker_precision(args) -> dict:
    """float32 vs float64 kernels on the paper's embedded training sets D50/D500/D5000."""
    import numpy as np

    from thermonet.architectures.mlp import M3
    from thermonet.data import load_dataset

    arch = M3()
    sigma_prior = 100.0 / np.sqrt(arch.fan_in())           # M(3)'s prior, c = 100
    out = {}
    for name in ("D50", "D500", "D5000"):
        d = load_dataset(name)
        p64 = arch.potential(d)
        p32 = arch.potential(d, dtype=np.float32)
        rng = np.random.default_rng(2024)
        draws = {"init": [arch.initial_draw(rng) for _ in range(3)]}
        th = draws["init"][0].copy()
        for _ in range(300):                                # partly trained: plain GD
            th -= (5.0 / len(d.y)) * p64.energy_and_grad(th)[1]
        draws["GD300"] = [th]
        draws["0.1 prior"] = [0.1 * sigma_prior * rng.standard_normal(arch.n_params)
                              for _ in range(3)]
        draws["prior"] = [sigma_prior * rng.standard_normal(arch.n_params) for _ in range(3)]
        rows = {}
        for label, thetas in draws.items():
            de, rel, es = [], [], []
            for t in thetas:
                e64, g64 = p64.energy_and_grad(t)
                e32, g32 = p32.energy_and_grad(t)
                de.append(abs(e32 - e64))
                rel.append(float(np.linalg.norm(g32 - g64) / np.linalg.norm(g64)))
                es.append(e64)
            rows[label] = {"E": float(np.median(es)), "dE_max": float(max(de)),
                           "grad_rel_max": float(max(rel)), "n": len(thetas)}
        out[name] = rows
    return out


ONESHOT = {"compile": worker_compile, "precision": worker_precision}


def run_oneshot(name: str, args, env=None, timeout=1800):
    """Run the one-shot worker ``name`` in a subprocess: its result, or None if it failed."""
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", name, "--threads", "1"]
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.run(cmd, capture_output=True, text=True, env=e, timeout=timeout)
    for line in p.stdout.splitlines()[::-1]:
        if line.startswith("RESULT:"):
            return json.loads(line[len("RESULT:"):])
    tail = (p.stderr or p.stdout).strip().splitlines()[-3:]
    print(f"  [{name}] failed: {' | '.join(tail)}", file=sys.stderr)
    return None


# --------------------------------------------------------------------------------------------
# driver


def main(argv=None) -> int:
    """Run a worker, or drive all workers and print (and optionally save) the tables."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer and shorter rounds")
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)))
    ap.add_argument("--rounds", type=int, default=None, help="timing rounds (default 7; 3 quick)")
    ap.add_argument("--stat", choices=("best", "median"), default="best",
                    help="statistic over rounds shown in the table")
    ap.add_argument("--threads", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--worker", choices=sorted(SETUPS) + sorted(ONESHOT), help=argparse.SUPPRESS)
    ap.add_argument("--dtype", default="float64", help=argparse.SUPPRESS)
    ap.add_argument("--blas-threads", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--block", type=int, default=None, help="thermonet rows per block")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--no-jax", action="store_true")
    ap.add_argument("--no-compile", action="store_true", help="skip the compile-cost probe")
    ap.add_argument("--no-precision", action="store_true",
                    help="skip the float32-vs-float64 error table (uses thermonet's embedded "
                         "D50/D500/D5000)")
    ap.add_argument("--no-pin", dest="pin", action="store_false",
                    help="do not pin 1-thread runs to one CPU (sched_setaffinity)")
    ap.add_argument("--json", default=None, help="also write all results to this file")
    args = ap.parse_args(argv)
    args.sizes = [int(s) for s in str(args.sizes).split(",") if s]

    if args.worker:
        if args.pin and args.threads == 1 and hasattr(os, "sched_setaffinity"):
            # one thread means one core: XLA ignores its thread flags in recent JAX versions
            os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
        if args.worker in ONESHOT:
            print("RESULT:" + json.dumps(ONESHOT[args.worker](args)))
            return 0
        return serve(args)

    rounds = args.rounds or (3 if args.quick else 7)
    min_time = 0.15 if args.quick else 0.3
    import importlib.util
    has = {m: importlib.util.find_spec(m) is not None for m in ("torch", "jax")}
    has["torch"] &= not args.no_torch
    has["jax"] &= not args.no_jax
    ver = versions()
    flags = cpu_flags()
    ncpu = os.cpu_count()
    try:
        naff = len(os.sched_getaffinity(0))
    except AttributeError:
        naff = ncpu
    print("thermonet M(3) energy+gradient benchmark")
    print(f"machine : {cpu_model()} (LLVM: {ver.get('llvm_cpu')}); {ncpu} logical CPUs "
          f"({naff} usable); AVX-512F: {'avx512f' in flags}; {platform.system()} "
          f"{platform.release()}")
    print("versions: " + ", ".join(f"{k} {v}" for k, v in ver.items()
                                   if v is not None and k != "llvm_cpu"))
    print("data    : random x ~ N(0,1) of shape (N, 256), random labels 0..9 (not real MNIST)")
    print(f"threads : 1-thread runs {'pinned to one CPU' if args.pin else 'NOT pinned'}; "
          "2-thread runs unpinned")
    print(f"timing  : {rounds} interleaved rounds of one >= {min_time:.2f} s loop per "
          f"configuration; table shows the {args.stat} round")
    print(flush=True)

    results = {"machine": {"cpu": cpu_model(), "logical_cpus": ncpu, "usable_cpus": naff,
                           "avx512f": "avx512f" in flags},
               "versions": ver, "sizes": args.sizes, "quick": args.quick, "rounds": rounds,
               "min_time": min_time, "stat": args.stat}
    thread_counts = (1, 2)
    blk = [] if args.block is None else ["--block", str(args.block)]
    xla1 = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
    specs = []
    for t in thread_counts:
        specs.append((("gemm", "-", t), "gemm", t, [], {}))
    for dt in ("float64", "float32"):
        for t in thread_counts:
            specs.append((("thermonet", dt, t), "thermonet", t, ["--dtype", dt, *blk], {}))
    for t in thread_counts:      # the same kernels with NumPy's BLAS (np.dot -> OpenBLAS)
        specs.append((("tn-openblas", "float64", t), "thermonet", t, ["--dtype", "float64", *blk],
                      {"THERMONET_BLAS": "numpy"}))
    from thermonet.kernels.matmul import backend as tn_backend
    if tn_backend.load_mkl()[0] is not None:
        for t in thread_counts:  # the same kernels with MKL
            specs.append((("tn-mkl", "float64", t), "thermonet", t,
                          ["--dtype", "float64", *blk], {"THERMONET_BLAS": "mkl"}))
    for t in thread_counts:
        if has["torch"]:
            specs.append((("pytorch", "float64", t), "torch", t, [],
                          {"OMP_NUM_THREADS": str(t), "MKL_NUM_THREADS": str(t)}))
        if has["jax"]:
            env = {"JAX_PLATFORMS": "cpu"}
            if t == 1:
                env["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + xla1).strip()
            specs.append((("jax", "float64", t), "jax", t, [], env))

    print(f"starting {len(specs)} worker processes ...", flush=True)
    workers = {}
    for key, kind, t, extra, env in specs:
        w = Worker("/".join(map(str, key)), kind, args, t, extra, env)
        if w.wait_ready():      # one at a time: set-up and compilation do not overlap
            workers[key] = w
        else:
            print(f"  {w.label}: failed to start: {w.error}", file=sys.stderr)
    samples: dict = {k: {kk: [] for kk in w.keys} for k, w in workers.items()}
    order = list(workers)
    t_start = time.perf_counter()
    try:
        for r in range(rounds):
            print(f"round {r + 1}/{rounds} ...", flush=True)
            rot = order[r % len(order):] + order[:r % len(order)]
            for key in rot:
                w = workers[key]
                for kk in w.keys:
                    samples[key][kk].append(w.time(kk, min_time))
                    time.sleep(0.02)
    finally:
        for w in workers.values():
            w.close()
    t_rounds = time.perf_counter() - t_start

    def stat(lst):
        rates = [s["rate"] for s in lst]
        best = max(range(len(rates)), key=rates.__getitem__)
        med = statistics.median(rates)
        pick = lst[best] if args.stat == "best" else min(lst, key=lambda s: abs(s["rate"] - med))
        others = [s["other"] for s in lst if s["other"] is not None]
        return {"rate": pick["rate"], "best": rates[best], "median": med, "cpu": pick["cpu"],
                "other": pick["other"], "other_max": max(others) if others else None,
                "rates": rates}

    table = {k: {kk: stat(v) for kk, v in d.items()} for k, d in samples.items()}
    results["timings"] = {"/".join(map(str, k)): v for k, v in table.items()}
    results["worker_info"] = {"/".join(map(str, k)): w.info for k, w in workers.items()}
    gemm = {t: table.get(("gemm", "-", t)) for t in thread_counts}
    flop_gemm = 2.0 * GEMM_N ** 3

    compile_info = None
    if not args.no_compile:
        print("compile cost (cold cache, then warm cache in a new process) ...", flush=True)
        with tempfile.TemporaryDirectory() as d:
            env = {"NUMBA_CACHE_DIR": d}
            cold = run_oneshot("compile", args, env=env)
            warm = run_oneshot("compile", args, env=env)
        compile_info = {"cold": cold, "warm": warm}
        results["compile"] = compile_info
    prec = None
    if not args.no_precision:
        print("float32 vs float64 errors on D50/D500/D5000 ...", flush=True)
        prec = run_oneshot("precision", args)
        results["precision"] = prec

    # ---------------------------------------------------------------- table
    print(f"\n(timing rounds took {t_rounds:.0f} s)\n")
    peak = {}
    for t in thread_counts:
        g = gemm.get(t)
        if g:
            peak[t] = {dt: flop_gemm * g[dt]["best"] / 1e9 for dt in ("float64", "float32")}
            print(f"GEMM peak ({t} thread{'s' if t > 1 else ''}, numpy.matmul {GEMM_N}^3, best "
                  f"round): float64 {peak[t]['float64']:.1f} GFLOP/s, float32 "
                  f"{peak[t]['float32']:.1f} GFLOP/s (scipy dgemm "
                  f"{flop_gemm * g['scipy_dgemm']['best'] / 1e9:.1f}; other processes "
                  f"{fmt(g['float64'].get('other'), '.2f')} cores)")
    results["gemm_peak_gflops"] = peak
    print(f"FLOP per data point: {FLOP_SKIP:,} without the input-pixel gradient ('%pk' columns), "
          f"{FLOP_FULL:,} with it ('%pk*', the issue's 41.5 MFLOP at N = 500)")
    print()
    hdr = (f"{'N':>5} {'implementation':<15} {'thr':>3} {'evals/s':>9} {'ms/eval':>8} "
           f"{'GFLOP/s':>8} {'%pk':>6} {'%pk*':>6} {'xTorch':>7} {'xJAX':>6} {'cpu/wall':>8} "
           f"{'other':>5}")
    print(hdr)
    print("-" * len(hdr))
    order_rows = [("thermonet", "float64"), ("thermonet", "float32"), ("tn-openblas", "float64"),
                  ("tn-mkl", "float64"), ("pytorch", "float64"), ("jax", "float64")]
    summary = {}
    busiest = 0.0
    for n in args.sizes:
        for t in thread_counts:
            ref_t = table.get(("pytorch", "float64", t), {}).get(str(n))
            ref_j = table.get(("jax", "float64", t), {}).get(str(n))
            rt = ref_t["rate"] if ref_t else None
            rj = ref_j["rate"] if ref_j else None
            for impl, dt in order_rows:
                m = table.get((impl, dt, t), {}).get(str(n))
                if not m:
                    continue
                rate = m["rate"]
                gf = rate * n * FLOP_SKIP / 1e9
                pk_val = peak.get(t, {}).get(dt)
                pk = 100 * gf / pk_val if pk_val else None
                pk_full = 100 * rate * n * FLOP_FULL / 1e9 / pk_val if pk_val else None
                label = f"{impl} {'f64' if dt == 'float64' else 'f32'}"
                xt = rate / rt if rt else None
                xj = rate / rj if rj else None
                print(f"{n:>5} {label:<15} {t:>3} {rate:>9.1f} {1e3 / rate:>8.3f} {gf:>8.1f} "
                      f"{fmt(pk, '6.1f')} {fmt(pk_full, '6.1f')} {fmt(xt, '7.2f')} "
                      f"{fmt(xj, '6.2f')} {m['cpu']:>8.2f} {fmt(m.get('other'), '5.2f')}")
                busiest = max(busiest, m.get("other") or 0.0)
                summary[(impl, dt, t, n)] = {"rate": rate, "pk": pk, "pk_full": pk_full,
                                             "x_torch": xt, "x_jax": xj}
        print()
    tn_info = workers.get(("thermonet", "float64", 1))
    if tn_info is not None:
        b = tn_info.info.get("blas", {})
        print(f"thermonet rows: backend {b.get('blas_backend')} ({b.get('blas_note', '')})")
    results["summary"] = {"/".join(map(str, k)): v for k, v in summary.items()}
    print("%pk: % of the same-thread-count GEMM peak of the row's dtype (float32 rows: float32 "
          "peak), counting 62,560 FLOP/point; %pk*: counting 83,040 FLOP/point.")
    print("xTorch / xJAX: ratio to PyTorch / JAX float64 at the same N and thread count, "
          "same run.")
    print("cpu/wall: cores this configuration kept busy; other: cores used by OTHER processes "
          "during the reported loop (/proc/stat).")
    if busiest > 0.15:
        print(f"WARNING: other processes used up to {busiest:.2f} cores during reported loops; "
              "those numbers (especially 2-thread ones) are pessimistic. Re-run when idle.")

    # ---------------------------------------------------------------- targets
    def s(key):
        return summary.get(key)

    print("\ntargets (issue):")
    a1, a2 = s(("thermonet", "float64", 1, 500)), s(("thermonet", "float64", 2, 500))
    if a1 and a1["x_torch"] is not None and a1["x_jax"] is not None:
        worst = min(a1["x_torch"], a1["x_jax"])
        print(f"  N=500, 1 thread : >= 1.5x PyTorch and JAX  -> {a1['x_torch']:.2f}x / "
              f"{a1['x_jax']:.2f}x  {'MET' if worst >= 1.5 else 'NOT MET'}")
    if a2 and a2["x_torch"] is not None and a2["x_jax"] is not None:
        worst = min(a2["x_torch"], a2["x_jax"])
        print(f"  N=500, 2 threads: >= 2.5x PyTorch and JAX  -> {a2['x_torch']:.2f}x / "
              f"{a2['x_jax']:.2f}x  {'MET' if worst >= 2.5 else 'NOT MET'}")
    a3 = s(("thermonet", "float64", 2, 5000))
    if a3 and a3["pk"] is not None:
        # issue 17 asks for 70 % on the FLOP actually computed; an earlier issue for 60 % on
        # its 83,040 FLOP/pt count, which includes the input-pixel gradient nobody computes
        print(f"  N=5000, 2 threads: >= 70% of 2-thread float64 GEMM peak on the 62,560 "
              f"FLOP/pt actually computed -> {a3['pk']:.1f}% "
              f"({'MET' if a3['pk'] >= 70 else 'NOT MET'}); >= 60% on the 83,040 FLOP/pt "
              f"count -> {a3['pk_full']:.1f}% ({'MET' if a3['pk_full'] >= 60 else 'NOT MET'})")
    for t in thread_counts:
        r64 = s(("thermonet", "float64", t, 5000))
        r32 = s(("thermonet", "float32", t, 5000))
        if r64 and r32:
            print(f"  float32/float64 speed-up at N=5000, {t} thread(s): "
                  f"{r32['rate'] / r64['rate']:.2f}x")
    tinfo = workers.get(("thermonet", "float64", 2))
    if tinfo is not None:
        print(f"  (thermonet 2-thread Numba threading layer: "
              f"{tinfo.info.get('threading_layer')}; BLAS {tinfo.info.get('blas')}; "
              f"512-bit vectors: {tinfo.info.get('numba_cpu_features_512')})")

    if compile_info and compile_info["cold"] and compile_info["warm"]:
        c, w = compile_info["cold"], compile_info["warm"]
        print(f"\nfirst-call cost of all M(3) kernels (float64+float32, serial+parallel, energy): "
              f"cold cache {c['total_first_calls_s']:.1f} s (import {c['import_s']:.1f} s); "
              f"warm cache, new process {w['total_first_calls_s']:.2f} s "
              f"(import {w['import_s']:.1f} s)")
        for key in sorted(k for k in c if k.endswith("_s") and k.startswith("float")):
            print(f"    {key[:-2]:<18} cold {c[key]:7.2f} s   warm {w[key]:6.3f} s")
    if prec:
        temp = 0.01
        print("\nmixed precision: float32 kernels vs float64 (real data: the paper's D50, D500, "
              "D5000; max over the draws)")
        print(f"{'set':<6} {'weights':<10} {'E (f64)':>11} {'|E32-E64|':>10} "
              f"{'exp(|dE|/T), T=0.01':>20} {'|g32-g64|/|g64|':>16}")
        for name, rows in prec.items():
            for label, r in rows.items():
                fac = math.exp(min(r["dE_max"] / temp, 700.0))
                print(f"{name:<6} {label:<10} {r['E']:>11.4g} {r['dE_max']:>10.2e} "
                      f"{fac:>20.6g} {r['grad_rel_max']:>16.2e}")
        print("weights: init = the standard initial draw U(+-1/sqrt(k)); GD300 = 300 gradient-"
              "descent steps from it; prior / 0.1 prior = draws from M(3)'s Gaussian prior "
              "(c = 100) / 0.1 of its width.")
        print("exp(|dE|/T): factor by which a float32 energy error can distort a Metropolis "
              "acceptance ratio at T = 0.01 (why accept/reject energies stay float64).")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=1, default=str)
    return 0


if __name__ == "__main__":
    from thermonet.kernels import configure

    configure()    # as the command line does: before any kernel is imported
    sys.exit(main())
