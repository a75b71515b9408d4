#!/usr/bin/env python
"""The cost of the checksums in checkpoint.h5 and the trace segments at the paper's D5000 size.

A checkpoint of M(3) on the Table 1 ladder: 112 slots x 13,970 parameters (``state/theta`` and
``state/grad``, 12.5 MB each), ``state/energy``, ``state/step_size``, the ladder and 113 random
generator states. A trace segment of 5 iterations with one sample (112 x 13,970). Each is
written and read with checksums (as thermonet does) and without (the digest functions replaced
by no-ops), in a temporary directory; the median of ``--repeat`` rounds is printed. With
``--trace``, also the check of a whole trace as ``thermonet resume`` and ``info`` do it, for the
layout of ``sample_runs/fig3_M3_D5000.toml`` (2000 iterations, a checkpoint every 5, a sample
every 50: 400 segments, 500 MB). Usage::

    python benchmarks/bench_integrity.py              # 15 rounds
    python benchmarks/bench_integrity.py --repeat 5 --trace
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from unittest import mock

import numpy as np
from harness import cpu_model, versions

K, P = 112, 13970


def checkpoint(rng: np.random.Generator):
    """A D5000-sized checkpoint: HMC state over the Table 1 ladder, 113 generator states."""
    from thermonet.io.checkpoint import Checkpoint

    streams = [dict(np.random.default_rng(i).bit_generator.state) for i in range(K + 1)]
    return Checkpoint(
        iteration=1000, run_uuid="bench", config_toml="[run]\nseed = 1\n" * 40,
        config_sources={}, plugins={}, rng_states=streams,
        slots={"theta": rng.normal(size=(K, P)), "energy": rng.normal(size=K),
               "grad": rng.normal(size=(K, P)), "step_size": np.full(K, 1e-3)},
        replica_k=np.arange(K), temperatures=np.geomspace(0.01, 100, K),
        counters={"elapsed_s": 1.0})


def segment_rows(rng: np.random.Generator, first: int, n: int):
    """The records of ``n`` iterations from ``first`` and one sample, as the runner keeps them."""
    its = list(range(first, first + n))
    rows = {"iteration": its, "energy_k": list(rng.normal(size=(n, K))),
            "n_accepted_k": [np.ones(K, np.int64)] * n,
            "n_divergent_k": [np.zeros(K, np.int64)] * n,
            "step_size_k": [np.full(K, 1e-3)] * n,
            "swap_attempted_k": [np.ones(K - 1, np.int64)] * n,
            "swap_accepted_k": [np.ones(K - 1, np.int64)] * n,
            "replica_k": [np.arange(K)] * n}
    return rows, [(its[-1], rng.normal(size=(K, P)))]


def plain_verify(fh, path, *, version, signed_from, recovery, select=None):
    """:func:`thermonet.io.digest.verify` without the checks: only the reads."""
    from thermonet.io.digest import dataset_paths

    return {p: fh[p][()] for p in dataset_paths(fh) if select is None or select(p)}, True


def measure(repeat: int, checked: bool) -> dict[str, float]:
    """Median seconds of a checkpoint's and a segment's write and read, with or without
    checksums."""
    from thermonet.io import checkpoint as ckpt
    from thermonet.io import digest, trace

    rng = np.random.default_rng(0)
    ck = checkpoint(rng)
    rows, samples = segment_rows(rng, 996, 5)
    times: dict[str, list[float]] = {"checkpoint write": [], "checkpoint read": [],
                                     "segment write": [], "segment read": []}
    patches = [] if checked else [mock.patch.object(digest, "sign", lambda fh: None),
                                  mock.patch.object(digest, "verify", plain_verify)]
    for p in patches:
        p.start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            d = Path(tmp)
            for _ in range(repeat):
                t0 = time.perf_counter()
                ckpt.write_checkpoint(d, ck)
                t1 = time.perf_counter()
                ckpt.read_checkpoint(d, check_trace=False)
                t2 = time.perf_counter()
                path = trace.write_segment(d, "bench", rows, samples)
                t3 = time.perf_counter()
                trace.read_segment(path, 996, 1000, run_uuid="bench", samples=True)
                t4 = time.perf_counter()
                for key, dt in zip(times, (t1 - t0, t2 - t1, t3 - t2, t4 - t3), strict=True):
                    times[key].append(dt)
    finally:
        for p in patches:
            p.stop()
    return {k: statistics.median(v) for k, v in times.items()}


def whole_trace(n_iterations: int = 2000, every: int = 5, sample_every: int = 50) -> None:
    """Time :func:`thermonet.io.trace.verify` on a run's whole trace (page cache warm)."""
    from thermonet.io import trace

    rng = np.random.default_rng(1)
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        for first in range(1, n_iterations + 1, every):
            rows, samples = segment_rows(rng, first, every)
            last = first + every - 1
            keep = [(i, s) for i in range(first, last + 1) if i % sample_every == 0
                    for s in (samples[0][1],)]
            trace.write_segment(d, "bench", rows, keep)
        for label in ("first", "second"):
            t0 = time.perf_counter()
            trace.verify(d, n_iterations, "bench")
            t1 = time.perf_counter()
            trace.read_trace(d, run_uuid="bench", through=n_iterations)
            t2 = time.perf_counter()
            print(f"whole trace ({label} pass): verify {t1 - t0:.2f} s, read_trace without "
                  f"samples {t2 - t1:.2f} s")


def main() -> None:
    """Print the table (and with ``--trace`` the whole-trace check)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--trace", action="store_true", help="also time a whole trace's check")
    args = parser.parse_args()
    print(f"# {cpu_model()}; {versions()}")
    print(f"# checkpoint {K} x {P}: theta + grad = {2 * K * P * 8 / 1e6:.1f} MB; segment of 5 "
          f"iterations + 1 sample = {K * P * 8 / 1e6:.1f} MB; median of {args.repeat}")
    on = measure(args.repeat, True)
    off = measure(args.repeat, False)
    print(f"{'':18} {'checked ms':>11} {'unchecked ms':>13} {'cost ms':>8} {'cost %':>7}")
    for key in on:
        cost = on[key] - off[key]
        print(f"{key:18} {on[key] * 1e3:11.1f} {off[key] * 1e3:13.1f} {cost * 1e3:8.1f} "
              f"{100 * cost / off[key]:7.0f}")
    if args.trace:
        whole_trace()


if __name__ == "__main__":
    main()
