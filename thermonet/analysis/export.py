"""``export_run`` (what ``thermonet export`` runs): runs' per-temperature observables as an
ArviZ InferenceData netCDF file, one chain per run (per chain for a one-rung run of several
chains). ArviZ is optional (``pip install 'thermonet[arviz]'``) and imported only here, only
when asked."""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from thermonet.errors import ConfigError
from thermonet.io.atomic import write_atomic

if TYPE_CHECKING:  # pragma: no cover
    from thermonet.analysis.run_reader import RunReader

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


def _common_ladder(records: Sequence[RunReader]) -> np.ndarray:
    """The ladder every chain shares (one line naming the first run that differs)."""
    from thermonet.analysis.config_difference import config_difference

    ref = records[0]
    for r in records[1:]:
        if not np.array_equal(r.temperatures, ref.temperatures):
            raise ConfigError(f"{r.path} is on another ladder than {ref.path}; export chains "
                              "of one configuration on one ladder")
        diff = config_difference(ref.config, r.config)
        if diff is not None:
            raise ConfigError(f"{r.path} has another configuration than {ref.path}: {diff}; "
                              "export chains of one configuration")
        if r.run_uuid == ref.run_uuid:
            raise ConfigError(f"{r.path} is a copy of {ref.path} (run id {r.run_uuid}); "
                              "expected independent runs, e.g. of different run.seed")
    return ref.temperatures


def _chains(records: Sequence[RunReader], name: str, cols: Any, dtype: Any = np.float64
            ) -> np.ndarray:
    """(chain, draw, ...) of the trace field ``name`` (its columns ``cols``, or all of a
    one-column field when None) after each run's discard, every chain cut to the shortest
    (keeping the ends, the draws furthest from the starts); zeros for a field the run's
    trace lacks. A one-rung run of several chains gives each of its chains (the columns of
    its one rung) in turn."""
    n = min(r.n_kept for r in records)
    out = []
    for r in records:
        a = r.kept.get(name)
        if a is None:
            a = np.zeros((r.n_kept, len(r.temperatures) * r.n_chains))
        a = np.asarray(a)
        for c in range(r.n_chains):
            part = a if cols is None else a[:, [c] if r.n_chains > 1 else cols]
            out.append(np.asarray(part[part.shape[0] - n:], dtype=dtype))
    return np.stack(out)


def _trace_groups(records: Sequence[RunReader]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(posterior, sample_stats) of the finite rungs, and the swaps of every pair."""
    temps = records[0].temperatures
    finite = np.flatnonzero(np.isfinite(temps))
    n_traj = records[0].n_trajectories[finite]
    posterior = {"energy": _chains(records, "energy_k", finite)}
    stats = {
        "acceptance": _chains(records, "n_accepted_k", finite) / n_traj,
        "n_accepted": _chains(records, "n_accepted_k", finite, np.int64),
        "n_divergent": _chains(records, "n_divergent_k", finite, np.int64),
        "step_size": _chains(records, "step_size_k", finite),
        "replica": _chains(records, "replica_k", finite, np.int64),
        "iteration": _chains(records, "iteration", None, np.int64),
    }
    if temps.size > 1:
        pairs = slice(0, temps.size - 1)
        stats["swap_attempted"] = _chains(records, "swap_attempted_k", pairs, np.int64)
        stats["swap_accepted"] = _chains(records, "swap_accepted_k", pairs, np.int64)
    return posterior, stats


def inference_data(runs: Any, *, data: Any = None, temperature: float | None = None,
                   discard: float | None = None, mnist_dir: str | None = None) -> Any:
    """Runs' kept traces as ``arviz.InferenceData``, dims (chain, draw, temperature).

    Every run (a path or a :class:`~thermonet.analysis.run_record.RunRecord`) is one chain,
    or as many as it ran (``run.chains`` of a one-rung run); independent runs of one
    configuration and ladder (different ``run.seed``) make the chains ArviZ compares (R-hat
    needs at least two). Each chain keeps the iterations after
    its run's discard (``discard`` overrides it), cut to the shortest chain (keeping the
    ends), so the means are those of ``thermonet info``. The temperatures are labelled
    ``T=0.147``, ...; the prior rung (``T = inf``: draws from the prior, not the posterior)
    is left out of the per-temperature groups.

    Groups: ``posterior`` (``energy``, the training energy at each temperature slot),
    ``sample_stats`` (``acceptance``, ``n_accepted``, ``n_divergent``, ``step_size``,
    ``replica``: which replica sits at each slot, over ``temperature``; ``iteration``, the
    run's iteration number of each draw; ``swap_attempted``, ``swap_accepted`` over
    ``pair``: pair k is (T_k, T_k+1), the prior rung's pair included), ``constant_data``
    (``t_low``, ``t_high`` per pair) and, with ``data``, ``posterior_predictive`` (the
    outputs, or class probabilities, of each stored network of the first run at
    ``temperature`` on those cases) with ``observed_data`` (their targets, if any).
    """
    from thermonet.analysis.run_reader import RunReader, read_run, temperature_label

    az = _arviz()
    records = [r if isinstance(r, RunReader) else read_run(r) for r in (
        runs if isinstance(runs, (list, tuple)) else [runs])]
    records = [r.with_discard(discard) for r in records]
    temps = _common_ladder(records)
    finite = temps[np.isfinite(temps)]
    posterior, stats = _trace_groups(records)
    pair_labels = [f"{a}|{b}" for a, b in zip(temperature_label(temps)[:-1],
                                             temperature_label(temps)[1:], strict=True)]
    dims = {name: ["temperature"] for name in (*posterior, *stats)}
    dims.update({"iteration": [], "swap_attempted": ["pair"], "swap_accepted": ["pair"],
                 "t_low": ["pair"], "t_high": ["pair"]})
    coords = {"chain": np.arange(posterior["energy"].shape[0]),
              "draw": np.arange(posterior["energy"].shape[1]),
              "temperature": temperature_label(finite), "pair": pair_labels}
    idata = az.from_dict(
        posterior=posterior, sample_stats=stats,
        constant_data={"t_low": temps[:-1], "t_high": temps[1:]} if temps.size > 1 else None,
        coords=coords, dims=dims, attrs=_attrs(records, temps))
    for group in ("posterior", "sample_stats"):
        ds = getattr(idata, group)
        setattr(idata, group, ds.assign_coords(T=("temperature", finite)))
    if data is not None:
        _add_predictive(idata, records[0], data, temperature, mnist_dir)
    return idata


def _attrs(records: Sequence[RunReader], temps: np.ndarray) -> dict[str, Any]:
    ref = records[0]
    return {"run_uuid": [r.run_uuid for r in records],
            "run_dir": [str(r.path) for r in records],
            "iterations": [r.iterations for r in records],
            "discard": [r.discard for r in records],
            "discarded_iterations": [r.start for r in records],
            "n_chains": sum(r.n_chains for r in records),
            "chains_per_run": [r.n_chains for r in records],
            "prior_rung": ("left out of the per-temperature groups (T = inf: draws from the "
                           "prior)" if np.isinf(temps[-1]) else "none"),
            "n_trajectories": [int(v) for v in ref.n_trajectories],
            "thermonet_version": ref.checkpoint.thermonet_version}


def _add_predictive(idata: Any, rec: RunReader, data: Any, temperature: float | None,
                    mnist_dir: str | None) -> None:
    """Add the predictive of ``rec``'s stored networks on ``data`` (its chains)."""
    import xarray as xr

    from thermonet.analysis.prediction import predictive_draws, summarise_draws

    d = predictive_draws(rec, data, temperature, mnist_dir=mnist_dir)
    pred = summarise_draws(d)
    regression = d.task == "regression"
    name, last = ("f", "output") if regression else ("p", "class")
    out = d.outputs if regression else np.exp(d.outputs)
    out = out.reshape(rec.n_chains, out.shape[0] // rec.n_chains, *out.shape[1:])
    coords = {"chain": np.arange(rec.n_chains), "draw": np.arange(out.shape[1]),
              "case": np.arange(out.shape[2]), last: list(pred.names)}
    pp = xr.Dataset({name: (("chain", "draw", "case", last), out)}, coords=coords,
                    attrs={"temperature": d.temperature, "source": d.source})
    groups: dict[str, Any] = {"posterior_predictive": pp}
    if d.has_targets:
        y = pred.arrays["targets"]
        groups["observed_data"] = xr.Dataset(
            {"y": (("case", last) if y.ndim == 2 else ("case",), y)},
            coords={k: v for k, v in coords.items() if k in (("case", last) if y.ndim == 2
                                                           else ("case",))})
    idata.add_groups(groups)


def export_run(run_dirs: Any, out: str | Path, *, discard: float | None = None) -> Path:
    """Write :func:`inference_data` of one run or several (one chain each) to ``out``
    (netCDF), atomically. Read it back with ``arviz.from_netcdf(out)``.
    """
    out = Path(out)
    if not out.parent.is_dir():
        raise ConfigError(f"--out {out}: directory {out.parent} does not exist")
    idata = inference_data(run_dirs, discard=discard)

    def write(tmp: Path) -> None:
        idata.to_netcdf(os.fspath(tmp))

    return write_atomic(out, write)


__all__ = ["NEED_ARVIZ", "export_run", "inference_data"]
