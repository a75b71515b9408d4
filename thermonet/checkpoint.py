"""Run directories: the HDF5 checkpoint and the append-only trace.

A run directory holds::

    config.toml          the resolved configuration (every default explicit, with origins)
    checkpoint.h5        everything needed to continue exactly; replaced atomically
    trace/               per-iteration records, one immutable HDF5 segment per checkpoint
        it000000001-000000010.h5
        ...
    thermonet.log        the log

Crash safety
------------
HDF5 files are not crash-safe while open for writing, so nothing is ever written in place:

* a trace segment (the iterations since the previous checkpoint) is written to a temporary file
  and renamed into ``trace/``;
* then the checkpoint is written to ``checkpoint.h5.tmp`` and renamed over ``checkpoint.h5``.

A kill at any moment leaves the previous checkpoint and every segment up to it intact. The
checkpoint's ``iteration`` is the commit point: on resume, segments beyond it (written just
before a crash) and temporary files are removed, and the run regenerates those iterations
identically from the saved random-generator states.

See docs/formats.md for every dataset.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from thermonet import __version__
from thermonet.errors import CheckpointError, CheckpointFormatError
from thermonet.io.atomic import write_h5
from thermonet.io.jsonable import utc_now

CHECKPOINT_FORMAT = "thermonet.checkpoint"
TRACE_FORMAT = "thermonet.trace"
FORMAT_VERSION = 1
CHECKPOINT = "checkpoint.h5"
TRACE_DIR = "trace"
CONFIG = "config.toml"
LOG = "thermonet.log"
_SEGMENT = re.compile(r"^it(\d{9})-(\d{9})\.h5$")


def _now() -> str:
    return utc_now()


#: kept for modules not yet moved to :mod:`thermonet.io.atomic`
_atomic_h5 = write_h5


@dataclass
class Checkpoint:
    """Contents of ``checkpoint.h5``.

    Attributes
    ----------
    iteration : int
        Completed iterations (the commit point).
    run_uuid : str
    config_toml : str
        The resolved configuration.
    config_sources : dict
    plugins : dict
        role -> {name, value, distribution, version} of every plugin the run used.
    rng_states : list of dict
        ``bit_generator.state`` of every random stream.
    slots : dict of str -> ndarray
        One array per field of the inner sampler's state, stacked over slots (leading axis K).
    replica_k : ndarray of int64, shape (K,)
    temperatures : ndarray of float64, shape (K,)
    counters : dict
        JSON-serialisable cumulative counters (elapsed seconds, ...).
    thermonet_version : str
    blas_backend : str
        As read: the kernels' BLAS backend (:mod:`thermonet.kernels.blas`) of the process
        that wrote the checkpoint ("" for checkpoints from before it was recorded). Writing
        always records the writing process's backend.
    """

    iteration: int
    run_uuid: str
    config_toml: str
    config_sources: dict[str, str]
    plugins: dict[str, Any]
    rng_states: list[dict[str, Any]]
    slots: dict[str, np.ndarray]
    replica_k: np.ndarray
    temperatures: np.ndarray
    counters: dict[str, Any]
    thermonet_version: str = __version__
    created_utc: str = ""
    blas_backend: str = ""


def _blas_backend() -> str:
    from thermonet.kernels import blas

    return blas.BACKEND


def write_checkpoint(run_dir: Path, ck: Checkpoint) -> Path:
    """Atomically replace ``run_dir/checkpoint.h5`` with ``ck``."""
    path = Path(run_dir) / CHECKPOINT

    def write(fh: Any) -> None:
        fh.attrs["format"] = CHECKPOINT_FORMAT
        fh.attrs["format_version"] = FORMAT_VERSION
        fh.attrs["thermonet_version"] = __version__
        fh.attrs["blas_backend"] = _blas_backend()
        fh.attrs["run_uuid"] = ck.run_uuid
        fh.attrs["iteration"] = np.int64(ck.iteration)
        fh.attrs["config_toml"] = ck.config_toml
        fh.attrs["config_sources"] = json.dumps(ck.config_sources, sort_keys=True)
        fh.attrs["plugins"] = json.dumps(ck.plugins, sort_keys=True)
        # PCG64 states hold 128-bit integers: JSON strings round-trip exactly
        fh.attrs["rng"] = json.dumps(ck.rng_states)
        fh.attrs["counters"] = json.dumps(ck.counters, sort_keys=True)
        fh.attrs["created_utc"] = ck.created_utc or _now()
        fh.attrs["updated_utc"] = _now()
        g = fh.create_group("state")
        for name, arr in ck.slots.items():
            d = g.create_dataset(name, data=arr)
            d.attrs["axes"] = "slot" + (",param" if np.ndim(arr) == 2 else "")
        lad = fh.create_group("ladder")
        lad.create_dataset("temperature_k", data=ck.temperatures).attrs["axes"] = "slot"
        lad.create_dataset("replica_k", data=ck.replica_k).attrs["axes"] = "slot"

    _atomic_h5(path, write)
    return path


def read_checkpoint(path: str | Path) -> Checkpoint:
    """Read a checkpoint with one-line errors for missing, corrupt or foreign files."""
    import h5py

    path = Path(path)
    if path.is_dir():
        path = path / CHECKPOINT
    if not path.is_file():
        raise CheckpointError(f"no checkpoint at {path}; is this a thermonet run directory "
                              "(made by `thermonet run`)?")
    try:
        fh = h5py.File(path, "r")
    except OSError as err:
        raise CheckpointFormatError(f"{path} is not a readable HDF5 file ({err}); it may be "
                                    "truncated or corrupt") from None
    with fh:
        fmt = fh.attrs.get("format")
        if fmt != CHECKPOINT_FORMAT:
            raise CheckpointFormatError(f"{path} is not a thermonet checkpoint (format "
                                        f"{fmt!r}; expected {CHECKPOINT_FORMAT!r})")
        version = int(fh.attrs.get("format_version", -1))
        if version != FORMAT_VERSION:
            raise CheckpointFormatError(
                f"{path} has checkpoint format version {version}; this thermonet "
                f"({__version__}) reads version {FORMAT_VERSION}")
        try:
            return Checkpoint(
                iteration=int(fh.attrs["iteration"]),
                run_uuid=str(fh.attrs["run_uuid"]),
                config_toml=str(fh.attrs["config_toml"]),
                config_sources=json.loads(fh.attrs["config_sources"]),
                plugins=json.loads(fh.attrs["plugins"]),
                rng_states=json.loads(fh.attrs["rng"]),
                slots={k: fh["state"][k][()] for k in fh["state"]},
                replica_k=fh["ladder/replica_k"][()],
                temperatures=fh["ladder/temperature_k"][()],
                counters=json.loads(fh.attrs["counters"]),
                thermonet_version=str(fh.attrs["thermonet_version"]),
                created_utc=str(fh.attrs.get("created_utc", "")),
                blas_backend=str(fh.attrs.get("blas_backend", "")),
            )
        except (KeyError, ValueError, OSError) as err:
            raise CheckpointFormatError(f"{path} is incomplete or corrupt ({err}); expected a "
                                        "thermonet checkpoint") from None


# --- trace ------------------------------------------------------------------------------------

def segment_name(first: int, last: int) -> str:
    return f"it{first:09d}-{last:09d}.h5"


def list_segments(run_dir: Path) -> list[tuple[int, int, Path]]:
    """Trace segments as (first iteration, last iteration, path), in order."""
    tdir = Path(run_dir) / TRACE_DIR
    if not tdir.is_dir():
        return []
    out = []
    for p in tdir.iterdir():
        m = _SEGMENT.match(p.name)
        if m:
            out.append((int(m.group(1)), int(m.group(2)), p))
    return sorted(out)


def write_segment(run_dir: Path, run_uuid: str, rows: dict[str, list[Any]],
                  samples: list[tuple[int, np.ndarray]]) -> Path | None:
    """Write the records of the iterations since the last checkpoint as one segment."""
    if not rows.get("iteration"):
        return None
    its = rows["iteration"]
    tdir = Path(run_dir) / TRACE_DIR
    tdir.mkdir(exist_ok=True)
    path = tdir / segment_name(its[0], its[-1])

    def write(fh: Any) -> None:
        fh.attrs["format"] = TRACE_FORMAT
        fh.attrs["format_version"] = FORMAT_VERSION
        fh.attrs["run_uuid"] = run_uuid
        for name, values in rows.items():
            arr = np.asarray(values)
            d = fh.create_dataset(name, data=arr)
            d.attrs["axes"] = "iteration" + ("" if arr.ndim == 1 else
                                             (",pair" if name.startswith("swap") else ",slot"))
        if samples:
            g = fh.create_group("samples")
            g.create_dataset("iteration", data=np.array([s[0] for s in samples], np.int64))
            d = g.create_dataset("theta", data=np.stack([s[1] for s in samples]))
            d.attrs["axes"] = "sample,slot,param"

    _atomic_h5(path, write)
    return path


def trim(run_dir: Path, iteration: int) -> list[Path]:
    """Remove trace segments beyond ``iteration`` and leftover temporary files."""
    removed = []
    for _first, last, path in list_segments(run_dir):
        if last > iteration:
            path.unlink()
            removed.append(path)
    for d in (Path(run_dir), Path(run_dir) / TRACE_DIR):
        if d.is_dir():
            for p in d.glob("*.tmp"):
                p.unlink()
                removed.append(p)
    return removed


def read_trace(run_dir: str | Path, *, samples: bool = False,
               run_uuid: str | None = None) -> dict[str, np.ndarray]:
    """Concatenate the trace segments of a run.

    Returns a dict of arrays with a leading iteration axis (``iteration``, ``energy_k``,
    ``n_accepted_k``, ``swap_accepted_k``, ...); with ``samples=True`` also
    ``samples_iteration`` and ``samples_theta`` (sample, slot, param).
    """
    import h5py

    parts: dict[str, list[np.ndarray]] = {}
    s_it: list[np.ndarray] = []
    s_th: list[np.ndarray] = []
    for _, _, path in list_segments(Path(run_dir)):
        try:
            fh = h5py.File(path, "r")
        except OSError as err:
            raise CheckpointFormatError(f"trace segment {path} is unreadable ({err})") from None
        with fh:
            if fh.attrs.get("format") != TRACE_FORMAT:
                raise CheckpointFormatError(f"{path} is not a thermonet trace segment")
            if run_uuid is not None and fh.attrs.get("run_uuid") != run_uuid:
                raise CheckpointFormatError(
                    f"{path} belongs to another run (run_uuid {fh.attrs.get('run_uuid')}; "
                    f"expected {run_uuid})")
            for name, ds in fh.items():
                if name != "samples":
                    parts.setdefault(name, []).append(ds[()])
            if samples and "samples" in fh:
                s_it.append(fh["samples/iteration"][()])
                s_th.append(fh["samples/theta"][()])
    out = {k: np.concatenate(v) for k, v in parts.items()}
    if samples:
        out["samples_iteration"] = np.concatenate(s_it) if s_it else np.zeros(0, np.int64)
        out["samples_theta"] = np.concatenate(s_th) if s_th else np.zeros((0, 0, 0))
    return out
