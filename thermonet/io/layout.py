"""The names of a run directory's files, whose they are, and the message for a run whose
initialisation never finished: what both :mod:`thermonet.io.checkpoint` and
:mod:`thermonet.io.rundir` need to know of a directory."""

from __future__ import annotations

import time
from pathlib import Path

from thermonet.io import trace
from thermonet.io.initialisation import INITIALISATION

CHECKPOINT = "checkpoint.h5"
CONFIG = "config.toml"
LOG = "thermonet.log"

#: the first line of every config.toml thermonet writes (``ResolvedConfig.to_toml``)
CONFIG_HEADER = "# Resolved thermonet configuration"


def config_owner(path: Path) -> str:
    """``none`` if ``path`` is missing, ``thermonet`` if thermonet wrote it, else ``foreign``."""
    if not path.exists():
        return "none"
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            first = fh.readline()
    except OSError:
        return "foreign"
    return "thermonet" if first.startswith(CONFIG_HEADER) else "foreign"


def trace_held(run_dir: Path) -> str:
    """``7 trace segments (iterations 1-20)``: what the trace of ``run_dir`` holds."""
    segments = trace.segment_files(run_dir)
    n = len(segments)
    return (f"{n} trace segment{'s' if n != 1 else ''} (iterations {segments[0][0]}-"
            f"{segments[-1][1]})")


def interrupted_initialisation(run_dir: Path) -> str | None:
    """The message for a run directory whose initialisation never finished (thermonet's
    ``config.toml`` and no checkpoint), else None."""
    run_dir = Path(run_dir)
    config = run_dir / CONFIG
    if (run_dir / CHECKPOINT).exists() or config_owner(config) != "thermonet":
        return None
    # a checkpoint is written as soon as the initialisation ends (iteration 0), before any
    # trace segment: segments without a checkpoint mean it went missing afterwards, and
    # --overwrite would discard the whole trace
    segments = trace.segment_files(run_dir)
    if segments:
        return (f"{run_dir} has no {CHECKPOINT} but holds {trace_held(run_dir)}: its "
                "checkpoint was deleted or lost after the run had started; expected "
                f"{run_dir / CHECKPOINT}; restore it (from a backup) and `thermonet "
                f"resume {run_dir}`; nothing was changed, and the trace is kept (start a new "
                "run with another --out)")
    if (run_dir / INITIALISATION).exists():
        return (f"{run_dir} was interrupted during initialisation (no checkpoint yet; the "
                f"replicas it finished are kept in {INITIALISATION}); continue it with "
                f"`thermonet resume {run_dir}`")
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(config.stat().st_mtime))
    return (f"{run_dir} was interrupted during initialisation (no checkpoint yet; it started "
            f"at {started} and only the initialisation since then is lost); start it again "
            f"with `thermonet run {config} --out {run_dir} --overwrite`")


__all__ = ["CHECKPOINT", "CONFIG", "CONFIG_HEADER", "LOG", "config_owner",
           "interrupted_initialisation", "trace_held"]
