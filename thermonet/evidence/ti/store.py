"""The TI checkpoint (``ti_checkpoint.h5``): the sweep's progress, so an interrupted TI
resumes bit for bit."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from thermonet.errors import CheckpointMismatchError
from thermonet.evidence.ti.config import TIConfig
from thermonet.evidence.ti.reference import Reference
from thermonet.io.atomic import write_h5
from thermonet.io.h5 import open_h5, write_header
from thermonet.types import FloatArray

TI_CHECKPOINT = "ti_checkpoint.h5"


TI_FORMAT = "thermonet.ti-checkpoint"


TI_FORMAT_VERSION = 1


def fingerprint(potential: Any, w0: FloatArray, prior: Any, config: TIConfig, seed: Any,
                 reference: Reference | None) -> str:
    """A hash of everything that determines a TI run's numbers, so a checkpoint of another
    calculation is never resumed."""
    h = hashlib.sha256()
    h.update(json.dumps(config.as_dict(), sort_keys=True).encode())
    if isinstance(seed, np.random.SeedSequence):
        key: Any = (seed.entropy, seed.spawn_key)
    elif isinstance(seed, (int, np.integer)):
        key = int(seed)
    else:
        key = seed
    h.update(repr(key).encode())
    h.update(type(potential).__name__.encode())
    h.update(str(potential.n_params).encode())
    h.update(np.ascontiguousarray(w0).tobytes())
    h.update(np.ascontiguousarray(prior.half_width).tobytes())
    h.update(repr(float(potential.energy(w0))).encode())
    if reference is not None:
        for arr in (reference.w0, reference.k, reference.uniform):
            h.update(np.ascontiguousarray(arr).tobytes())
        h.update(repr(reference.energy0).encode())
    return h.hexdigest()


@dataclass
class Progress:
    """Everything a TI run needs to continue exactly (what the checkpoint holds)."""

    next_index: int                 # λ points completed (in sweep order)
    samples: FloatArray             # (n_points, n_samples) dJ/dλ in sweep order
    step_size: FloatArray           # (n_points,) dt used for the sampling
    accepted: FloatArray            # (n_points,) accepted sampling trajectories
    reflections: FloatArray         # (n_points,)
    divergent: FloatArray           # (n_points,)
    extra_adapt: FloatArray         # (n_points,) 1 where min_acceptance forced an adaptation
    theta: FloatArray
    dt: float
    rng_state: Mapping[str, Any]
    elapsed: float
    n_grad: int
    kfit_grad: int


def write_ti_checkpoint(run_dir: Path, fp: str, ref: Reference, pr: Progress) -> None:
    """Write the TI checkpoint (reference, finished λ points, chain state) atomically."""
    def write(fh: Any) -> None:
        write_header(fh, TI_FORMAT, TI_FORMAT_VERSION)
        fh.attrs["fingerprint"] = fp
        fh.attrs["next_index"] = np.int64(pr.next_index)
        fh.attrs["dt"] = float(pr.dt)
        fh.attrs["rng"] = json.dumps(pr.rng_state)
        fh.attrs["counters"] = json.dumps({"elapsed_seconds": pr.elapsed,
                                           "gradient_evaluations": pr.n_grad,
                                           "kfit_gradient_evaluations": pr.kfit_grad})
        g = fh.create_group("reference")
        g.create_dataset("w0", data=ref.w0)
        g.create_dataset("k", data=ref.k)
        g.create_dataset("uniform", data=ref.uniform)
        g.attrs["energy0"] = ref.energy0
        s = fh.create_group("sweep")
        for name in ("samples", "step_size", "accepted", "reflections", "divergent",
                     "extra_adapt"):
            s.create_dataset(name, data=getattr(pr, name))
        fh.create_dataset("theta", data=pr.theta)

    write_h5(run_dir / TI_CHECKPOINT, write)


def read_ti_checkpoint(path: Path, fp: str) -> tuple[Reference, Progress]:
    """The reference and progress of a TI checkpoint; refuses one of another calculation."""
    with open_h5(path, TI_FORMAT, (TI_FORMAT_VERSION,), what="TI checkpoint") as fh:
        if fh.attrs["fingerprint"] != fp:
            raise CheckpointMismatchError(
                f"{path.parent} holds a TI of a different potential, starting point, prior, "
                "seed or configuration; use another run directory or remove it")
        counters = json.loads(fh.attrs["counters"])
        g = fh["reference"]
        ref = Reference(g["w0"][()], g["k"][()], g["uniform"][()], float(g.attrs["energy0"]))
        s = fh["sweep"]
        pr = Progress(int(fh.attrs["next_index"]), s["samples"][()], s["step_size"][()],
                       s["accepted"][()], s["reflections"][()], s["divergent"][()],
                       s["extra_adapt"][()],
                       fh["theta"][()], float(fh.attrs["dt"]), json.loads(fh.attrs["rng"]),
                       float(counters["elapsed_seconds"]),
                       int(counters["gradient_evaluations"]),
                       int(counters["kfit_gradient_evaluations"]))
    return ref, pr
