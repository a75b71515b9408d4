"""A run directory and its ``checkpoint.h5``: everything needed to continue a run exactly.

A run directory holds::

    config.toml          the resolved configuration (every default explicit, with origins)
    checkpoint.h5        everything needed to continue exactly; replaced atomically
    trace/               per-iteration records, one immutable HDF5 segment per checkpoint
    thermonet.log        the log

Crash safety: the iterations since the previous checkpoint are first written as a trace segment
(:mod:`thermonet.io.trace`), then the checkpoint replaces ``checkpoint.h5`` atomically
(:mod:`thermonet.io.atomic`). A kill at any moment leaves the previous checkpoint and every
segment up to it intact. The checkpoint's ``iteration`` is the commit point: on resume, segments
beyond it and temporary files are removed, and the run regenerates those iterations identically
from the saved random-generator states. See docs/formats.md for every dataset.

Integrity: the checkpoint carries checksums of every dataset and root attribute
(:mod:`thermonet.io.digest`, format version 2), and :func:`read_checkpoint` checks them and the
trace the checkpoint commits (:func:`thermonet.io.trace.verify`) before it returns anything, so
resume, info, analyse and plot all refuse damaged or incomplete runs with one line.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from thermonet import __version__
from thermonet.errors import CheckpointError, CheckpointFormatError
from thermonet.io import digest, trace
from thermonet.io.atomic import write_h5
from thermonet.io.h5 import open_h5, write_header
from thermonet.io.jsonable import utc_now
from thermonet.io.layout import CHECKPOINT, CONFIG, LOG, interrupted_initialisation

log = logging.getLogger("thermonet.io")

CHECKPOINT_FORMAT = "thermonet.checkpoint"
#: the layout version written (2: with checksums); :data:`READABLE_VERSIONS` are read
FORMAT_VERSION = 2
READABLE_VERSIONS = (1, 2)
#: the first format version that carries checksums
SIGNED_FROM = 2


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
        ``bit_generator.state`` of every random stream (the slots', then the swaps').
    slots : dict of str -> ndarray
        One array per field of the per-temperature sampler's state, stacked over slots
        (leading axis K).
    replica_k : ndarray of int64, shape (K,)
    temperatures : ndarray of float64, shape (K,)
    counters : dict
        JSON-serialisable cumulative counters (elapsed seconds, ...).
    thermonet_version : str
    created_utc : str
    blas_backend : str
        The kernels' BLAS backend of the process that wrote the checkpoint, handed in by the
        writer ("" for checkpoints from before it was recorded).
    blas_choice : dict
        How that backend was chosen (:func:`thermonet.kernels.matmul.backend.choice`: ``how``,
        ``reason``, the measured ``rates``); empty for checkpoints from before it was recorded.
    masses_k : ndarray of float64, shape (K, n_params), optional
        Per-rung masses estimated in warm-up (``[ladder] adapt_masses``); None: the
        configuration's masses at every rung.
    warmup : dict of str -> ndarray, optional
        The running sums of an unfinished warm-up phase (its position is
        ``counters["warmup"]``); None once the warm-up is over.
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
    blas_choice: dict[str, Any] = field(default_factory=dict)
    masses_k: np.ndarray | None = None
    warmup: dict[str, np.ndarray] | None = None


def write_checkpoint(run_dir: Path, ck: Checkpoint) -> Path:
    """Atomically replace ``run_dir/checkpoint.h5`` with ``ck``."""
    path = Path(run_dir) / CHECKPOINT

    def fill(fh: Any) -> None:
        now = utc_now()
        write_header(
            fh, CHECKPOINT_FORMAT, FORMAT_VERSION, blas_backend=ck.blas_backend,
            blas_choice=json.dumps(ck.blas_choice, sort_keys=True),
            run_uuid=ck.run_uuid, iteration=np.int64(ck.iteration),
            config_toml=ck.config_toml,
            config_sources=json.dumps(ck.config_sources, sort_keys=True),
            plugins=json.dumps(ck.plugins, sort_keys=True),
            # PCG64 states hold 128-bit integers: JSON strings round-trip exactly
            rng=json.dumps(ck.rng_states),
            counters=json.dumps(ck.counters, sort_keys=True),
            created_utc=ck.created_utc or now, updated_utc=now)
        group = fh.create_group("state")
        for name, arr in ck.slots.items():
            d = group.create_dataset(name, data=arr)
            d.attrs["axes"] = "slot" + (",param" if np.ndim(arr) == 2 else "")
        ladder = fh.create_group("ladder")
        ladder.create_dataset("temperature_k", data=ck.temperatures).attrs["axes"] = "slot"
        ladder.create_dataset("replica_k", data=ck.replica_k).attrs["axes"] = "slot"
        if ck.masses_k is not None:
            ladder.create_dataset("masses_k", data=ck.masses_k).attrs["axes"] = "slot,param"
        if ck.warmup is not None:
            warm = fh.create_group("warmup")
            for name, arr in ck.warmup.items():
                warm.create_dataset(name, data=arr)
        digest.sign(fh)

    write_h5(path, fill)
    return path


def _json_dict(text: Any) -> dict[str, Any]:
    """A JSON object stored as a string attribute; ``{}`` if absent or not an object (it is
    provenance, never needed to resume)."""
    try:
        value = json.loads(str(text)) if text else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def recorded_backend(path: str | Path) -> str:
    """The BLAS backend a run directory's checkpoint records, "" if none can be read (cheap: no
    checksums; :func:`read_checkpoint` checks them when the run is opened)."""
    import h5py

    path = Path(path)
    if path.is_dir():
        path = path / CHECKPOINT
    try:
        with h5py.File(path, "r") as fh:
            return str(fh.attrs.get("blas_backend", ""))
    except (OSError, ValueError):
        return ""


def recovery(run_dir: Path) -> str:
    """What a user can do about a damaged checkpoint: thermonet keeps only the latest one, but
    the same configuration and seed repeat the run exactly."""
    return (f"restore {Path(run_dir) / CHECKPOINT} from a backup, or run the configuration "
            f"again with `thermonet run {Path(run_dir) / CONFIG} --out NEW_DIR` (the same "
            "seed repeats it exactly)")


def read_checkpoint(path: str | Path, *, check_trace: bool = True) -> Checkpoint:
    """Read a checkpoint, after checking it and the trace it commits.

    Parameters
    ----------
    path : path
        A run directory or its ``checkpoint.h5``.
    check_trace : bool
        Also check that the trace beside a ``checkpoint.h5`` holds iterations 1..iteration of
        this run, intact (:func:`thermonet.io.trace.verify`).

    Raises
    ------
    CheckpointError
        One line, for a missing, corrupt or foreign file; its subclass
        :class:`~thermonet.errors.IntegrityError` for a checksum mismatch or an incomplete
        trace, with how to recover. Nothing on disk is changed.
    """
    path = Path(path)
    if path.is_dir():
        path = path / CHECKPOINT
    if not path.is_file():
        raise CheckpointError(interrupted_initialisation(path.parent)
                              or f"no checkpoint at {path}; is this a thermonet run directory "
                              "(made by `thermonet run`)?")
    hint = recovery(path.parent)
    with open_h5(path, CHECKPOINT_FORMAT, READABLE_VERSIONS, what="thermonet checkpoint",
                 damaged_hint=hint) as fh:
        try:
            version = int(fh.attrs.get("format_version", 1))
            arrays, signed = digest.verify(fh, path, version=version, signed_from=SIGNED_FROM,
                                           recovery=hint)
            ck = Checkpoint(
                iteration=int(fh.attrs["iteration"]),
                run_uuid=str(fh.attrs["run_uuid"]),
                config_toml=str(fh.attrs["config_toml"]),
                config_sources=json.loads(fh.attrs["config_sources"]),
                plugins=json.loads(fh.attrs["plugins"]),
                rng_states=json.loads(fh.attrs["rng"]),
                slots={k: arrays[f"state/{k}"] for k in fh["state"]},
                replica_k=arrays["ladder/replica_k"],
                temperatures=arrays["ladder/temperature_k"],
                counters=json.loads(fh.attrs["counters"]),
                thermonet_version=str(fh.attrs["thermonet_version"]),
                created_utc=str(fh.attrs.get("created_utc", "")),
                blas_backend=str(fh.attrs.get("blas_backend", "")),
                blas_choice=_json_dict(fh.attrs.get("blas_choice", "")),
                masses_k=arrays.get("ladder/masses_k"),
                warmup=({k: arrays[f"warmup/{k}"] for k in fh["warmup"]}
                        if "warmup" in fh else None),
            )
        except (KeyError, ValueError, OSError) as err:
            raise CheckpointFormatError(f"{path} is incomplete or corrupt ({err}); expected a "
                                        f"thermonet checkpoint; {hint}") from None
    if not signed:
        log.info("%s was written before thermonet stored checksums (format version %d); it is "
                 "read without an integrity check", path, version)
    if check_trace and path.name == CHECKPOINT:
        trace.verify(path.parent, ck.iteration, ck.run_uuid)
    return ck


__all__ = [
    "CHECKPOINT",
    "CHECKPOINT_FORMAT",
    "CONFIG",
    "FORMAT_VERSION",
    "LOG",
    "READABLE_VERSIONS",
    "SIGNED_FROM",
    "Checkpoint",
    "read_checkpoint",
    "recorded_backend",
    "recovery",
    "write_checkpoint",
]
