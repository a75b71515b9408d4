"""``initialisation.h5``: the replicas a run has finished initialising, before its first
checkpoint exists.

A run's initialisation (a draw, Algorithm 3's minimisation and a burn-in per replica; Baldock
& Marzari 2019, Sec. 3.3.2) can take longer than everything else on large data sets, and it is
done before ``checkpoint.h5`` can be written. Each replica draws only from its own random
stream, so a replica's finished state and its stream's state after the initialisation are all
that is needed to skip it later: the run continued from this file is the run that was never
interrupted, bit for bit. The file is replaced atomically after every group of replicas and
removed once the first checkpoint is written.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from thermonet.errors import CheckpointFormatError
from thermonet.io import digest
from thermonet.io.atomic import write_h5
from thermonet.io.h5 import open_h5, write_header

INITIALISATION = "initialisation.h5"
INITIALISATION_FORMAT = "thermonet.initialisation"
FORMAT_VERSION = 1


@dataclass
class PartialInitialisation:
    """The replicas finished so far.

    Attributes
    ----------
    config_toml : str
        The resolved configuration of the run (a continuation must have the same).
    n_slots : int
        Replicas the run initialises.
    done : ndarray of int64
        The slots finished, ascending.
    slots : dict of str -> ndarray
        Every field of the finished slots' sampler states, stacked in the order of ``done``.
    rng_states : list of dict
        ``bit_generator.state`` of each finished slot's stream after its initialisation, in the
        order of ``done``.
    seconds : float
        Wall time spent initialising so far, over every attempt.
    """

    config_toml: str
    n_slots: int
    done: np.ndarray
    slots: dict[str, np.ndarray]
    rng_states: list[dict[str, Any]]
    seconds: float


def write_partial(run_dir: Path, part: PartialInitialisation) -> Path:
    """Atomically replace ``run_dir/initialisation.h5`` with ``part``."""
    path = Path(run_dir) / INITIALISATION

    def fill(fh: Any) -> None:
        # PCG64 states hold 128-bit integers: JSON strings round-trip exactly
        write_header(fh, INITIALISATION_FORMAT, FORMAT_VERSION, config_toml=part.config_toml,
                     n_slots=np.int64(part.n_slots), rng=json.dumps(part.rng_states),
                     seconds=float(part.seconds))
        fh.create_dataset("done", data=np.asarray(part.done, dtype=np.int64))
        group = fh.create_group("state")
        for name, arr in part.slots.items():
            group.create_dataset(name, data=arr)
        digest.sign(fh)

    write_h5(path, fill)
    return path


def read_partial(run_dir: Path) -> PartialInitialisation | None:
    """The replicas ``run_dir`` finished initialising, or None if it has no such file.

    Raises
    ------
    CheckpointError
        One line (a subclass), for a damaged or foreign file, saying how to go on.
    """
    path = Path(run_dir) / INITIALISATION
    if not path.exists():
        return None
    hint = (f"move it away and run `thermonet resume {Path(run_dir)}` to initialise every "
            "replica again")
    with open_h5(path, INITIALISATION_FORMAT, (FORMAT_VERSION,),
                 what="thermonet initialisation file", damaged_hint=hint) as fh:
        try:
            arrays, _ = digest.verify(fh, path, version=FORMAT_VERSION,
                                      signed_from=FORMAT_VERSION, recovery=hint)
            part = PartialInitialisation(
                config_toml=str(fh.attrs["config_toml"]), n_slots=int(fh.attrs["n_slots"]),
                done=np.asarray(arrays["done"], dtype=np.int64),
                slots={k: arrays[f"state/{k}"] for k in fh["state"]},
                rng_states=json.loads(fh.attrs["rng"]), seconds=float(fh.attrs["seconds"]))
        except (KeyError, ValueError, OSError) as err:
            raise CheckpointFormatError(f"{path} is incomplete or corrupt ({err}); expected a "
                                        f"thermonet initialisation file; {hint}") from None
    n_done = len(part.done)
    ordered = bool(np.all(np.diff(part.done) > 0)) if n_done > 1 else True
    in_range = n_done == 0 or (part.done[0] >= 0 and part.done[-1] < part.n_slots)
    sizes = {len(arr) for arr in part.slots.values()} | {len(part.rng_states)}
    if not (ordered and in_range and sizes <= {n_done}):
        raise CheckpointFormatError(f"{path} is inconsistent ({n_done} slot(s) listed as done "
                                    f"of {part.n_slots}, {sorted(sizes)} state row(s)); "
                                    f"expected one state and stream per finished slot; {hint}")
    return part


def remove_partial(run_dir: Path) -> None:
    """Remove ``run_dir/initialisation.h5`` (once the first checkpoint holds everything)."""
    (Path(run_dir) / INITIALISATION).unlink(missing_ok=True)


__all__ = ["FORMAT_VERSION", "INITIALISATION", "INITIALISATION_FORMAT",
           "PartialInitialisation", "read_partial", "remove_partial", "write_partial"]
