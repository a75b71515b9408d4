#!/usr/bin/env python
"""Speed and memory of thermonet's HMC and replica-exchange HMC (M(3)), against PyTorch and JAX.

Usage::

    python benchmarks/bench_hmc.py            # full run (~6 min on 2 cores)
    python benchmarks/bench_hmc.py --quick    # fewer, shorter rounds (~4 min)

Everything below is measured in ONE run, and every ratio comes from that run:

1. **HMC trajectories per second** for M(3) at N = 50, 500 and 5000 (float64, 1 thread), with
   L = 100 leapfrog steps and a FIXED step size dt = 1e-3 (small, so no trajectory stops early
   and the acceptance rate does not matter: trajectories are timed, not sampled; the table
   reports the acceptance and that every trajectory ran its L steps):

   * ``thermonet step``: the full ``HMC.step`` (momentum draw, the compiled L-step trajectory,
     kinetic energies, box test, accept/reject);
   * ``thermonet traj``: ``potential.trajectory`` alone (the compiled trajectory);
   * ``thermonet L x grad kernel``: L calls of the gradient kernel the trajectory uses
     (``thermonet.kernels.mlp.loss_and_grad``, the arguments of ``energy_and_grad``) from a
     compiled loop: the cost of the L gradients alone, without any Python;
   * ``thermonet L x grad (Python)``: L calls of ``potential.energy_and_grad`` from Python;
   * "overhead" = step / (L x grad kernel) - 1, the cost of everything around the gradient
     relative to the gradients (the issue's target: < 10%), split into the part inside the
     compiled trajectory (leapfrog updates, runaway test) and the Python part of ``HMC.step``;
     also given against L x ``energy_and_grad`` from Python;
   * ``pytorch step``: a hand-written PyTorch HMC step (float64, autograd, one leaf tensor per
     weight matrix and bias, leapfrog updates in place with ``torch._foreach_*`` under
     ``no_grad``; no per-step runaway test, so it does slightly less work than thermonet), and
     ``pytorch L x grad`` (L autograd gradient calls);
   * ``jax step``: a whole HMC step in one ``jax.jit`` (momentum draw, the trajectory as a
     ``lax.fori_loop`` over ``value_and_grad``, accept/reject), and ``jax L x grad``.

2. **RE-HMC replica-trajectories per second**: 16 replicas of M(3) on the paper's D500
   (embedded), ladder 1e-2..1e2, n_trajectories = 1, L = 100, dt = 1e-3 for every slot (no
   adaptation), with ``workers=2`` against ``workers=1`` and against 16 sequential
   single-replica ``HMC.step`` calls (the same 16 samplers, one after the other). ``RE step``
   is ``ReplicaExchange.step`` called directly, as the API documents; ``RE step, BLAS capped
   by caller`` is the same call inside ``thermonet.kernels.threads.blas_single()`` in the
   calling thread, as ``thermonet.runner.Run.run`` does. Target: >= 1.8x on 2 cores.

3. **Memory**: an RE-HMC run with N_T = 112 on D5000 (M(3)) built through ``thermonet.runner``
   from a config written to a temporary directory (``init.minimise = false``, a 1-trajectory
   burn-in, L = 2: memory does not depend on L), with ``workers = 2``, checkpoints and stored
   samples. Reported: RSS after every iteration (no growth expected), the peak RSS (VmHWM,
   reset just before the run when the kernel allows it, and ``ru_maxrss`` of the whole
   process), and the expected N_T x (arrays per replica) x 8 bytes + data size computed from
   the objects' shapes.

Method (as benchmarks/bench_mlp.py): every configuration lives in its own persistent
subprocess; timing is in interleaved ROUNDS, one loop (>= ``min_time`` s after warm-up) per
configuration per round; the table shows the BEST round (``--stat median`` for the median).
"1 thread" = the subprocess is pinned to one CPU, BLAS capped at 1 thread (threadpoolctl), Numba,
PyTorch and XLA set to 1 thread. ``other`` = cores used by OTHER processes during the reported
loop (/proc/stat); a warning is printed above 0.15. This VM's speed also drifts by up to
+-30% between rounds with ``other`` at 0, so the overhead and the RE speed-up are taken from
calls run back to back in one process (median of the ratios of adjacent calls), and the 2-core
limit of the machine is measured with two independent single-replica processes, one per core.

Numba cache: by default all workers share one FRESH temporary ``NUMBA_CACHE_DIR`` (the first
worker compiles, the others load), so the run measures the kernels as they are in the source
tree. Numba's cache does not notice edits in other modules: a stale cached
``leapfrog.mlp_trajectory`` keeps an old copy of the gradient kernel compiled into it.
``--cache env`` uses the environment's cache instead; every thermonet worker checks that one
trajectory step with dt = 0 reproduces ``energy_and_grad`` bit for bit and warns if not.

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
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from harness import (
    WIDTHS,
    calibrate,
    cpu_model,
    fmt,
    gradient_loop,
    limit_blas,
    make_data,
    timed_loop,
    versions,
)

SIZES = (50, 500, 5000)
L_STEPS = 100
DT = 1e-3
TEMPERATURE = 1.0
RUNAWAY = 10.0
RE_REPLICAS = 16
RE_DATA = "D500"
MEM_REPLICAS = 112
MEM_DATA = "D5000"


# --------------------------------------------------------------------------------------------
# timing (the conventions of bench_mlp.py)


def box_half_width():
    """The M(3) box half-widths (c = 100) as a float64 array."""
    from thermonet.architectures.mlp import M3
    from thermonet.priors import BoxPrior

    return BoxPrior.for_architecture(M3()).half_width


# --------------------------------------------------------------------------------------------
# workers: each sets up callables keyed by a string, in its own subprocess


def kernel_consistency(pot, half_width) -> bool:
    """True if one trajectory step with dt = 0 reproduces energy_and_grad bit for bit (a stale
    Numba cache of ``mlp_trajectory`` carries an older gradient kernel and fails this)."""
    import numpy as np

    rng = np.random.default_rng(7)
    th = rng.standard_normal(pot.n_params) * 0.3
    e0, g0 = pot.energy_and_grad(th)
    g0 = g0.copy()
    t, p, g = th.copy(), np.zeros_like(th), g0.copy()
    e1, n_done, status, _ = pot.trajectory(t, p, g, np.ones_like(th), 0.0, 1, 0, half_width,
                                           RUNAWAY)
    return bool(e1 == e0 and np.array_equal(g, g0) and status == 0 and n_done == 1)


def paired(stats: dict, key: str, calls) -> object:
    """A callable that runs ``calls`` back to back and records each one's wall time in
    ``stats[key]``: ratios of adjacent calls are robust to the machine's speed drifting (this
    VM's speed drifts by up to +-30% from one round to the next)."""
    rec = stats[key] = {name: [] for name, _ in calls}

    def f():
        for name, g in calls:
            t0 = time.perf_counter()
            g()
            rec[name].append(time.perf_counter() - t0)
    return f


def paired_ratios(rec: dict, num: str, den: str, skip: int = 1) -> list[float]:
    """Ratios of the paired ``num`` and ``den`` times in ``rec``, the first ``skip`` left out."""
    return [a / b for a, b in zip(rec[num][skip:], rec[den][skip:], strict=True)]


def setup_thermonet(args):
    """The thermonet HMC step, trajectory and L-gradient callables for every size, and stats."""
    import numpy as np

    keep = limit_blas(1)
    import numba

    from thermonet.architectures.mlp import M3
    from thermonet.kernels import leapfrog as lf
    from thermonet.kernels import mlp as km
    from thermonet.priors import BoxPrior
    from thermonet.samplers.hmc import HMC

    numba.set_num_threads(1)

    grad_loop = gradient_loop()   # n calls of the gradient kernel from compiled code

    arch = M3()
    prior = BoxPrior.for_architecture(arch)
    fns, stats = {}, {}
    info = {"_keep": keep, "first_call_s": {}, "consistent": {}}
    for n in args.sizes:
        x, y, theta = make_data(n)
        pot = arch.potential(x=x, y=y)
        t0 = time.perf_counter()
        info["consistent"][str(n)] = kernel_consistency(pot, prior.half_width)
        info["first_call_s"][str(n)] = time.perf_counter() - t0
        hmc = HMC(pot, prior=prior, temperature=TEMPERATURE, n_leapfrog=args.L, step_size=DT)
        rng = np.random.default_rng(100 + n)
        box = [hmc.init(theta)]
        st = stats[f"step/{n}"] = {"n": 0, "accepted": 0, "full": 0, "divergent": 0}

        def step(hmc=hmc, box=box, rng=rng, st=st):
            box[0], inf = hmc.step(box[0], rng)
            st["n"] += 1
            st["accepted"] += inf.is_accepted
            st["full"] += inf.n_steps == hmc.config.n_leapfrog
            st["divergent"] += inf.is_divergent

        s0 = hmc.init(theta)
        p0 = rng.standard_normal(theta.shape[0]) * np.sqrt(TEMPERATURE)
        bt, bp, bg = np.empty_like(theta), np.empty_like(theta), np.empty_like(theta)
        stt = stats[f"traj/{n}"] = {"n": 0, "full": 0}

        def traj(pot=pot, hmc=hmc, s0=s0, p0=p0, bt=bt, bp=bp, bg=bg, stt=stt):
            np.copyto(bt, s0.theta)
            np.copyto(bp, p0)
            np.copyto(bg, s0.grad)
            _, n_done, status, _ = pot.trajectory(
                bt, bp, bg, hmc.inv_mass, DT, hmc.config.n_leapfrog, lf.WALL_NONE,
                hmc.half_width, hmc.config.runaway, "float64")
            stt["n"] += 1
            stt["full"] += n_done == hmc.config.n_leapfrog and status == lf.OK

        g = np.empty_like(theta)

        def grads(pot=pot, th=theta, g=g, n_steps=args.L):
            for _ in range(n_steps):
                pot.energy_and_grad(th, g)

        work = np.empty(int(km.work_size(pot.model.widths, pot.model.block)))
        partial = np.empty(pot.n_params)

        def kgrads(pot=pot, th=theta, g=g, n_steps=args.L, work=work, partial=partial):
            # the same kernel and arguments as MLPPotential.energy_and_grad (serial path)
            m = pot.model
            grad_loop(th, tuple(m), work, partial, g, n_steps)

        fns[f"step/{n}"], fns[f"traj/{n}"] = step, traj
        fns[f"grad/{n}"], fns[f"kgrad/{n}"] = grads, kgrads
        fns[f"ovh/{n}"] = paired(stats, f"ovh/{n}", (("step", step), ("traj", traj),
                                                     ("kgrad", kgrads), ("grad", grads)))
    return fns, info, stats


def setup_torch(args):
    """A hand-written PyTorch HMC step and L-gradient callables for every size, and their stats."""
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(1)
    with contextlib.suppress(RuntimeError):
        torch.set_num_interop_threads(1)
    hw_flat = box_half_width()
    shapes, pos = [], 0
    for a, b in itertools.pairwise(WIDTHS):
        shapes.append(((pos, a * b, (b, a)), (pos + a * b, b, (b,))))
        pos += a * b + b

    def split(v):
        """Per-layer tensors (weight (out, in), bias) of a flat float64 vector."""
        out = []
        for layer in shapes:
            for p, size, shape in layer:
                out.append(torch.tensor(v[p:p + size].reshape(shape)))
        return out

    hws = split(hw_flat)
    ims = [torch.ones_like(h) for h in hws]               # unit masses, as thermonet's run
    n_layers = len(shapes)
    p_scale = math.sqrt(TEMPERATURE)
    fns, stats = {}, {}
    info = {"num_threads": torch.get_num_threads()}
    for n in args.sizes:
        x, y, theta = make_data(n)
        xt, yt = torch.from_numpy(x), torch.from_numpy(y)

        def energy_grad(qs, xt=xt, yt=yt):
            h = xt
            for i in range(n_layers):
                h = F.linear(h, qs[2 * i], qs[2 * i + 1])
                if i < n_layers - 1:
                    h = torch.sigmoid(h)
            loss = F.cross_entropy(h, yt, reduction="sum")
            gs = torch.autograd.grad(loss, qs)
            return loss.detach().item(), list(gs)

        gen = torch.Generator().manual_seed(1000 + n)
        q0 = [t.requires_grad_(True) for t in split(theta)]
        e0, g0 = energy_grad(q0)
        box = [(q0, e0, g0)]
        st = stats[f"step/{n}"] = {"n": 0, "accepted": 0, "full": 0, "divergent": 0}

        def step(box=box, gen=gen, energy_grad=energy_grad, st=st, n_steps=args.L):
            qs_0, e_0, gs = box[0]
            ps = [torch.randn(q.shape, generator=gen, dtype=torch.float64).mul_(p_scale)
                  for q in qs_0]
            log_u = math.log(float(torch.rand(1, generator=gen, dtype=torch.float64)))
            k0 = 0.5 * sum(float(torch.sum(p * p * m)) for p, m in zip(ps, ims, strict=True))
            qs = [q.detach().clone().requires_grad_(True) for q in qs_0]
            e = math.nan
            for _ in range(n_steps):
                with torch.no_grad():
                    torch._foreach_add_(ps, gs, alpha=-0.5 * DT)       # half kick
                    torch._foreach_addcmul_(qs, ps, ims, value=DT)     # drift
                e, gs = energy_grad(qs)
                with torch.no_grad():
                    torch._foreach_add_(ps, gs, alpha=-0.5 * DT)       # half kick
            k1 = 0.5 * sum(float(torch.sum(p * p * m)) for p, m in zip(ps, ims, strict=True))
            in_box = all(bool((q.detach().abs() < h).all()) for q, h in zip(qs, hws, strict=True))
            log_a = -((e + k1) - (e_0 + k0)) / TEMPERATURE if in_box else -math.inf
            ok = math.isfinite(e) and log_u < log_a
            st["n"] += 1
            st["accepted"] += ok
            st["full"] += 1
            st["divergent"] += not math.isfinite(e)
            if ok:
                box[0] = (qs, e, gs)

        def grads(qs=q0, energy_grad=energy_grad, n_steps=args.L):
            for _ in range(n_steps):
                energy_grad(qs)

        fns[f"step/{n}"], fns[f"grad/{n}"] = step, grads
    return fns, info, stats


def setup_jax(args):
    """A one-``jax.jit`` HMC step and L-gradient callables for every size, and their stats."""
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
            h = h @ theta[p:p + a * b].reshape(b, a).T + theta[p + a * b:p + a * b + b]
            if i < len(shapes) - 1:
                h = jax.nn.sigmoid(h)
        lse = jax.nn.logsumexp(h, axis=1)
        return jnp.sum(lse - jnp.take_along_axis(h, y[:, None], axis=1)[:, 0])

    vg = jax.value_and_grad(loss)
    vg_jit = jax.jit(vg)
    hw = jnp.asarray(box_half_width())
    inv_mass = jnp.ones(hw.shape[0], dtype=jnp.float64)
    p_scale = math.sqrt(TEMPERATURE)
    n_steps = args.L

    def hmc_step(theta, e0, g0, key, x, y):
        key, k_p, k_u = jax.random.split(key, 3)
        p = jax.random.normal(k_p, theta.shape, dtype=jnp.float64) * p_scale
        k0 = 0.5 * jnp.sum(inv_mass * p * p)

        def body(_, c):
            q, p, g, e = c
            p = p - 0.5 * DT * g
            q = q + DT * inv_mass * p
            e, g = vg(q, x, y)
            p = p - 0.5 * DT * g
            return q, p, g, e

        q, p, g, e = jax.lax.fori_loop(0, n_steps, body, (theta, p, g0, e0))
        k1 = 0.5 * jnp.sum(inv_mass * p * p)
        in_box = jnp.all(jnp.abs(q) < hw)
        log_a = jnp.where(in_box & jnp.isfinite(e), -((e + k1) - (e0 + k0)) / TEMPERATURE,
                          -jnp.inf)
        acc = jnp.log(jax.random.uniform(k_u, dtype=jnp.float64)) < log_a
        return (jnp.where(acc, q, theta), jnp.where(acc, e, e0), jnp.where(acc, g, g0), key,
                acc)

    step_jit = jax.jit(hmc_step)
    fns, stats = {}, {}
    info = {"devices": [str(d) for d in jax.devices()]}
    for n in args.sizes:
        x, y, theta = make_data(n)
        xj, yj, tj = jnp.asarray(x), jnp.asarray(y), jnp.asarray(theta)
        assert xj.dtype == jnp.float64
        e0, g0 = vg_jit(tj, xj, yj)
        box = [(tj, e0, g0, jax.random.key(2000 + n))]
        st = stats[f"step/{n}"] = {"n": 0, "accepted": 0, "full": 0, "divergent": 0}

        def step(box=box, xj=xj, yj=yj, st=st):
            th, e, g, key = box[0]
            th, e, g, key, acc = step_jit(th, e, g, key, xj, yj)
            acc = bool(jax.block_until_ready(acc))
            box[0] = (th, e, g, key)
            st["n"] += 1
            st["accepted"] += acc
            st["full"] += 1

        def grads(tj=tj, xj=xj, yj=yj):
            for _ in range(n_steps):
                jax.block_until_ready(vg_jit(tj, xj, yj))

        step()      # compile
        fns[f"step/{n}"], fns[f"grad/{n}"] = step, grads
    return fns, info, stats


def setup_rehmc(args):
    """Replica exchange on D500: RE step (API), RE step under a caller BLAS cap, and (with one
    worker) 16 sequential single-replica HMC steps."""
    import numpy as np

    from thermonet.architectures.mlp import M3
    from thermonet.data import load_dataset
    from thermonet.kernels import threads
    from thermonet.priors import BoxPrior
    from thermonet.samplers.hmc import HMC
    from thermonet.tempering import Ladder, ReplicaExchange, make_scheme

    arch = M3()
    prior = BoxPrior.for_architecture(arch)
    data = load_dataset(RE_DATA)
    pot = arch.potential(data)
    k = RE_REPLICAS
    rex = ReplicaExchange(HMC, pot, Ladder.geometric(1e-2, 1e2, k), prior=prior,
                          n_trajectories=args.re_traj,
                          sampler_config=HMC.Config(n_leapfrog=args.re_L, step_size=DT),
                          swap=make_scheme("random-pairs"), workers=args.re_workers)
    rng = np.random.default_rng(3)
    theta_kp = np.stack([arch.initial_draw(rng) for _ in range(k)])
    box = {"state": rex.init(theta_kp)}
    streams = rex.make_streams(2024)
    stats = {}

    def make(key, capped):
        st = stats[key] = {"n": 0, "accepted": 0, "full": 0, "divergent": 0}

        def f():
            if capped:
                with threads.blas_single():
                    box["state"], inf = rex.step(box["state"], streams)
            else:
                box["state"], inf = rex.step(box["state"], streams)
            st["n"] += k * args.re_traj
            st["accepted"] += int(inf.n_accepted_k.sum())
            st["divergent"] += int(inf.n_divergent_k.sum())
            st["full"] += k * args.re_traj - int(inf.n_divergent_k.sum())
        return f

    fns = {"re": make("re", False), "re_capped": make("re_capped", True)}
    seq_states = list(rex.init(theta_kp).slots)
    seq_rngs = rex.make_streams(77, k)
    st = stats["seq"] = {"n": 0, "accepted": 0, "full": 0, "divergent": 0}

    def seq():
        for j, sampler in enumerate(rex.samplers):
            for _ in range(args.re_traj):
                seq_states[j], inf = sampler.step(seq_states[j], seq_rngs[j])
                st["n"] += 1
                st["accepted"] += inf.is_accepted
                st["full"] += inf.n_steps == sampler.config.n_leapfrog
                st["divergent"] += inf.is_divergent

    if args.re_workers == 1:
        fns["seq"] = seq
    else:
        fns["pairs"] = paired(stats, "pairs", (("seq", seq), ("re_capped", fns["re_capped"]),
                                               ("re", fns["re"])))
    info = {"replicas": k, "n_trajectories": args.re_traj, "L": args.re_L,
            "workers": args.re_workers, "data": RE_DATA,
            "consistent": kernel_consistency(pot, prior.half_width)}
    return fns, info, stats


SETUPS = {"thermonet": setup_thermonet, "torch": setup_torch, "jax": setup_jax,
          "rehmc": setup_rehmc}


def serve(args) -> int:
    """Worker main loop: set up, then answer one JSON command per stdin line."""
    fns, info, stats = SETUPS[args.worker](args)
    keep = info.pop("_keep", None)  # noqa: F841  (the BLAS thread cap lives as long as this)
    counts: dict[str, tuple[int, int]] = {}
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
            f()                                   # first call: compile / warm caches
            n, per_call = calibrate(f, cmd["min_time"])
            counts[key] = (n, 2 if per_call < 0.05 else 0)
        n, warm = counts[key]
        res = timed_loop(f, n, warm)
        res["stats"] = dict(stats.get(key, {}))
        out.write(json.dumps(res) + "\n")
        out.flush()
    return 0


class Worker:
    """A persistent worker subprocess."""

    def __init__(self, label: str, kind: str, args, threads: int, extra=(), env=None):
        self.label, self.kind, self.threads = label, kind, threads
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", kind,
               "--threads", str(threads), "--sizes", ",".join(str(s) for s in args.sizes),
               "--L", str(args.L), "--re-L", str(args.re_L), "--re-traj", str(args.re_traj)]
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
            self.p.wait(timeout=60)
        except Exception:
            self.p.kill()


def worker_bound(args) -> dict:
    """Single-replica HMC on D500 pinned to CPU ``args.cpu``, started at ``args.start``: run
    alone and as two simultaneous processes, it gives the 2-core scaling the machine allows
    for independent replicas (no threads, no shared memory)."""
    import numpy as np

    keep = limit_blas(1)  # noqa: F841
    from thermonet.architectures.mlp import M3
    from thermonet.data import load_dataset
    from thermonet.priors import BoxPrior
    from thermonet.samplers.hmc import HMC

    arch = M3()
    pot = arch.potential(load_dataset(RE_DATA))
    hmc = HMC(pot, prior=BoxPrior.for_architecture(arch), n_leapfrog=args.re_L, step_size=DT)
    rng = np.random.default_rng(args.cpu)
    st, _ = hmc.step(hmc.init(arch.initial_draw(rng)), rng)
    while time.time() < args.start:
        time.sleep(0.001)
    n = 24
    t0 = time.perf_counter()
    for _ in range(n):
        st, _ = hmc.step(st, rng)
    return {"rate": n / (time.perf_counter() - t0), "cpu": args.cpu}


def run_bound(args, env, reps: int = 3) -> dict | None:
    """Independent single-replica processes: alone on CPU 0, then two at once on CPUs 0 and 1."""
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except AttributeError:
        return None
    if len(cpus) < 2:
        return None
    e = dict(os.environ)
    e.update(env or {})

    def launch(cpu: int, start: float) -> subprocess.Popen:
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", "bound", "--threads",
               "2", "--cpu", str(cpu), "--start", repr(start), "--re-L", str(args.re_L)]
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                text=True, env=e)

    def result(p: subprocess.Popen) -> float | None:
        out, _ = p.communicate(timeout=600)
        for line in out.splitlines()[::-1]:
            if line.startswith("RESULT:"):
                return json.loads(line[len("RESULT:"):])["rate"]
        return None

    alone, pair = [], []
    for _ in range(reps):
        start = time.time() + 8.0
        r = result(launch(cpus[0], start))
        start = time.time() + 8.0
        ps = [launch(c, start) for c in cpus[:2]]
        rs = [result(p) for p in ps]
        if r is None or None in rs:
            return None
        alone.append(r)
        pair.append(sum(rs))
    ratios = [b / a for a, b in zip(alone, pair, strict=True)]
    return {"alone": alone, "pair": pair, "ratios": ratios,
            "median": statistics.median(ratios)}


# --------------------------------------------------------------------------------------------
# memory: one RE-HMC run through thermonet.runner


def _status() -> dict:
    out = {}
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(("VmRSS:", "VmHWM:")):
                    name, val = line.split(":", 1)
                    out[name] = int(val.split()[0]) * 1024
    except OSError:
        pass
    return out


def _reset_hwm() -> bool:
    """Reset VmHWM to the current RSS (Linux: write 5 to /proc/self/clear_refs)."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


MEM_TOML = """\
# bench_hmc.py memory probe: Figs. 2-3 ladder (N_T = {n_t} on [1e-2, 1e2]) on {data}, but
# no minimisation, a 1-trajectory burn-in, L = {L}, one trajectory per iteration.
[run]
seed = 2019
n_iterations = {iters}
checkpoint_every = {ckpt}
sample_every = {sample}
adapt_every = {adapt}
workers = 2

[data]
name = "{data}"
test = "auto"

[architecture]
name = "M3"

[init]
minimise = false
burn_in = [1]

[sampler]
name = "rehmc"
n_temperatures = {n_t}
t_min = 1e-2
t_max = 1e2
n_trajectories = 1
swap_scheme = "random-pairs"

[sampler.inner]
n_leapfrog = {L}
adapt_trajectories = 1
adapt_max_rounds = 2
"""


def worker_memory(args) -> dict:
    """Run RE-HMC through thermonet.runner and return its RSS per iteration, peaks and estimates."""
    import resource

    import numpy as np

    st_start = _status()
    import h5py  # noqa: F401  (the runner writes HDF5; load it before the baseline)

    from thermonet import config as cfgmod
    from thermonet.architectures.mlp import M3
    from thermonet.kernels import mlp as km
    from thermonet.priors import BoxPrior
    from thermonet.runner import Run, detach_log
    from thermonet.samplers.hmc import HMC

    # warm up every kernel a run uses (loaded from the Numba cache) before the baseline, in a
    # helper thread: with this OpenBLAS, once the MAIN thread has set the BLAS thread count
    # (thermonet's blas_single does), the caps set later by the runner's worker threads have no
    # effect and Run.create's initialisation runs ~2.5x slower (see docs/performance.md)
    arch = M3()

    def warm_up() -> None:
        x, y, theta = make_data(64)
        pot = arch.potential(x=x, y=y)
        hmc = HMC(pot, prior=BoxPrior.for_architecture(arch), n_leapfrog=2, step_size=DT)
        s = hmc.init(theta)
        hmc.step(s, np.random.default_rng(0))
        pot.energy(theta)

    import threading

    th = threading.Thread(target=warm_up)
    th.start()
    th.join()
    base = _status()
    hwm_reset = _reset_hwm()

    iters, ckpt_every, sample_every = args.mem_iters, 4, 4
    workdir = tempfile.mkdtemp(prefix="thermonet-bench-mem-")
    try:
        cfg_path = os.path.join(workdir, "mem.toml")
        with open(cfg_path, "w") as fh:
            fh.write(MEM_TOML.format(n_t=MEM_REPLICAS, data=MEM_DATA, L=2, iters=iters,
                                     ckpt=ckpt_every, sample=sample_every, adapt=8))
        cfg = cfgmod.load(cfg_path)
        t0 = time.perf_counter()
        run = Run.create(cfg, os.path.join(workdir, "run"), quiet=True)
        t_create = time.perf_counter() - t0
        after_create = _status()
        per_iter: list[tuple[int, int]] = []

        def record(report) -> None:
            """Progress callback: the RSS after every iteration."""
            per_iter.append((int(report.iteration), _status().get("VmRSS", 0)))

        t0 = time.perf_counter()
        run.run(record)
        t_run = time.perf_counter() - t0
        end = _status()
        ru_maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

        # what the run holds, from the objects themselves
        rex = run.c.engine
        k = rex.n_slots
        d = rex.potential.n_params
        seen: set[int] = set()

        def nbytes(*arrays) -> int:
            tot = 0
            for a in arrays:
                if a is None:
                    continue
                a = np.asarray(a)
                key = a.__array_interface__["data"][0]
                if key not in seen:
                    seen.add(key)
                    tot += a.nbytes
            return tot

        split = run.c.split
        data_bytes = nbytes(split.train.x, split.train.y, split.test.x, split.test.y)
        train_bytes = split.train.x.nbytes + split.train.y.nbytes
        per_slot_walk = []
        for j, smp in enumerate(rex.samplers):
            pj = smp.potential
            per_slot_walk.append(nbytes(
                smp.inv_mass, getattr(smp, "momentum_scale", None), smp.masses, smp.half_width,
                *pj.scratch_arrays(), pj.x, pj.y, run.state.slots[j].theta,
                run.state.slots[j].grad))
        ws = int(km.work_size(arch.widths, rex.potential.block))
        # expected: state (theta, grad) + sampler (inv_mass, p_scale) + potential (partial) = 5 d
        # float64 arrays, plus the potential's scratch of work_size entries, per replica
        per_slot_expected = 8 * (5 * d + ws)
        resident_expected = k * per_slot_expected
        # transients: at a checkpoint the stacked theta and grad (2 K d) plus the held samples
        # (checkpoint_every / sample_every of K d each) stacked once more for the segment;
        # per running worker, propose() holds p, theta and grad copies (3 d)
        n_samples = ckpt_every // sample_every if sample_every else 0
        transient_expected = 8 * (2 * k * d + 2 * n_samples * k * d + 3 * d * 2)
        test_kind = getattr(split, "test_kind", None)
        per_rss = [r for _, r in per_iter]
        its = [i for i, _ in per_iter]
        half = len(its) // 2
        slope = None
        if len(per_rss) - half >= 3:
            slope = float(np.polyfit(its[half:], per_rss[half:], 1)[0])
        ckpt_rss = [r for i, r in per_iter if i % ckpt_every == 0]
        detach_log()
        return {
            "n_slots": k, "n_params": d, "work_size": ws, "block": rex.potential.block,
            "iterations": iters, "checkpoint_every": ckpt_every, "sample_every": sample_every,
            "L": 2, "workers": 2, "data": MEM_DATA, "test_kind": test_kind,
            "n_train": int(split.train.x.shape[0]), "n_test": int(split.test.x.shape[0]),
            "rss_start": st_start.get("VmRSS"), "rss_base": base.get("VmRSS"),
            "hwm_base": base.get("VmHWM"), "hwm_reset": hwm_reset,
            "rss_after_create": after_create.get("VmRSS"),
            "hwm_after_create": after_create.get("VmHWM"),
            "rss_end": end.get("VmRSS"), "hwm_end": end.get("VmHWM"), "ru_maxrss": ru_maxrss,
            "per_iter": per_iter, "ckpt_rss": ckpt_rss, "slope_bytes_per_iter": slope,
            "data_bytes": data_bytes, "train_bytes": train_bytes,
            "per_slot_walk_mean": float(np.mean(per_slot_walk)),
            "per_slot_first": per_slot_walk[0], "resident_walk": int(sum(per_slot_walk)),
            "per_slot_expected": per_slot_expected, "resident_expected": resident_expected,
            "transient_expected": transient_expected,
            "t_create_s": t_create, "t_run_s": t_run,
        }
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def run_memory(args, env) -> dict | None:
    """Run :func:`worker_memory` in a subprocess and return its result, or None if it failed."""
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", "memory", "--threads", "2",
           "--mem-iters", str(args.mem_iters)]
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.run(cmd, capture_output=True, text=True, env=e, timeout=3600)
    for line in p.stdout.splitlines()[::-1]:
        if line.startswith("RESULT:"):
            return json.loads(line[len("RESULT:"):])
    tail = (p.stderr or p.stdout).strip().splitlines()[-3:]
    print(f"  [memory] failed: {' | '.join(tail)}", file=sys.stderr)
    return None


# --------------------------------------------------------------------------------------------
# driver


def mb(v):
    """``v`` bytes in MiB, or ``-`` for None."""
    return "-" if v is None else f"{v / 2**20:,.1f} MiB"


def main(argv=None) -> int:
    """Run a worker, or drive all workers and print (and optionally save) the tables."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer and shorter rounds")
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)))
    ap.add_argument("--rounds", type=int, default=None, help="timing rounds (default 5; 3 quick)")
    ap.add_argument("--stat", choices=("best", "median"), default="best",
                    help="statistic over rounds shown in the table")
    ap.add_argument("--L", type=int, default=L_STEPS, help="leapfrog steps per trajectory")
    ap.add_argument("--re-L", type=int, default=L_STEPS, help="L of the RE-HMC replicas")
    ap.add_argument("--re-traj", type=int, default=1, help="RE-HMC n_trajectories")
    ap.add_argument("--mem-iters", type=int, default=None,
                    help="iterations of the memory run (default 24)")
    ap.add_argument("--cache", choices=("fresh", "env"), default="fresh",
                    help="fresh: one new NUMBA_CACHE_DIR for this run (default); env: the "
                         "environment's cache")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--no-jax", action="store_true")
    ap.add_argument("--no-re", action="store_true", help="skip the replica-exchange timing")
    ap.add_argument("--no-memory", action="store_true", help="skip the memory run")
    ap.add_argument("--no-pin", dest="pin", action="store_false",
                    help="do not pin 1-thread runs to one CPU (sched_setaffinity)")
    ap.add_argument("--json", default=None, help="also write all results to this file")
    ap.add_argument("--threads", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--worker", choices=[*sorted(SETUPS), "memory", "bound"],
                    help=argparse.SUPPRESS)
    ap.add_argument("--re-workers", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--cpu", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--start", type=float, default=0.0, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    args.sizes = [int(s) for s in str(args.sizes).split(",") if s]
    if args.mem_iters is None:
        # enough iterations to see the RSS flat after the allocator's step-ups at the first
        # checkpoints (at 12 iterations the third checkpoint's step-up is still the last point)
        args.mem_iters = 24

    if args.worker:
        if args.pin and args.threads == 1 and hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
        if args.worker == "memory":
            print("RESULT:" + json.dumps(worker_memory(args)))
            return 0
        if args.worker == "bound":
            os.sched_setaffinity(0, {args.cpu})
            print("RESULT:" + json.dumps(worker_bound(args)))
            return 0
        return serve(args)

    rounds = args.rounds or (3 if args.quick else 5)
    min_time = 0.25 if args.quick else 0.5
    import importlib.util

    has = {m: importlib.util.find_spec(m) is not None for m in ("torch", "jax")}
    has["torch"] &= not args.no_torch
    has["jax"] &= not args.no_jax
    ver = versions()
    ncpu = os.cpu_count()
    try:
        naff = len(os.sched_getaffinity(0))
    except AttributeError:
        naff = ncpu
    cache_dir = None
    env_cache: dict[str, str] = {}
    if args.cache == "fresh":
        cache_dir = tempfile.mkdtemp(prefix="thermonet-bench-numba-")
        env_cache = {"NUMBA_CACHE_DIR": cache_dir}
    print("thermonet HMC / RE-HMC benchmark (M(3), float64)")
    print(f"machine : {cpu_model()}; {ncpu} logical CPUs ({naff} usable); {platform.system()} "
          f"{platform.release()}")
    print("versions: " + ", ".join(f"{k} {v}" for k, v in ver.items() if v is not None))
    print(f"HMC     : L = {args.L}, fixed dt = {DT:g} (trajectories are timed, acceptance does "
          f"not matter), T = {TEMPERATURE:g}, unit masses, M(3) box prior (c = 100); random "
          "x ~ N(0,1) (N, 256), labels 0..9")
    print(f"RE-HMC  : {RE_REPLICAS} replicas on {RE_DATA} (real data), ladder 1e-2..1e2, "
          f"n_trajectories = {args.re_traj}, L = {args.re_L}, dt = {DT:g} for every slot")
    print(f"threads : 1-thread runs {'pinned to one CPU' if args.pin else 'NOT pinned'}, BLAS "
          "capped at 1; RE-HMC workers=2 unpinned")
    print(f"timing  : {rounds} interleaved rounds of one >= {min_time:.2f} s loop per "
          f"configuration; table shows the {args.stat} round")
    print(f"numba   : {'fresh NUMBA_CACHE_DIR ' + cache_dir if cache_dir else 'environment cache'}")
    print(flush=True)

    results = {"machine": {"cpu": cpu_model(), "logical_cpus": ncpu, "usable_cpus": naff},
               "versions": ver, "sizes": args.sizes, "quick": args.quick, "rounds": rounds,
               "min_time": min_time, "stat": args.stat, "L": args.L, "dt": DT,
               "re": {"replicas": RE_REPLICAS, "L": args.re_L, "n_trajectories": args.re_traj,
                      "data": RE_DATA}}
    xla1 = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
    specs = [(("thermonet", 1), "thermonet", 1, [], dict(env_cache))]
    if has["torch"]:
        specs.append((("pytorch", 1), "torch", 1, [],
                      {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}))
    if has["jax"]:
        specs.append((("jax", 1), "jax", 1, [],
                      {"JAX_PLATFORMS": "cpu",
                       "XLA_FLAGS": (os.environ.get("XLA_FLAGS", "") + " " + xla1).strip()}))
    if not args.no_re:
        for w in (1, 2):
            specs.append((("rehmc", w), "rehmc", 1 if w == 1 else 2, ["--re-workers", str(w)],
                          dict(env_cache)))

    print(f"starting {len(specs)} worker processes (the first thermonet one compiles into the "
          "cache) ...", flush=True)
    workers = {}
    t_setup = time.perf_counter()
    for key, kind, t, extra, env in specs:
        w = Worker("/".join(map(str, key)), kind, args, t, extra, env)
        if w.wait_ready():      # one at a time: set-up and compilation do not overlap
            workers[key] = w
        else:
            print(f"  {w.label}: failed to start: {w.error}", file=sys.stderr)
    t_setup = time.perf_counter() - t_setup
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

    bound = None
    if not args.no_re:
        print("2-core bound: independent single-replica processes, alone and two at once ...",
              flush=True)
        bound = run_bound(args, env_cache, reps=2 if args.quick else 3)
        results["re_bound"] = bound
    mem = None
    if not args.no_memory:
        print(f"memory: RE-HMC run, N_T = {MEM_REPLICAS} on {MEM_DATA}, through "
              "thermonet.runner ...", flush=True)
        mem = run_memory(args, env_cache)
        results["memory"] = mem
    if cache_dir:
        shutil.rmtree(cache_dir, ignore_errors=True)

    def stat(lst):
        rates = [s["rate"] for s in lst]
        best = max(range(len(rates)), key=rates.__getitem__)
        med = statistics.median(rates)
        pick = lst[best] if args.stat == "best" else min(lst, key=lambda s: abs(s["rate"] - med))
        others = [s["other"] for s in lst if s["other"] is not None]
        return {"rate": pick["rate"], "best": rates[best], "median": med, "cpu": pick["cpu"],
                "other": pick["other"], "other_max": max(others) if others else None,
                "rates": rates, "stats": lst[-1].get("stats", {})}

    table = {k: {kk: stat(v) for kk, v in d.items()} for k, d in samples.items()}
    results["timings"] = {"/".join(map(str, k)): v for k, v in table.items()}
    results["worker_info"] = {"/".join(map(str, k)): w.info for k, w in workers.items()}
    busiest = 0.0

    # ---------------------------------------------------------------- HMC table
    print(f"\n(worker set-up {t_setup:.0f} s, timing rounds {t_rounds:.0f} s)\n")
    print(f"HMC trajectories per second, M(3), float64, 1 thread, L = {args.L}, dt = {DT:g}")
    hdr = (f"{'N':>5} {'implementation':<27} {'traj/s':>8} {'ms/traj':>9} {'xTorch':>7} "
           f"{'xJAX':>6} {'acc':>5} {'full':>5} {'cpu/wall':>8} {'other':>5}")
    print(hdr)
    print("-" * len(hdr))
    tn = table.get(("thermonet", 1), {})
    tt = table.get(("pytorch", 1), {})
    tj = table.get(("jax", 1), {})
    summary: dict = {}
    rows = [("thermonet step", tn, "step"), ("thermonet traj only", tn, "traj"),
            ("thermonet L x grad (Python)", tn, "grad"),
            ("thermonet L x grad kernel", tn, "kgrad"), ("pytorch step", tt, "step"),
            ("pytorch L x grad", tt, "grad"), ("jax step (jit+fori)", tj, "step"),
            ("jax L x grad", tj, "grad")]
    for n in args.sizes:
        ref_t = tt.get(f"step/{n}")
        ref_j = tj.get(f"step/{n}")
        for label, tab, kind in rows:
            m = tab.get(f"{kind}/{n}")
            if not m:
                continue
            rate = m["rate"]
            st = m.get("stats") or {}
            acc = st["accepted"] / st["n"] if st.get("n") and "accepted" in st else None
            full = st["full"] / st["n"] if st.get("n") and "full" in st else None
            xt = rate / ref_t["rate"] if (ref_t and kind == "step") else None
            xj = rate / ref_j["rate"] if (ref_j and kind == "step") else None
            print(f"{n:>5} {label:<27} {rate:>8.2f} {1e3 / rate:>9.2f} {fmt(xt, '7.2f')} "
                  f"{fmt(xj, '6.2f')} {fmt(acc, '5.2f')} {fmt(full, '5.2f')} "
                  f"{m['cpu']:>8.2f} {fmt(m.get('other'), '5.2f')}")
            busiest = max(busiest, m.get("other") or 0.0)
            summary[f"{label}/{n}"] = {"rate": rate, "x_torch": xt, "x_jax": xj, "acc": acc}
        print()
    print("traj/s: trajectories (for 'L x grad': blocks of L gradient calls) per second, best "
          "round; xTorch / xJAX: step against the PyTorch / JAX step at the same N, same run; "
          "acc: acceptance (it falls as the chain moves at a fixed dt); full: fraction of "
          "trajectories that ran all L steps.")
    med_ratios = {}
    for n in args.sizes:
        s_ = tn.get(f"step/{n}")
        parts = []
        for label, tab in (("PyTorch", tt), ("JAX", tj)):
            o = tab.get(f"step/{n}")
            if s_ and o:
                med_ratios[f"{label}/{n}"] = s_["median"] / o["median"]
                parts.append(f"{label} {s_['median'] / o['median']:.2f}x")
        if parts:
            print(f"  median-of-rounds step ratios at N = {n}: thermonet against " +
                  ", ".join(parts))
    results["median_ratios"] = med_ratios

    def med(v):
        return statistics.median(v) if v else None

    print("\noverhead of everything around the gradient (thermonet), step / (L x grad kernel) - "
          "1: the step, the trajectory alone and the L kernel gradients run back to back in "
          "every repetition; median over repetitions of the ratios of adjacent calls:")
    overhead = {}
    for n in args.sizes:
        o = tn.get(f"ovh/{n}")
        rec = (o or {}).get("stats") or {}
        if not rec.get("kgrad") or len(rec["kgrad"]) < 2:
            continue
        tot = med(paired_ratios(rec, "step", "kgrad")) - 1
        kern = med(paired_ratios(rec, "traj", "kgrad")) - 1
        py = tot - kern
        t_k = med(rec["kgrad"][1:])
        per_step_us = kern * t_k / args.L * 1e6
        py_us = py * t_k * 1e6
        api = med(paired_ratios(rec, "step", "grad")) - 1
        wrap_us = (med(paired_ratios(rec, "grad", "kgrad")) - 1) * t_k / args.L * 1e6
        n_rep = len(rec["kgrad"]) - 1
        overhead[str(n)] = {"total": tot, "in_trajectory": kern, "python_step": py,
                            "trajectory_us_per_leapfrog_step": per_step_us,
                            "python_us_per_trajectory": py_us, "vs_energy_and_grad": api,
                            "energy_and_grad_wrapper_us": wrap_us, "repetitions": n_rep,
                            "kgrad_ms": 1e3 * t_k}
        verdict = "(< 10%: MET)" if tot < 0.10 else "(>= 10%: NOT MET)"
        print(f"  N = {n:>5}: {100 * tot:6.1f}%  {verdict}  = compiled trajectory around the "
              f"gradients {100 * kern:5.1f}% ({per_step_us:5.1f} us per leapfrog step) + "
              f"Python in HMC.step {100 * py:5.1f}% ({py_us:5.0f} us per trajectory); "
              f"{n_rep} repetitions")
        print(f"               against L calls of energy_and_grad from Python instead: "
              f"{100 * api:6.1f}% (the Python wrapper costs {wrap_us:5.1f} us per call)")
    for n in args.sizes:
        for label, tab in (("pytorch", tt), ("jax", tj)):
            s_, g = tab.get(f"step/{n}"), tab.get(f"grad/{n}")
            if s_ and g:
                overhead[f"{label}/{n}"] = g["median"] / s_["median"] - 1
    if tt or tj:
        print("  for comparison, step / (L x grad) - 1 (medians of rounds; the L gradients "
              "called from Python) of PyTorch: " + ", ".join(
                  f"N={n} {100 * overhead[f'pytorch/{n}']:.1f}%" for n in args.sizes
                  if f"pytorch/{n}" in overhead) + "; JAX: " + ", ".join(
                  f"N={n} {100 * overhead[f'jax/{n}']:.1f}%" for n in args.sizes
                  if f"jax/{n}" in overhead))
    results["overhead"] = overhead
    results["summary"] = summary
    cons = {**{f"thermonet N={k}": v for k, v in
               workers[("thermonet", 1)].info.get("consistent", {}).items()}} \
        if ("thermonet", 1) in workers else {}
    for w in (1, 2):
        if ("rehmc", w) in workers:
            cons[f"rehmc workers={w}"] = workers[("rehmc", w)].info.get("consistent")
    if cons and not all(cons.values()):
        print("WARNING: potential.trajectory does not reproduce energy_and_grad bit for bit "
              f"({cons}): a stale Numba cache of thermonet.kernels.leapfrog.mlp_trajectory "
              "(compiled against an older gradient kernel). Clear the cache or use a fresh "
              "NUMBA_CACHE_DIR (the default of this script).")
    else:
        print("kernel consistency: trajectory step == energy_and_grad bit for bit in every "
              "thermonet worker")

    # ---------------------------------------------------------------- RE-HMC
    re_res = {}
    if ("rehmc", 1) in table or ("rehmc", 2) in table:
        k_traj = RE_REPLICAS * args.re_traj
        print(f"\nRE-HMC: {RE_REPLICAS} replicas x {args.re_traj} trajectory(ies) of L = "
              f"{args.re_L} per iteration, M(3) on {RE_DATA}, 2 cores")
        hdr = (f"{'configuration':<52} {'replica-traj/s':>14} {'median':>7} {'x seq':>6} "
               f"{'acc':>5} {'cpu/wall':>8} {'other':>5}")
        print(hdr)
        print("-" * len(hdr))
        seq = table.get(("rehmc", 1), {}).get("seq")
        seq_rate = seq["rate"] * k_traj if seq else None
        lines = [("16 sequential single-replica HMC.step (1 core)", ("rehmc", 1), "seq"),
                 ("RE step, workers=1 (1 core)", ("rehmc", 1), "re"),
                 ("RE step, workers=1, BLAS capped by caller", ("rehmc", 1), "re_capped"),
                 ("RE step, workers=2 (API call as documented)", ("rehmc", 2), "re"),
                 ("RE step, workers=2, BLAS capped by caller (runner)", ("rehmc", 2),
                  "re_capped")]
        for label, wk, key in lines:
            m = table.get(wk, {}).get(key)
            if not m:
                continue
            rate = m["rate"] * k_traj
            st = m.get("stats") or {}
            acc = st["accepted"] / st["n"] if st.get("n") else None
            x = rate / seq_rate if seq_rate else None
            print(f"{label:<52} {rate:>14.2f} {m['median'] * k_traj:>7.2f} {fmt(x, '6.2f')} "
                  f"{fmt(acc, '5.2f')} {m['cpu']:>8.2f} {fmt(m.get('other'), '5.2f')}")
            busiest = max(busiest, m.get("other") or 0.0)
            re_res[f"{wk[1]}/{key}"] = {"rate": rate, "median": m["median"] * k_traj,
                                        "x_seq": x, "other": m.get("other"), "cpu": m["cpu"]}
        print("replica-traj/s: best round (median: median round); x seq: against the 16 "
              "sequential runs of the workers=1 process, best rounds.")
        pr = (table.get(("rehmc", 2), {}).get("pairs") or {}).get("stats") or {}
        if pr.get("seq") and len(pr["seq"]) >= 2:
            x_cap = med(paired_ratios(pr, "seq", "re_capped"))
            x_api = med(paired_ratios(pr, "seq", "re"))
            n_rep = len(pr["seq"]) - 1
            re_res["paired"] = {"x_capped": x_cap, "x_api": x_api, "repetitions": n_rep,
                                "seq_s": med(pr["seq"][1:]),
                                "re_capped_s": med(pr["re_capped"][1:]),
                                "re_s": med(pr["re"][1:])}
            print(f"speed-up of workers=2 over 16 sequential single-replica runs (same process, "
                  f"back to back, median over {n_rep} repetitions):")
            print(f"  BLAS capped by the caller, as thermonet.runner: {x_cap:.2f}x  "
                  f"{'MET' if x_cap >= 1.8 else 'NOT MET'} (target >= 1.8x)")
            print(f"  ReplicaExchange.step called directly:           {x_api:.2f}x  "
                  f"{'MET' if x_api >= 1.8 else 'NOT MET'}")
        if bound:
            print(f"  machine bound: two independent single-replica processes (one per core) "
                  f"ran {', '.join(f'{r:.2f}x' for r in bound['ratios'])} the rate of one "
                  f"alone (median {bound['median']:.2f}x)")
        results["re_summary"] = re_res

    # ---------------------------------------------------------------- memory
    if mem:
        k, d = mem["n_slots"], mem["n_params"]
        print(f"\nmemory: RE-HMC through thermonet.runner, N_T = {k}, M(3) (d = {d:,}) on "
              f"{mem['data']} (N = {mem['n_train']:,} train, {mem['n_test']:,} "
              f"{mem['test_kind']} test), workers = 2, L = {mem['L']}, {mem['iterations']} "
              f"iterations, checkpoint every {mem['checkpoint_every']}, sample every "
              f"{mem['sample_every']}  (create {mem['t_create_s']:.0f} s, run "
              f"{mem['t_run_s']:.0f} s)")
        base = mem["rss_base"]
        peak = mem["hwm_end"] if mem["hwm_reset"] else None
        print(f"  RSS after imports + loaded kernels (baseline)  {mb(base)}")
        print(f"  RSS after Run.create (data, {k} replicas, init) {mb(mem['rss_after_create'])}"
              f"  (+{mb(mem['rss_after_create'] - base)})")
        print(f"  RSS at the end                                 {mb(mem['rss_end'])}"
              f"  (+{mb(mem['rss_end'] - base)})")
        if peak is not None:
            print(f"  peak RSS during create + run (VmHWM, reset at baseline) {mb(peak)}  "
                  f"(+{mb(peak - base)} over baseline)")
        print(f"  peak RSS of the whole process (ru_maxrss)      {mb(mem['ru_maxrss'])}")
        per_it = mem["per_iter"]
        print("  RSS after each iteration (MiB): " + " ".join(
            f"{i}:{r / 2**20:.1f}" for i, r in per_it))
        if mem["slope_bytes_per_iter"] is not None:
            print(f"  growth (least squares over the second half of the iterations): "
                  f"{mem['slope_bytes_per_iter'] / 1024:+.1f} KiB per iteration; RSS after "
                  f"checkpoints: " + ", ".join(f"{r / 2**20:.1f}" for r in mem["ckpt_rss"])
                  + " MiB")
        print(f"  expected resident: N_T x 8 B x (5 d + work {mem['work_size']:,}) = {k} x "
              f"{mem['per_slot_expected'] / 2**20:.3f} MiB = {mb(mem['resident_expected'])}"
              f" (walked from the objects: {mb(mem['resident_walk'])}, of which the first "
              f"replica {mem['per_slot_first'] / 2**20:.2f} MiB incl. shared arrays)")
        print(f"  data (train + test arrays)                     {mb(mem['data_bytes'])} "
              f"(train {mb(mem['train_bytes'])})")
        print(f"  transients (checkpoint stacks, held samples, per-worker copies) "
              f"{mb(mem['transient_expected'])}")
        exp = mem["resident_expected"] + mem["data_bytes"]
        print(f"  expected over baseline: resident + data = {mb(exp)}; + transients = "
              f"{mb(exp + mem['transient_expected'])}")
        if peak is not None:
            print(f"  measured peak over baseline / (resident + data + transients): "
                  f"{(peak - base) / (exp + mem['transient_expected']):.2f}")

    if busiest > 0.15:
        print(f"\nWARNING: other processes used up to {busiest:.2f} cores during reported "
              "loops; those numbers (especially RE-HMC workers=2) are pessimistic. Re-run when "
              "idle.")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=1, default=str)
    return 0


if __name__ == "__main__":
    from thermonet.kernels import configure

    configure()    # as the command line does: before any kernel is imported
    sys.exit(main())
