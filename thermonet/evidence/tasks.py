"""The tasks of an evidence calculation: their seeds, stored results and agreement, and how
they are run (threads, and the ranks of an MPI job)."""

from __future__ import annotations

import json
import math
import time
import zlib
from collections.abc import Callable
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from thermonet.errors import ConfigError, DataError
from thermonet.evidence._result import EvidenceResult
from thermonet.parallel import World, mark_collective


def read_json(path: Path) -> Any:
    """The JSON object stored at ``path``; a one-line :class:`DataError` naming the file and
    the way to recover when it is unreadable or not a JSON object."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        what = err.strerror if isinstance(err, OSError) else f"not valid JSON: {err}"
        raise DataError(f"{path} is corrupt ({what}); expected the JSON result thermonet "
                        "wrote: delete it and run the same command again, which recomputes "
                        "only that task") from None
    if not isinstance(doc, dict):
        raise DataError(f"{path} holds a JSON {type(doc).__name__}, not an object; expected "
                        "the result thermonet wrote: delete it and run the same command again")
    return doc


def task_seed(seed: int, model: str, minimum: int, label: str) -> int:
    """The seed of one task: a function of its identity only (never of the schedule)."""
    ss = np.random.SeedSequence([seed, zlib.crc32(model.encode()), minimum,
                                 zlib.crc32(label.encode())])
    return int(ss.generate_state(1, dtype=np.uint32)[0])


def result_from_dict(d: dict[str, Any]) -> EvidenceResult:
    """Rebuild an :class:`EvidenceResult` from ``as_dict()`` output."""
    return EvidenceResult(method=d["method"], temperature=float(d["temperature"]),
                          n_params=int(d["n_params"]), energy0=float(d["energy0"]),
                          log_integral=float(d["log_integral"]),
                          log_integral_error=float(d["log_integral_error"]),
                          log_volume=float(d["log_volume"]), details=d.get("details", {}))


def agreement(base: float, base_err: float, value: float, value_err: float,
              tolerance: float) -> dict[str, Any]:
    """The convergence criterion: ``|value - base| < tolerance * sqrt(base_err² + value_err²)``.

    A non-finite estimate or error never agrees. Returns the difference, the allowed bound and
    whether it passed.
    """
    delta = value - base
    allowed = tolerance * math.sqrt(base_err**2 + value_err**2)
    ok = all(math.isfinite(x) for x in (base, base_err, value, value_err)) and \
        abs(delta) < allowed
    return {"delta": delta, "allowed": allowed, "passed": bool(ok)}


def convergence_entry(base: dict[str, Any], found: list[tuple[str, str, dict[str, Any]]],
                      tolerance: float) -> dict[str, Any]:
    """One minimum's convergence report for its summary row: each variant's TI result
    (``(label, description, result)`` in ``found``) against the baseline run ``base``."""
    variants = []
    for v, desc, d in found:
        a = agreement(base["log_integral"], base["log_integral_error"], d["log_integral"],
                      d["log_integral_error"], tolerance)
        variants.append({"variant": v, "description": desc, "seed": d["seed"],
                         "log_integral": d["log_integral"],
                         "log_integral_error": d["log_integral_error"], **a})
    return {"convergence": {"baseline": {"log_integral": base["log_integral"],
                                         "log_integral_error": base["log_integral_error"]},
                            "variants": variants},
            "converged": all(v["passed"] for v in variants),
            "failed": [v["variant"] for v in variants if not v["passed"]]}


def run_jobs(jobs: list[Callable[[], None]], workers: int, *,
             on_interrupt: Callable[[], None] | None = None) -> None:
    """Run ``jobs`` on ``workers`` threads; on an error, let the running ones finish (so their
    results are stored), then raise it. On Ctrl-C, call ``on_interrupt``, cancel the jobs not
    yet started, wait for the running ones and re-raise."""
    if not jobs:
        return
    if workers == 1:
        for job in jobs:
            job()
        return
    with ThreadPoolExecutor(max_workers=workers) as ex:
        futures = [ex.submit(job) for job in jobs]
        try:
            _done, pending = wait(futures, return_when=FIRST_EXCEPTION)
        except KeyboardInterrupt:
            if on_interrupt is not None:
                on_interrupt()
            for f in futures:
                f.cancel()
            wait(futures)
            raise
        for f in pending:
            f.cancel()
        wait(futures)
        for f in futures:
            if f.done() and not f.cancelled() and f.exception() is not None:
                raise f.exception()  # type: ignore[misc]


def share_tasks(world: World, fn: Callable[[Any], Any], items: list[Any],
                pool: Callable[[list[Callable[[], None]]], None]) -> list[Any]:
    """``[fn(x) for x in items]`` on every rank of ``world``, each rank computing its
    contiguous block of them with ``pool`` (its threads: :func:`run_jobs`)."""
    def run_block(part: list[Any]) -> list[Any]:
        out: list[Any] = [None] * len(part)

        def job(i: int) -> None:
            out[i] = fn(part[i])

        pool([partial(job, i) for i in range(len(part))])
        return out

    return world.share(run_block, items)


def check_shared(world: World, path: Path) -> None:
    """Refuse, on every rank alike, a directory that rank 0 wrote ``path`` in but some rank
    cannot see (each task writes its own files there, on whichever rank runs it)."""
    seen = world.share(lambda part: [path.is_file()] * len(part), range(world.size))
    if not all(seen):
        raise mark_collective(ConfigError(
            f"MPI ranks {[r for r, ok in enumerate(seen) if not ok]} do not see {path}, which "
            "rank 0 wrote; expected a directory on a file system shared by every rank: choose "
            "an --out there"))


def lambda_progress(what: str, stop: Any, say: Callable[[str], None], log: Any,
                    interval: float) -> Callable[..., None]:
    """The TI engine's per-λ callback of the run ``what``: a line (``say``) per λ point, at
    most one every ``interval`` seconds (all of them in ``log`` at debug level); a KeyboardInterrupt
    once ``stop`` is set (the run then ends after its checkpointed λ point)."""
    state = {"last": 0.0}

    def progress(j: int, n_points: int, info: dict[str, Any]) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        now = time.monotonic()
        line = (f"    {what}: λ point {j + 1}/{n_points} "
                f"(λ = {info.get('lambda', math.nan):.4f})"
                f"  <dJ/dλ> = {info.get('mean', math.nan):.6g}"
                f" ± {info.get('sem', math.nan):.2g}"
                f"  acc {info.get('acceptance', math.nan):.2f}"
                f"  dt {info.get('step_size', math.nan):.3g}")
        if now - state["last"] < interval and j + 1 < n_points:
            log.debug(line)
            return
        state["last"] = now
        say(line)

    return progress
