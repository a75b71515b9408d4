"""A run's append-only trace: per-iteration records in immutable HDF5 segments.

``trace/itFFFFFFFFF-LLLLLLLLL.h5`` holds iterations F..L (the records since the previous
checkpoint), written atomically before the checkpoint that commits them. Each dataset has a
leading iteration axis; its ``axes`` attribute names the others (``slot``, ``pair``), as
declared by the engine's Info type. See docs/formats.md.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from thermonet.errors import CheckpointFormatError
from thermonet.io.atomic import TEMP_SUFFIX, write_h5
from thermonet.io.h5 import open_h5, write_header

TRACE_FORMAT = "thermonet.trace"
FORMAT_VERSION = 1
READABLE_VERSIONS = (1,)
TRACE_DIR = "trace"
_SEGMENT = re.compile(r"^it(\d{9})-(\d{9})\.h5$")


def segment_name(first: int, last: int) -> str:
    """File name of the segment holding iterations ``first``..``last``."""
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


def _axes(name: str, ndim: int, axes: Mapping[str, str] | None) -> str:
    if ndim == 1:
        return "iteration"
    if axes is not None and name in axes:
        return f"iteration,{axes[name]}"
    return "iteration," + ("pair" if name.startswith("swap") else "slot")


def write_segment(run_dir: Path, run_uuid: str, rows: dict[str, list[Any]],
                  samples: list[tuple[int, np.ndarray]],
                  axes: Mapping[str, str] | None = None) -> Path | None:
    """Write the records of the iterations since the last checkpoint as one segment.

    Parameters
    ----------
    rows : dict of str -> list
        ``iteration`` and one list per recorded field, one entry per iteration.
    samples : list of (iteration, ndarray (K, n_params))
        Stored parameter vectors.
    axes : mapping, optional
        Field name -> name of its trailing axis (e.g. ``REInfo.axes()``); fields not listed get
        ``pair`` if their name starts with ``swap``, ``slot`` otherwise.
    """
    if not rows.get("iteration"):
        return None
    its = rows["iteration"]
    tdir = Path(run_dir) / TRACE_DIR
    tdir.mkdir(exist_ok=True)
    path = tdir / segment_name(its[0], its[-1])

    def fill(fh: Any) -> None:
        write_header(fh, TRACE_FORMAT, FORMAT_VERSION, run_uuid=run_uuid)
        for name, values in rows.items():
            arr = np.asarray(values)
            d = fh.create_dataset(name, data=arr)
            d.attrs["axes"] = _axes(name, arr.ndim, axes)
        if samples:
            g = fh.create_group("samples")
            g.create_dataset("iteration", data=np.array([s[0] for s in samples], np.int64))
            d = g.create_dataset("theta", data=np.stack([s[1] for s in samples]))
            d.attrs["axes"] = "sample,slot,param"

    write_h5(path, fill)
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
            for p in d.glob("*" + TEMP_SUFFIX):
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
    parts: dict[str, list[np.ndarray]] = {}
    s_it: list[np.ndarray] = []
    s_th: list[np.ndarray] = []
    for _, _, path in list_segments(Path(run_dir)):
        with open_h5(path, TRACE_FORMAT, READABLE_VERSIONS,
                     what="thermonet trace segment") as fh:
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


__all__ = ["FORMAT_VERSION", "READABLE_VERSIONS", "TRACE_DIR", "TRACE_FORMAT", "list_segments",
           "read_trace", "segment_name", "trim", "write_segment"]
