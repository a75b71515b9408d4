"""``anneal.h5``: the anneal's checkpoint and result, through :mod:`thermonet.io`."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from thermonet.errors import CheckpointFormatError, CheckpointMismatchError
from thermonet.io.h5 import open_h5

ANNEAL_FORMAT = "thermonet.anneal"


ANNEAL_FORMAT_VERSION = 1


ANNEAL_H5 = "anneal.h5"


ANNEAL_JSON = "anneal.json"


def write_chain(group: Any, state: Any) -> None:
    """Store a sampler state in an HDF5 group: arrays as datasets, scalars as attributes."""
    for name, value in state._asdict().items():
        if np.ndim(value):
            group.create_dataset(name, data=value).attrs["axes"] = "param"
        else:
            group.attrs[name] = value.item() if isinstance(value, np.generic) else value


def read_chain(group: Any) -> dict[str, Any]:
    """The fields :func:`write_chain` stored (arrays and scalars by name)."""
    out: dict[str, Any] = {name: group[name][()] for name in group}
    out.update({name: group.attrs[name] for name in group.attrs})
    return out


def chain_state(sampler_cls: type[Any], fields: Mapping[str, Any]) -> Any:
    """Rebuild the sampler's ``State`` from the stored fields, refusing a mismatch."""
    state_cls = sampler_cls.State
    missing = [f for f in state_cls._fields if f not in fields]
    if missing:
        raise CheckpointMismatchError(
            f"the stored chain lacks {', '.join(missing)} of {state_cls.__name__}; it was "
            "written by another sampler. Start anew with --overwrite")
    values = {}
    for name in state_cls._fields:
        value = fields[name]
        values[name] = (np.ascontiguousarray(value, dtype=np.float64) if np.ndim(value)
                        else value.item() if isinstance(value, np.generic) else value)
    return state_cls(**values)


def read_anneal(path: str | Path, *, full: bool = False) -> dict[str, Any]:
    """Read ``anneal.h5`` (or a directory holding it) with one-line errors.

    Returns a dict with ``n_done``, ``status``, ``stop_reason``, ``best`` (dict), ``table``
    (column -> array), ``schedule``, ``theta`` (best parameters, or None), and with
    ``full=True`` also ``chain``, ``rng``, ``config_toml``, ``validation_indices``, ...
    """
    p = Path(path)
    if p.is_dir():
        p = p / ANNEAL_H5
    with open_h5(p, ANNEAL_FORMAT, (ANNEAL_FORMAT_VERSION,), what="thermonet anneal file",
                 missing_what="anneal",
                 missing_hint="expected a directory made by `thermonet anneal CONFIG --out DIR`"
                 ) as fh:
        try:
            out: dict[str, Any] = {
                "n_done": int(fh.attrs["n_done"]),
                "status": str(fh.attrs["status"]),
                "stop_reason": str(fh.attrs["stop_reason"]),
                "best": json.loads(fh.attrs["best"]),
                "table": {k: fh["table"][k][()] for k in fh["table"]},
                "schedule": fh["schedule/temperature_k"][()],
                "theta": fh["theta"][()] if "theta" in fh else None,
                "run_uuid": str(fh.attrs["run_uuid"]),
            }
            if full:
                out.update({
                    "config_toml": str(fh.attrs["config_toml"]),
                    "rng": json.loads(fh.attrs["rng"]),
                    "counters": json.loads(fh.attrs["counters"]),
                    "created_utc": str(fh.attrs["created_utc"]),
                    "chain": read_chain(fh["chain"]),
                    "validation_indices": fh["validation/indices"][()],
                })
        except (KeyError, ValueError, OSError) as err:
            raise CheckpointFormatError(f"{p} is incomplete or corrupt ({err}); expected a "
                                        "thermonet anneal file") from None
    return out
