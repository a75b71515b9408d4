"""What a run directory holds, and which of its files are thermonet's to replace or remove.

A run directory may sit among a user's files (``--out .``), so nothing here removes or replaces
a file unless thermonet wrote it: ``config.toml`` only if it starts with the header of the
resolved configuration, ``checkpoint.h5`` only if it is a thermonet checkpoint, trace segments
only if they carry the checkpoint's run id, and temporary files only with thermonet's own
suffix (:data:`thermonet.io.atomic.TEMP_SUFFIX`) or the unambiguous names of earlier releases.
Every check runs before anything is written, so a refused command changes nothing.
"""

from __future__ import annotations

import errno
import re
from dataclasses import dataclass
from pathlib import Path

from thermonet.errors import CheckpointError, ConfigError, ThermonetError
from thermonet.io import checkpoint as ckpt
from thermonet.io import trace
from thermonet.io.h5 import open_h5
from thermonet.io.initialisation import INITIALISATION
from thermonet.io.layout import (
    CONFIG_HEADER,
    config_owner,
    interrupted_initialisation,
    trace_held,
)

#: temporary files of releases that used the suffix ``.tmp``, removed only under these names
LEGACY_TEMP = ".tmp"


class StorageError(ThermonetError):
    """A run's file could not be written (disk full, file-size limit, I/O error)."""


@dataclass
class Contents:
    """What a run directory holds (of thermonet's files)."""

    checkpoint: bool           #: ``checkpoint.h5`` exists
    config: str                #: ``config.toml``: "none", "thermonet" or "foreign"
    segments: int              #: trace segments
    partial: bool = False      #: ``initialisation.h5`` exists (an unfinished initialisation)

    @property
    def empty(self) -> bool:
        """Nothing of a run."""
        return not (self.checkpoint or self.segments or self.partial) and self.config == "none"



def contents(run_dir: Path) -> Contents:
    """What ``run_dir`` holds."""
    run_dir = Path(run_dir)
    return Contents((run_dir / ckpt.CHECKPOINT).exists(), config_owner(run_dir / ckpt.CONFIG),
                    len(trace.segment_files(run_dir)), (run_dir / INITIALISATION).exists())


def check_new_run(run_dir: Path, *, overwrite: bool, n_iterations: int) -> None:
    """Refuse to start a run in ``run_dir`` if it holds one (unless ``overwrite``) or holds a
    file of the same name as a run's that thermonet did not write (always)."""
    run_dir = Path(run_dir)
    have = contents(run_dir)
    config = run_dir / ckpt.CONFIG
    if have.config == "foreign":
        raise ConfigError(f"--out {run_dir}: {config} is not a configuration thermonet wrote "
                          f"(its first line is not {CONFIG_HEADER!r}), and a run writes its "
                          "resolved configuration there; thermonet never overwrites your files: "
                          f"choose another --out, e.g. --out runs/{config.parent.resolve().name}")
    if have.checkpoint and overwrite:
        try:
            open_h5(run_dir / ckpt.CHECKPOINT, ckpt.CHECKPOINT_FORMAT,
                    what="thermonet checkpoint").close()
        except ThermonetError as err:
            raise ConfigError(f"--overwrite: {err}; thermonet deletes only its own files: move "
                              "it away or choose another --out") from None
    if overwrite or have.empty:
        return
    if have.checkpoint:
        try:
            done = ckpt.read_checkpoint(run_dir).iteration
            what = f"a run (iteration {done} of {n_iterations})"
        except ThermonetError:
            what = "a checkpoint"
        raise ConfigError(f"{run_dir} already holds {what}. Continue it with `thermonet "
                          f"resume {run_dir}`, pass --overwrite to discard it, or choose "
                          "another --out")
    if have.segments:
        raise ConfigError(f"{run_dir} holds an unfinished run ({trace_held(run_dir)} but no "
                          f"{ckpt.CHECKPOINT}: it was deleted or lost); expected an empty or "
                          f"new directory; restore {ckpt.CHECKPOINT} and `thermonet resume "
                          f"{run_dir}`, choose another --out, or pass --overwrite to discard "
                          "that trace and start again")
    held = ", ".join(([ckpt.CONFIG] if have.config == "thermonet" else [])
                     + ([INITIALISATION] if have.partial else []))
    go_on = f"continue it with `thermonet resume {run_dir}`, " if have.partial else ""
    raise ConfigError(f"{run_dir} holds an unfinished run ({held}, no checkpoint: it was "
                      "interrupted during initialisation); expected an empty or new directory; "
                      f"{go_on}pass --overwrite to start it again, or choose another --out")


def clear(run_dir: Path) -> None:
    """Remove a run's files from ``run_dir`` (after :func:`check_new_run` with overwrite)."""
    run_dir = Path(run_dir)
    for name in (ckpt.CHECKPOINT, ckpt.CONFIG, ckpt.LOG, INITIALISATION):
        (run_dir / name).unlink(missing_ok=True)
    trace.trim(run_dir, -1)
    remove_legacy_temps(run_dir)


def remove_legacy_temps(run_dir: Path) -> list[Path]:
    """Remove the temporary files earlier releases left when killed mid-write, by their exact
    names only (``checkpoint.h5.tmp``, ``trace/itF-L.h5.tmp``): any other ``*.tmp`` may be a
    user's."""
    run_dir = Path(run_dir)
    candidates = [run_dir / (ckpt.CHECKPOINT + LEGACY_TEMP)]
    tdir = run_dir / trace.TRACE_DIR
    if tdir.is_dir():
        pattern = re.compile(r"^it\d{9}-\d{9}\.h5" + re.escape(LEGACY_TEMP) + "$")
        candidates += [p for p in tdir.iterdir() if pattern.match(p.name)]
    removed = [p for p in candidates if p.is_file()]
    for p in removed:
        p.unlink()
    return removed


def foreign_segments(run_dir: Path, run_uuid: str) -> list[tuple[Path, str]]:
    """Trace segments of ``run_dir`` that do not carry ``run_uuid``, with the id they carry."""
    out = []
    for _first, _last, path in trace.segment_files(run_dir):
        try:
            with open_h5(path, trace.TRACE_FORMAT, what="thermonet trace segment") as fh:
                found = str(fh.attrs.get("run_uuid", ""))
        except ThermonetError:
            found = "unreadable"
        if found != run_uuid:
            out.append((path, found))
    return out


def check_segments(run_dir: Path, run_uuid: str) -> None:
    """Refuse to resume ``run_dir`` if any trace segment belongs to another run."""
    foreign = foreign_segments(run_dir, run_uuid)
    if not foreign:
        return
    (path, found), more = foreign[0], len(foreign) - 1
    also = f" (and {more} more)" if more else ""
    raise CheckpointError(f"cannot resume {run_dir}: {path}{also} belongs to another run (run id "
                          f"{found}; expected the checkpoint's {run_uuid}); move "
                          f"{'them' if more else 'it'} out of {path.parent} and resume again")





def _errno(err: OSError) -> int | None:
    if err.errno is not None:
        return err.errno
    # HDF5 reports the failed write(2) only in its message: "... errno = 28, error message ..."
    m = re.search(r"errno = (\d+)", str(err))
    return int(m.group(1)) if m else None


def write_error(err: OSError, path: Path, run_dir: Path, last: int | None) -> StorageError:
    """A one-line :class:`StorageError` for ``err`` while writing ``path`` of ``run_dir``, whose
    last good checkpoint is iteration ``last`` (None: no checkpoint yet)."""
    code = _errno(err)
    if code in (errno.ENOSPC, getattr(errno, "EDQUOT", -1)):
        what, fix = "disk full", "free space"
    elif code == errno.EFBIG:
        what, fix = "file-size limit (ulimit -f) reached", "raise the limit"
    else:
        what, fix = f"cannot write ({err.strerror or err})", "fix that"
    if last is None:
        return StorageError(f"{what} while writing {path}; no checkpoint was written, so only "
                            f"the initialisation is lost; {fix} and start again with "
                            f"`thermonet run {run_dir / ckpt.CONFIG} --out {run_dir} "
                            "--overwrite`")
    return StorageError(f"{what} while writing {path}; the last good checkpoint is iteration "
                        f"{last} and nothing before it is lost; {fix} and `thermonet resume "
                        f"{run_dir}`")


__all__ = ["CONFIG_HEADER", "Contents", "StorageError", "check_new_run", "check_segments",
           "clear", "config_owner", "contents", "foreign_segments", "interrupted_initialisation",
           "remove_legacy_temps", "write_error"]
