"""``export_run`` (what ``thermonet export`` runs): a run's per-temperature observables as an
ArviZ InferenceData netCDF file. ArviZ is optional (``pip install 'thermonet[arviz]'``) and
imported only here, only when asked."""

from __future__ import annotations

import logging
import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from thermonet.config.schema import parse_toml
from thermonet.errors import ConfigError
from thermonet.io.atomic import write_atomic
from thermonet.io.checkpoint import read_checkpoint
from thermonet.io.trace import read_trace
from thermonet.tempering.ladder import trajectories_from_settings

#: the one-line answer when ArviZ is missing
NEED_ARVIZ = ("thermonet export needs ArviZ, an optional dependency: "
              "pip install 'thermonet[arviz]' (or pip install 'arviz>=0.17')")


def _arviz() -> Any:
    # ArviZ announces its refactor (a FutureWarning) and its optional parts (INFO log lines)
    # on import: noise to a user who asked for a file
    quiet = logging.getLogger("arviz")
    level = quiet.level
    quiet.setLevel(logging.WARNING)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            import arviz
    except ImportError:
        raise ConfigError(NEED_ARVIZ) from None
    finally:
        quiet.setLevel(level)
    return arviz


def inference_data(run_dir: str | Path) -> Any:
    """The run's trace as ``arviz.InferenceData`` with dims (chain = 1, draw, temperature).

    Groups: ``posterior`` (``energy``: the training energy at each temperature slot),
    ``sample_stats`` (``acceptance``, ``n_accepted``, ``n_divergent``, ``step_size``,
    ``replica``: which replica sits at each slot, all over ``temperature``;
    ``swap_attempted``, ``swap_accepted`` over ``pair``: pair k is (T_k, T_k+1)) and
    ``constant_data`` (``t_low``, ``t_high`` per pair). The ``draw`` coordinate is the
    iteration number; every recorded iteration is included (no discard). Rows beyond the
    checkpoint (left by a crash) are not part of the run and are left out.

    Parameters
    ----------
    run_dir : path

    Returns
    -------
    arviz.InferenceData
    """
    az = _arviz()
    run_dir = Path(run_dir)
    ck = read_checkpoint(run_dir)
    tr = read_trace(run_dir, run_uuid=ck.run_uuid)
    its = np.asarray(tr.get("iteration", np.zeros(0, np.int64)))
    tr = {name: np.asarray(a)[its <= ck.iteration] for name, a in tr.items()}
    cfg = parse_toml(ck.config_toml)
    temps = np.asarray(ck.temperatures, dtype=np.float64)
    n_traj = trajectories_from_settings(cfg.get("ladder", cfg.get("sampler", {})), temps)
    k = temps.size

    def chain(name: str, width: int, dtype: Any = np.float64) -> np.ndarray:
        a = tr.get(name, np.zeros((0, width)))
        return np.asarray(a, dtype=dtype).reshape(1, -1, width)

    sample_stats = {
        "acceptance": chain("n_accepted_k", k) / n_traj,
        "n_accepted": chain("n_accepted_k", k, np.int64),
        "n_divergent": chain("n_divergent_k", k, np.int64),
        "step_size": chain("step_size_k", k),
        "replica": chain("replica_k", k, np.int64),
    }
    if k > 1:
        sample_stats["swap_attempted"] = chain("swap_attempted_k", k - 1, np.int64)
        sample_stats["swap_accepted"] = chain("swap_accepted_k", k - 1, np.int64)
    dims = {name: ["temperature"] for name in ("energy", "acceptance", "n_accepted",
                                               "n_divergent", "step_size", "replica")}
    dims.update({"swap_attempted": ["pair"], "swap_accepted": ["pair"],
                 "t_low": ["pair"], "t_high": ["pair"]})
    n = int(tr["iteration"].shape[0]) if "iteration" in tr else 0
    coords = {"chain": [0], "draw": np.asarray(tr.get("iteration", np.zeros(0)), np.int64),
              "temperature": temps, "pair": np.arange(max(k - 1, 0))}
    return az.from_dict(
        posterior={"energy": chain("energy_k", k)}, sample_stats=sample_stats,
        constant_data={"t_low": temps[:-1], "t_high": temps[1:]} if k > 1 else None,
        coords=coords, dims=dims,
        attrs={"run_uuid": ck.run_uuid, "run_dir": str(run_dir), "iterations": n,
               "n_trajectories": [int(v) for v in n_traj],
               "thermonet_version": ck.thermonet_version})


def export_run(run_dir: str | Path, out: str | Path) -> Path:
    """Write :func:`inference_data` of a run to ``out`` (netCDF), atomically.

    Read it back with ``arviz.from_netcdf(out)``.
    """
    out = Path(out)
    if not out.parent.is_dir():
        raise ConfigError(f"--out {out}: directory {out.parent} does not exist")
    idata = inference_data(run_dir)

    def write(tmp: Path) -> None:
        idata.to_netcdf(os.fspath(tmp))

    return write_atomic(out, write)


__all__ = ["NEED_ARVIZ", "export_run", "inference_data"]
