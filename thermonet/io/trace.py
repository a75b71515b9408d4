"""A run's append-only trace: per-iteration records in immutable HDF5 segments.

``trace/itFFFFFFFFF-LLLLLLLLL.h5`` holds iterations F..L (the records since the previous
checkpoint), written atomically before the checkpoint that commits them. Each dataset has a
leading iteration axis; its ``axes`` attribute names the others (``slot``, ``pair``), as
declared by the engine's Info type. See docs/formats.md.

Integrity: every segment carries checksums (:mod:`thermonet.io.digest`, format version 2), and
every read checks them, the run id, that each segment holds exactly the iterations its name
says, and that the segments tile 1..N without a gap (:func:`list_segments`, :func:`verify`).
A segment beyond the checkpoint's iteration is a crash's leftover, not part of the run.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from thermonet.errors import IntegrityError
from thermonet.io import digest
from thermonet.io.atomic import TEMP_SUFFIX, write_h5
from thermonet.io.h5 import open_h5, write_header

log = logging.getLogger("thermonet.io")

TRACE_FORMAT = "thermonet.trace"
#: version 2 carries checksums; version 1 segments (written before them) are still read
FORMAT_VERSION = 2
READABLE_VERSIONS = (1, 2)
#: the first format version that carries checksums
SIGNED_FROM = 2
TRACE_DIR = "trace"
_SEGMENT = re.compile(r"^it(\d{9})-(\d{9})\.h5$")


def segment_name(first: int, last: int) -> str:
    """File name of the segment holding iterations ``first``..``last``."""
    return f"it{first:09d}-{last:09d}.h5"


def recovery(run_dir: Path) -> str:
    """What a user can do about a damaged or missing segment of ``run_dir``.

    A segment cannot be regenerated into the same run directory (another run's segments carry
    another run id), but the same configuration and seed repeat the whole run exactly.
    """
    return (f"restore it from a backup, or regenerate the run with `thermonet run "
            f"{Path(run_dir) / 'config.toml'} --out NEW_DIR` (the same seed repeats it exactly)")


def segment_files(run_dir: Path) -> list[tuple[int, int, Path]]:
    """Every file named like a segment, as (first, last, path) in order, unchecked: trimming,
    overwriting and the ownership checks must work on a broken trace too."""
    tdir = Path(run_dir) / TRACE_DIR
    if not tdir.is_dir():
        return []
    out = []
    for p in tdir.iterdir():
        m = _SEGMENT.match(p.name)
        if m:
            out.append((int(m.group(1)), int(m.group(2)), p))
    return sorted(out)


def _ranges(gaps: list[tuple[int, int]]) -> str:
    return ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in gaps)


def check_tiling(run_dir: Path, segments: list[tuple[int, int, Path]],
                 through: int | None = None) -> list[tuple[int, int, Path]]:
    """Check that ``segments`` (from their names) tile iterations 1..``through`` without a gap
    or an overlap; return those up to ``through`` (all if None: then only gaps between them are
    found, not a missing last one).

    Raises
    ------
    IntegrityError
        Naming the missing iterations, an overlapping segment or one that straddles ``through``.
    """
    run_dir = Path(run_dir)
    expected = 1
    gaps: list[tuple[int, int]] = []
    kept = []
    for first, last, path in segments:
        if through is not None and first > through:
            break           # beyond the commit point: a crash's leftover, trimmed on resume
        if first > last:
            raise IntegrityError(f"{path} is not a segment name (first iteration {first} after "
                                 f"the last {last}); move it out of {path.parent}")
        if first < expected:
            raise IntegrityError(f"{path} overlaps iterations {first}-{min(last, expected - 1)} "
                                 f"of the segment before it (a stray copy?); move it out of "
                                 f"{path.parent}, or {recovery(run_dir)}")
        if through is not None and last > through:
            raise IntegrityError(
                f"{path} runs past the checkpoint's iteration {through}, so iterations "
                f"{first}-{through} are not in the trace (checkpoint.h5 replaced by an older "
                f"one?); {recovery(run_dir)}")
        if first > expected:
            gaps.append((expected, first - 1))
        kept.append((first, last, path))
        expected = last + 1
    if through is not None and expected <= through:
        gaps.append((expected, through))
    if gaps:
        of = f" of the checkpoint's 1-{through}" if through is not None else ""
        raise IntegrityError(
            f"{run_dir / TRACE_DIR}: the trace lacks iterations {_ranges(gaps)}{of} (segment "
            f"file{'s' if len(gaps) > 1 else ''} deleted?); to recover, {recovery(run_dir)}")
    return kept


def list_segments(run_dir: Path, through: int | None = None) -> list[tuple[int, int, Path]]:
    """Trace segments as (first iteration, last iteration, path), in order.

    Parameters
    ----------
    through : int, optional
        The checkpoint's iteration: the segments must cover 1..``through`` and only those are
        returned. Without it every segment is returned and only gaps between them are refused.

    Raises
    ------
    IntegrityError
        If iterations are missing (:func:`check_tiling`).
    """
    return check_tiling(Path(run_dir), segment_files(Path(run_dir)), through)


def _axes(name: str, ndim: int, axes: Mapping[str, str] | None) -> str:
    if ndim == 1:
        return "iteration"
    if axes is not None and name in axes:
        return f"iteration,{axes[name]}"
    return "iteration," + ("pair" if name.startswith("swap") else "slot")


def write_segment(run_dir: Path, run_uuid: str, rows: dict[str, list[Any]],
                  samples: list[tuple[int, np.ndarray]],
                  axes: Mapping[str, str] | None = None) -> Path | None:
    """Write the records of the iterations since the last checkpoint as one segment, with its
    checksums.

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
        digest.sign(fh)

    write_h5(path, fill)
    return path


def trim(run_dir: Path, iteration: int) -> list[Path]:
    """Remove trace segments beyond ``iteration`` and leftover temporary files."""
    removed = []
    for _first, last, path in segment_files(run_dir):
        if last > iteration:
            path.unlink()
            removed.append(path)
    for d in (Path(run_dir), Path(run_dir) / TRACE_DIR):
        if d.is_dir():
            for p in d.glob("*" + TEMP_SUFFIX):
                p.unlink()
                removed.append(p)
    return removed


def _check_rows(path: Path, arrays: dict[str, np.ndarray], first: int, last: int,
                hint: str) -> None:
    """The segment holds exactly iterations first..last, in every dataset."""
    n = last - first + 1
    its = arrays.get("iteration")
    if its is None or its.shape != (n,) or not np.array_equal(its, np.arange(first, last + 1)):
        held = ("no iteration dataset" if its is None else
                f"{its.shape[0] if its.ndim else 0} rows"
                + (f" ({int(its.min())}-{int(its.max())})" if its.ndim and its.size else ""))
        raise IntegrityError(f"{path} holds {held} but its name says iterations {first}-{last} "
                             f"({n} rows); {hint}")
    for name, arr in arrays.items():
        if "/" not in name and arr.shape[:1] != (n,):
            raise IntegrityError(f"{path}: dataset {name} has shape {arr.shape}, expected {n} "
                                 f"rows (iterations {first}-{last}); {hint}")
    s_it = arrays.get("samples/iteration")
    if s_it is not None and s_it.size and (s_it.min() < first or s_it.max() > last):
        raise IntegrityError(f"{path}: samples/iteration lies outside iterations "
                             f"{first}-{last}; {hint}")
    s_th = arrays.get("samples/theta")
    if s_it is not None and s_th is not None and s_th.shape[:1] != s_it.shape:
        raise IntegrityError(f"{path}: samples/theta has {s_th.shape[:1]} rows but "
                             f"samples/iteration {s_it.shape}; {hint}")


def read_segment(path: Path, first: int, last: int, *, run_uuid: str | None = None,
                 samples: bool = True) -> tuple[dict[str, np.ndarray], bool]:
    """Read and check one segment: header, checksums, run id and rows.

    Parameters
    ----------
    path : Path
    first, last : int
        The iterations its name says it holds.
    run_uuid : str, optional
        The run it must belong to.
    samples : bool
        Also read (and check) ``samples/*``.

    Returns
    -------
    arrays : dict of str -> ndarray
        The datasets by path (``iteration``, ``energy_k``, ..., ``samples/theta``).
    signed : bool
        False for a segment written before checksums (format version 1).

    Raises
    ------
    IntegrityError
        One line naming the file, what is wrong and how to recover.
    """
    hint = recovery(path.parent.parent)
    try:
        with open_h5(path, TRACE_FORMAT, READABLE_VERSIONS, what="thermonet trace segment",
                     error=IntegrityError, damaged_hint=hint) as fh:
            arrays, signed = digest.verify(
                fh, path, version=int(fh.attrs.get("format_version", 1)),
                signed_from=SIGNED_FROM, recovery=hint,
                select=None if samples else (lambda p: not p.startswith("samples/")))
            found = fh.attrs.get("run_uuid")
    except OSError as err:    # damage inside a file whose header still reads
        raise IntegrityError(f"{path} cannot be read ({err}); it may be truncated or "
                             f"corrupt; {hint}") from None
    if run_uuid is not None and found != run_uuid:
        raise IntegrityError(f"{path} belongs to another run (run_uuid {found}; this run's is "
                             f"{run_uuid}); move it out of {path.parent}, then {hint}")
    _check_rows(path, arrays, first, last, hint)
    return arrays, signed


def _note_unsigned(run_dir: Path, n: int) -> None:
    if n:
        log.info("%d trace segment(s) of %s were written before thermonet stored checksums "
                 "(format version 1); they are read without an integrity check", n, run_dir)


def verify(run_dir: Path, iteration: int, run_uuid: str) -> None:
    """Check the trace a checkpoint commits: segments tile 1..``iteration``, and every one of
    them (samples included) passes :func:`read_segment` for ``run_uuid``.

    Raises
    ------
    IntegrityError
        One line naming the file or the missing iterations and how to recover.
    """
    unsigned = 0
    for first, last, path in list_segments(run_dir, through=iteration):
        unsigned += not read_segment(path, first, last, run_uuid=run_uuid, samples=True)[1]
    _note_unsigned(Path(run_dir), unsigned)


def read_trace(run_dir: str | Path, *, samples: bool = False, run_uuid: str | None = None,
               through: int | None = None) -> dict[str, np.ndarray]:
    """Concatenate the trace segments of a run, checking each (:func:`read_segment`).

    Parameters
    ----------
    samples : bool
        Also return (and check) ``samples_iteration`` and ``samples_theta`` (sample, slot,
        param).
    run_uuid : str, optional
        Refuse a segment of another run.
    through : int, optional
        The checkpoint's iteration: read only segments up to it and refuse if any of 1..through
        is missing. Without it, every segment is read (a crash may have left one beyond the
        checkpoint) and only gaps between segments are refused.

    Returns
    -------
    dict of str -> ndarray
        Arrays with a leading iteration axis (``iteration``, ``energy_k``, ``n_accepted_k``,
        ``swap_accepted_k``, ...).
    """
    parts: dict[str, list[np.ndarray]] = {}
    s_it: list[np.ndarray] = []
    s_th: list[np.ndarray] = []
    unsigned = 0
    for first, last, path in list_segments(Path(run_dir), through=through):
        arrays, signed = read_segment(path, first, last, run_uuid=run_uuid, samples=samples)
        unsigned += not signed
        for name, arr in arrays.items():
            if "/" not in name:
                parts.setdefault(name, []).append(arr)
        if samples and "samples/iteration" in arrays:
            s_it.append(arrays["samples/iteration"])
            s_th.append(arrays["samples/theta"])
    _note_unsigned(Path(run_dir), unsigned)
    # a field added by a later release exists only in the segments written since: leave it
    # out rather than misalign it with the iterations
    n_seg = max((len(v) for v in parts.values()), default=0)
    out = {k: np.concatenate(v) for k, v in parts.items() if len(v) == n_seg}
    if samples:
        out["samples_iteration"] = np.concatenate(s_it) if s_it else np.zeros(0, np.int64)
        out["samples_theta"] = np.concatenate(s_th) if s_th else np.zeros((0, 0, 0))
    return out


__all__ = [
    "FORMAT_VERSION",
    "READABLE_VERSIONS",
    "SIGNED_FROM",
    "TRACE_DIR",
    "TRACE_FORMAT",
    "check_tiling",
    "list_segments",
    "read_segment",
    "read_trace",
    "recovery",
    "segment_files",
    "segment_name",
    "trim",
    "verify",
    "write_segment",
]
