"""The :class:`Analysis` record: per-temperature table, swap pairs and summary, with its
CSV, JSON and HDF5 files."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from thermonet.errors import CheckpointError
from thermonet.io.atomic import write_h5, write_text
from thermonet.io.h5 import open_h5, write_header
from thermonet.io.jsonable import to_jsonable

#: the analysis file's format and version
ANALYSIS_FORMAT = "thermonet.analysis"


ANALYSIS_VERSION = 2

#: versions :func:`read_analysis` reads (1: before the mixing columns, the verdict and
#: ``series``)
READABLE_ANALYSIS_VERSIONS = (1, 2)


#: columns of :attr:`Analysis.table`, in order (one row per temperature)
TABLE_COLUMNS: tuple[str, ...] = (
    "temperature", "dt", "acceptance", "acceptance_err",
    "train_energy", "train_energy_err", "train_energy_per_point", "train_energy_per_point_err",
    "test_energy", "test_energy_err", "test_energy_per_point", "test_energy_per_point_err",
    "train_error", "train_error_err", "test_error", "test_error_err",
    "predictive_test_energy_per_point", "predictive_test_error",
    "heat_capacity", "heat_capacity_err", "tau_train_energy",
    "rhat_train_energy", "ess_bulk_train_energy", "ess_tail_train_energy", "ess_bulk_per_hour",
    "n_samples", "energy_rho1", "energy_rho1_err", "local_efficiency",
)


#: columns of :attr:`Analysis.pairs` (one row per adjacent pair of temperatures)
PAIR_COLUMNS: tuple[str, ...] = ("t_low", "t_high", "swap_acceptance", "swap_attempts",
                                 "swap_accepted", "swap_rejection", "swap_rejection_err")


def _csv_text(columns: dict[str, np.ndarray], order: tuple[str, ...]) -> str:
    names = [c for c in order if c in columns] + [c for c in columns if c not in order]
    n = len(next(iter(columns.values()))) if columns else 0
    lines = [",".join(names)]
    for i in range(n):
        cells = []
        for c in names:
            v = columns[c][i]
            if isinstance(v, (np.integer, int)):
                cells.append(str(int(v)))
            else:
                cells.append(repr(float(v)) if np.isfinite(v) else str(float(v)))
        lines.append(",".join(cells))
    return "\n".join(lines) + "\n"


@dataclass
class Analysis:
    """The analysis of a run directory (see docs/analysis.md for every entry).

    Attributes
    ----------
    run_dir : Path
    temperatures : ndarray of float64, shape (K,), ascending
    table : dict of str -> ndarray, each of shape (K,)
        One row per temperature; the columns of :data:`TABLE_COLUMNS`.
    pairs : dict of str -> ndarray, each of shape (K-1,)
        One row per adjacent pair; the columns of :data:`PAIR_COLUMNS`.
    references : dict of str -> float
        ``uninformed_per_point`` (ln C, C classes: ln 10 for MNIST), ``uninformed_error``
        (1 - 1/C), ``baseline_test_energy_per_point`` (+ ``_err``), ``baseline_test_error``
        (+ ``_err``), ``baseline_n_kept`` (NaN without a baseline).
    best : dict of str -> float
        Temperatures of the minimum test error / test energy / predictive test error and the
        stopping rule's result.
    warnings : list of str
    meta : dict
        Run, data and window information, and the mixing verdict (``meta["verdict"]``:
        ``mixed``, ``reasons``, ``flags``, ``text``); JSON-serialisable.
    series : dict of str -> ndarray
        Per stored sample after the discard: ``sample_iteration`` (S,) and ``train_error``,
        ``test_energy``, ``test_error`` (S, K); empty without data or samples. A one-rung run
        of several chains has every chain's samples, chain by chain, and ``sample_chain``
        (S,), the chain of each. ``thermonet compare`` computes R-hat across runs from them.
    """

    run_dir: Path
    temperatures: np.ndarray
    table: dict[str, np.ndarray]
    pairs: dict[str, np.ndarray]
    references: dict[str, float]
    best: dict[str, float]
    warnings: list[str] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    series: dict[str, np.ndarray] = field(default_factory=dict)

    def to_csv(self, path: str | Path, pairs_path: str | Path | None = None) -> Path:
        """Write the per-temperature table as CSV (atomically); also the pairs if asked.

        Floats are written with full precision (``repr``), missing values as ``nan``.
        """
        path = Path(path)
        write_text(path, _csv_text(self.table, TABLE_COLUMNS))
        if pairs_path is not None:
            self.pairs_to_csv(pairs_path)
        return path

    def pairs_to_csv(self, path: str | Path) -> Path:
        """Write the per-pair table as CSV (atomically)."""
        path = Path(path)
        write_text(path, _csv_text(self.pairs, PAIR_COLUMNS))
        return path

    def to_hdf5(self, path: str | Path) -> Path:
        """Write everything to one HDF5 file (atomically).

        Layout: ``table/<column>`` (K,), ``pairs/<column>`` (K-1,), ``temperatures``,
        ``series/<name>`` (per stored sample; absent when empty); root
        attributes ``format = "thermonet.analysis"``, ``references``, ``best``, ``meta``
        (JSON strings, non-finite numbers as "nan"/"inf") and ``warnings`` (JSON list).
        Read it back with :func:`read_analysis`.
        """
        path = Path(path)

        def write(fh: Any) -> None:
            write_header(fh, ANALYSIS_FORMAT, ANALYSIS_VERSION)
            fh.attrs["run_dir"] = str(self.run_dir)
            fh.attrs["references"] = json.dumps(to_jsonable(self.references), sort_keys=True)
            fh.attrs["best"] = json.dumps(to_jsonable(self.best), sort_keys=True)
            fh.attrs["meta"] = json.dumps(to_jsonable(self.meta), sort_keys=True)
            fh.attrs["warnings"] = json.dumps(list(self.warnings))
            fh.create_dataset("temperatures", data=self.temperatures)
            g = fh.create_group("table")
            for name, arr in self.table.items():
                g.create_dataset(name, data=arr)
            g.attrs["columns"] = json.dumps(list(self.table))
            p = fh.create_group("pairs")
            for name, arr in self.pairs.items():
                p.create_dataset(name, data=arr)
            p.attrs["columns"] = json.dumps(list(self.pairs))
            if self.series:
                g = fh.create_group("series")
                for name, arr in self.series.items():
                    g.create_dataset(name, data=arr)

        write_h5(path, write)
        return path


def _floats_from_json(d: dict[str, Any]) -> dict[str, float]:
    return {k: float(v) for k, v in d.items()}


def read_analysis(path: str | Path) -> Analysis:
    """Read an :class:`Analysis` written by :meth:`Analysis.to_hdf5`."""
    with open_h5(path, ANALYSIS_FORMAT, READABLE_ANALYSIS_VERSIONS,
                 what="thermonet analysis file",
                 missing_what="analysis file", missing_error=CheckpointError,
                 missing_hint="make one with `thermonet analyse RUN_DIR`") as fh:
        table = {n: fh["table"][n][()] for n in json.loads(fh["table"].attrs["columns"])}
        pairs = {n: fh["pairs"][n][()] for n in json.loads(fh["pairs"].attrs["columns"])}
        series = {n: d[()] for n, d in fh["series"].items()} if "series" in fh else {}
        return Analysis(
            run_dir=Path(str(fh.attrs["run_dir"])),
            temperatures=fh["temperatures"][()],
            table=table, pairs=pairs,
            references=_floats_from_json(json.loads(fh.attrs["references"])),
            best=_floats_from_json(json.loads(fh.attrs["best"])),
            warnings=list(json.loads(fh.attrs["warnings"])),
            meta=json.loads(fh.attrs["meta"]), series=series)
