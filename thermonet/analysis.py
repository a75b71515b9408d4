"""Analysis of a run: per-temperature averages with error bars, test-set performance, the
Bayesian predictive, reference lines, the paper's stopping rule and ladder health.

* :func:`summarise`: the quick ``thermonet info`` summary (trace only).
* :func:`analyse`: the full analysis behind ``thermonet analyse`` (an :class:`Analysis`).
* Pure building blocks, used by :func:`analyse` and tested on synthetic data:
  :func:`series_stats`, :func:`heat_capacity`, :func:`round_trips`,
  :func:`round_trips_per_replica`, :func:`swap_table`, :func:`stopping_rule`,
  :func:`evaluate_samples`.

Slot k of a run always holds temperature ``T_k`` (ascending); ``replica_k[t, k]`` says which
replica (walker) sat at slot k after iteration t, so the energies ``energy_k[:, k]`` and the
stored parameters ``samples/theta[:, k, :]`` are already per temperature. See docs/analysis.md
for every column, formula and rule.
"""

from __future__ import annotations

import json
import math
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from thermonet import checkpoint as ckpt
from thermonet import stats
from thermonet._types import FloatArray, IntArray
from thermonet.errors import CheckpointError, CheckpointFormatError, ConfigError

#: columns of :attr:`Analysis.table`, in order (one row per temperature)
TABLE_COLUMNS: tuple[str, ...] = (
    "temperature", "dt", "acceptance",
    "train_energy", "train_energy_err", "train_energy_per_point", "train_energy_per_point_err",
    "test_energy", "test_energy_err", "test_energy_per_point", "test_energy_per_point_err",
    "train_error", "train_error_err", "test_error", "test_error_err",
    "predictive_test_energy_per_point", "predictive_test_error",
    "heat_capacity", "heat_capacity_err", "tau_train_energy", "n_samples",
)

#: columns of :attr:`Analysis.pairs` (one row per adjacent pair of temperatures)
PAIR_COLUMNS: tuple[str, ...] = ("t_low", "t_high", "swap_acceptance", "swap_attempts",
                                 "swap_accepted")

#: a pair whose swap acceptance is below this fraction gets a warning (the ladder may not mix)
SWAP_WARN_THRESHOLD = 0.05

#: the stopping rule stops cooling when the test error exceeds the lowest so far by more than
#: this many combined standard errors
STOP_SIGMA = 2.0
#: consecutive temperatures above the running minimum that stop the cooling
STOP_PATIENCE = 3

#: a temperature whose training-energy series after discard is shorter than this many
#: integrated autocorrelation times gets a warning
MIN_TAU_MULTIPLE = 50.0

#: fewer stored samples per temperature than this gets a warning (test error bars unreliable)
MIN_SAMPLES = 10


# --- building blocks --------------------------------------------------------------------------

def series_stats(x: Any) -> tuple[float, float, float]:
    """Mean, standard error and integrated autocorrelation time of a correlated series.

    The error is ``sqrt(var(x, ddof=1) * tau_int / n)`` with ``tau_int`` from
    :func:`thermonet.stats.integrated_autocorrelation_time` (Sokal's window, c = 5), in units
    of the series' spacing.

    Parameters
    ----------
    x : array_like, shape (n,)

    Returns
    -------
    (mean, error, tau) : tuple of float
        NaN error and tau for fewer than 2 values (NaN mean for none); tau = 1 for a constant
        series.
    """
    x = np.asarray(x, dtype=np.float64)
    if x.size == 0:
        return math.nan, math.nan, math.nan
    if x.size < 2:
        return float(x[0]), math.nan, math.nan
    if not np.all(np.isfinite(x)):
        return float(np.mean(x)), math.nan, math.nan
    tau = stats.integrated_autocorrelation_time(x)
    return float(x.mean()), float(np.sqrt(x.var(ddof=1) * tau / x.size)), float(tau)


def heat_capacity(energy: Any, temperature: float) -> tuple[float, float]:
    """``Var(E) / T^2`` of an energy series and its standard error.

    ``Var(E)`` is ``var(E, ddof=1)``; its error is the autocorrelation-aware standard error
    (:func:`series_stats`) of the squared deviations ``(E - mean E)^2``, scaled by
    ``n / (n - 1)``.

    Parameters
    ----------
    energy : array_like, shape (n,)
    temperature : float

    Returns
    -------
    (c, error) : tuple of float
    """
    e = np.asarray(energy, dtype=np.float64)
    if e.size < 2 or not np.all(np.isfinite(e)):
        return math.nan, math.nan
    t2 = float(temperature) ** 2
    d2 = (e - e.mean()) ** 2
    _, err, _ = series_stats(d2)
    scale = e.size / (e.size - 1)
    return float(e.var(ddof=1) / t2), float(err * scale / t2)


def round_trips_per_replica(replica_kn: Any) -> IntArray:
    """Complete round trips of each replica: lowest slot -> highest slot -> lowest slot.

    Parameters
    ----------
    replica_kn : array_like of int, shape (n_iterations, K)
        The replica at each slot after each iteration (a permutation of 0..K-1 per row).

    Returns
    -------
    ndarray of int64, shape (K,)
        Trips of replica r. A trip is counted when the replica reaches slot 0 after having
        visited slot K-1 since its previous visit to slot 0; a replica's first trip starts at
        its first visit to slot 0.
    """
    r = np.asarray(replica_kn)
    if r.ndim != 2 or r.shape[0] == 0:
        return np.zeros(r.shape[1] if r.ndim == 2 else 0, dtype=np.int64)
    n_slots = r.shape[1]
    trips = np.zeros(n_slots, dtype=np.int64)
    if n_slots < 2:
        return trips
    pos = np.argsort(r, axis=1)              # pos[t, rep] = slot of replica rep
    last = np.full(n_slots, -1)              # -1: no extreme yet, 0: bottom, 1: top
    for t in range(r.shape[0]):
        p = pos[t]
        at_bottom = p == 0
        at_top = p == n_slots - 1
        trips += at_bottom & (last == 1)
        last = np.where(at_bottom, 0, np.where(at_top & (last == 0), 1, last))
    return trips


def round_trips(replica_kn: Any) -> int:
    """Complete round trips of replicas across the ladder, summed over replicas.

    ``replica_kn`` has shape (n_iterations, K): the replica at each slot after each iteration.
    A round trip is a replica going from the lowest slot to the highest and back to the lowest
    (see :func:`round_trips_per_replica`).
    """
    return int(round_trips_per_replica(replica_kn).sum())


def swap_table(temperatures: Any, attempted_nk: Any, accepted_nk: Any) -> dict[str, np.ndarray]:
    """Swap acceptance of every adjacent pair of temperatures.

    Parameters
    ----------
    temperatures : array_like, shape (K,), ascending
    attempted_nk, accepted_nk : array_like of int, shape (n_iterations, K-1)
        Attempts and accepted exchanges on pair (k, k+1) at each iteration.

    Returns
    -------
    dict of ndarray, each of shape (K-1,)
        ``t_low``, ``t_high``, ``swap_acceptance`` (accepted / attempts, NaN without attempts),
        ``swap_attempts``, ``swap_accepted``.
    """
    t = np.asarray(temperatures, dtype=np.float64)
    n_pairs = max(t.size - 1, 0)
    att = np.asarray(attempted_nk, dtype=np.int64).reshape(-1, n_pairs).sum(axis=0) \
        if n_pairs else np.zeros(0, dtype=np.int64)
    acc = np.asarray(accepted_nk, dtype=np.int64).reshape(-1, n_pairs).sum(axis=0) \
        if n_pairs else np.zeros(0, dtype=np.int64)
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = np.where(att > 0, acc / np.maximum(att, 1), np.nan)
    return {"t_low": t[:-1].copy(), "t_high": t[1:].copy(),
            "swap_acceptance": rate.astype(np.float64),
            "swap_attempts": att, "swap_accepted": acc}


def stopping_rule(temperatures: Any, values: Any, errors: Any = None, *,
                  n_sigma: float = STOP_SIGMA, patience: int = STOP_PATIENCE
                  ) -> dict[str, float]:
    """The paper's stopping rule along a ladder, from the hottest temperature to the coldest.

    "Cool until the average validation error starts to increase, then revert to the parameters
    with the lowest validation error" (Baldock & Marzari 2019, Sec. 3.4). Walking from
    ``T_max`` down, keep the running minimum ``m`` of ``values`` (NaN values are skipped).
    A temperature is a *rise* when its value exceeds ``m`` by more than
    ``n_sigma * sqrt(err^2 + err_m^2)`` (a NaN error counts as 0, so with ``n_sigma = 0`` or
    without errors any increase is a rise). Cooling stops at the ``patience``-th consecutive
    rise (one noisy point among many temperatures is not an increase of the *average*
    error; ``patience = 1`` stops at the first rise). The result is the temperature of the
    running minimum at that point; if cooling never stops, the minimum over the whole ladder.

    Parameters
    ----------
    temperatures : array_like, shape (K,), ascending
    values : array_like, shape (K,)
        The validation quantity at each temperature (e.g. the mean test error).
    errors : array_like, shape (K,), optional
        Their standard errors.
    n_sigma : float
    patience : int
        Consecutive rises that stop the cooling (>= 1).

    Returns
    -------
    dict of float
        ``temperature`` and ``value`` of the selected point, ``index`` (its slot; NaN if every
        value is NaN), ``stopped_at`` (the temperature where the increase was detected, NaN if
        cooling reached the coldest temperature without stopping): the first of the
        ``patience`` consecutive rises.
    """
    if isinstance(patience, bool) or not isinstance(patience, (int, np.integer)) or patience < 1:
        raise ConfigError(f"patience = {patience!r}; expected an integer >= 1")
    t = np.asarray(temperatures, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
    e = np.zeros_like(v) if errors is None else np.asarray(errors, dtype=np.float64)
    if not (t.shape == v.shape == e.shape) or t.ndim != 1:
        raise ConfigError(f"stopping_rule needs temperatures, values and errors of one shape; "
                          f"got {t.shape}, {v.shape}, {e.shape}")
    e = np.where(np.isfinite(e), e, 0.0)
    best = -1
    stopped = math.nan
    rises: list[int] = []
    for k in range(t.size - 1, -1, -1):
        if not np.isfinite(v[k]):
            continue
        if best < 0 or v[k] < v[best]:
            best = k
            rises.clear()
            continue
        if v[k] - v[best] > n_sigma * math.hypot(e[k], e[best]) and v[k] > v[best]:
            rises.append(k)
            if len(rises) >= patience:
                stopped = float(t[rises[0]])
                break
        else:
            rises.clear()
    if best < 0:
        return {"temperature": math.nan, "value": math.nan, "index": math.nan,
                "stopped_at": math.nan}
    return {"temperature": float(t[best]), "value": float(v[best]), "index": float(best),
            "stopped_at": stopped}


class SampleEvaluation(NamedTuple):
    """Per-sample numbers of one temperature (see :func:`evaluate_samples`)."""

    train_error: FloatArray          #: (S,) fraction misclassified on the training set
    test_energy: FloatArray          #: (S,) E(D_test|w), summed over the test set
    test_error: FloatArray           #: (S,) fraction misclassified on the test set
    predictive_test_energy: float    #: -sum_i ln pbar(t_i | x_i), pbar = mean of softmaxes
    predictive_test_error: float     #: fraction with argmax pbar != t_i


def _log_proba(arch: Any, pot: Any, theta: FloatArray) -> FloatArray:
    """``ln p(q | x_i, w)`` for every point of ``pot``'s data, shape (N, C), float64."""
    if hasattr(pot, "logits"):
        z = pot.logits(theta)
        m = z.max(axis=1, keepdims=True)
        return np.asarray(z - (m + np.log(np.exp(z - m).sum(axis=1, keepdims=True))))
    with np.errstate(divide="ignore"):
        return np.log(np.asarray(arch.predict_proba(theta, pot.x), dtype=np.float64))


def evaluate_samples(arch: Any, theta_sp: Any, *, train: Any = None, test: Any = None,
                     predictive: bool = True, workers: int = 1) -> SampleEvaluation:
    """Evaluate stored parameter vectors of one temperature on the training and test sets.

    For each sample s: the training error, the test energy ``-sum_i ln p(t_i|x_i, w_s)`` (from
    the same forward pass as the class probabilities when the potential has ``logits``, else
    the compiled ``arch.potential(test).energy`` as :func:`thermonet.evaluate`) and the test error (argmax of the
    class probabilities, ties to the lowest class). With ``predictive``, also the Bayesian
    predictive of Neal (1993): ``pbar(q|x) = (1/S) sum_s p(q|x, w_s)``, the average of the
    softmax outputs (not the softmax of averaged logits), accumulated in log space, its test
    energy ``-sum_i ln pbar(t_i|x_i)`` and its test error.

    Parameters
    ----------
    arch : Architecture
        A classifier: ``potential(data)`` and ``predict_proba`` (the potential's ``logits`` is
        used when it has one).
    theta_sp : ndarray, shape (S, n_params)
    train, test : Dataset, optional
        ``.x`` and ``.y``; a missing set gives NaN columns.
    predictive : bool
    workers : int
        Threads over samples. The result is bitwise independent of it (each sample is computed
        alone; the predictive sum runs in sample order).

    Returns
    -------
    SampleEvaluation
    """
    from thermonet.api.parallel import make_executor

    th = np.asarray(theta_sp, dtype=np.float64)
    if th.ndim != 2:
        raise ConfigError(f"theta_sp has shape {th.shape}; expected (n_samples, n_params)")
    n_s = th.shape[0]
    nan_s = np.full(n_s, np.nan)
    pot_train = arch.potential(train) if train is not None and len(train.y) else None
    pot_test = arch.potential(test) if test is not None and len(test.y) else None
    local = threading.local()

    def pots() -> tuple[Any, Any]:
        if not hasattr(local, "pots"):
            local.pots = (None if pot_train is None else pot_train.copy(),
                          None if pot_test is None else pot_test.copy())
        return local.pots  # type: ignore[no-any-return]

    def one(s: int) -> tuple[float, float, float, FloatArray | None]:
        p_tr, p_te = pots()
        theta = np.ascontiguousarray(th[s])
        err_tr = err_te = e_te = math.nan
        logp = None
        if p_tr is not None:
            lp = _log_proba(arch, p_tr, theta)
            err_tr = float(np.mean(np.argmax(lp, axis=1) != train.y))
        if p_te is not None:
            lp = _log_proba(arch, p_te, theta)
            if hasattr(p_te, "logits"):
                # one forward pass: E = -sum_i ln p(t_i|x_i) from the same log-probabilities
                # (equal to the energy kernel's value up to rounding, about 1e-13 relative)
                e_te = -float(np.sum(lp[np.arange(lp.shape[0]), np.asarray(test.y)]))
            else:
                e_te = float(p_te.energy(theta))
            err_te = float(np.mean(np.argmax(lp, axis=1) != test.y))
            if predictive:
                logp = lp
        return err_tr, e_te, err_te, logp

    ex = make_executor(max(1, int(workers)))
    err_tr_s, e_te_s, err_te_s = nan_s.copy(), nan_s.copy(), nan_s.copy()
    acc: FloatArray | None = None
    chunk = 2 * max(1, int(workers))
    try:
        for lo in range(0, n_s, chunk):
            for s, (a, b, c, lp) in zip(range(lo, min(lo + chunk, n_s)),
                                        ex.map(one, range(lo, min(lo + chunk, n_s))),
                                        strict=True):
                err_tr_s[s], e_te_s[s], err_te_s[s] = a, b, c
                if lp is not None:
                    acc = lp.copy() if acc is None else np.logaddexp(acc, lp)
    finally:
        close = getattr(ex, "close", None)
        if close is not None:
            close()
    pe = perr = math.nan
    if acc is not None and test is not None:
        log_pbar = acc - math.log(n_s)
        y = np.asarray(test.y)
        pe = float(-np.sum(log_pbar[np.arange(y.size), y]))
        perr = float(np.mean(np.argmax(log_pbar, axis=1) != y))
    return SampleEvaluation(err_tr_s, e_te_s, err_te_s, pe, perr)


# --- the Analysis -----------------------------------------------------------------------------

def _atomic_write_text(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


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


def _jsonable(v: Any) -> Any:
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, np.ndarray):
        return [_jsonable(x) for x in v.tolist()]
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, (float, np.floating)):
        f = float(v)
        return f if math.isfinite(f) else str(f)
    if isinstance(v, Path):
        return str(v)
    return v


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
        Run, data and window information (JSON-serialisable).
    """

    run_dir: Path
    temperatures: np.ndarray
    table: dict[str, np.ndarray]
    pairs: dict[str, np.ndarray]
    references: dict[str, float]
    best: dict[str, float]
    warnings: list[str] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)

    def to_csv(self, path: str | Path, pairs_path: str | Path | None = None) -> Path:
        """Write the per-temperature table as CSV (atomically); also the pairs if asked.

        Floats are written with full precision (``repr``), missing values as ``nan``.
        """
        path = Path(path)
        _atomic_write_text(path, _csv_text(self.table, TABLE_COLUMNS))
        if pairs_path is not None:
            self.pairs_to_csv(pairs_path)
        return path

    def pairs_to_csv(self, path: str | Path) -> Path:
        """Write the per-pair table as CSV (atomically)."""
        path = Path(path)
        _atomic_write_text(path, _csv_text(self.pairs, PAIR_COLUMNS))
        return path

    def to_hdf5(self, path: str | Path) -> Path:
        """Write everything to one HDF5 file (atomically).

        Layout: ``table/<column>`` (K,), ``pairs/<column>`` (K-1,), ``temperatures``; root
        attributes ``format = "thermonet.analysis"``, ``references``, ``best``, ``meta``
        (JSON strings, non-finite numbers as "nan"/"inf") and ``warnings`` (JSON list).
        Read it back with :func:`read_analysis`.
        """
        path = Path(path)

        def write(fh: Any) -> None:
            fh.attrs["format"] = "thermonet.analysis"
            fh.attrs["format_version"] = 1
            fh.attrs["run_dir"] = str(self.run_dir)
            fh.attrs["references"] = json.dumps(_jsonable(self.references), sort_keys=True)
            fh.attrs["best"] = json.dumps(_jsonable(self.best), sort_keys=True)
            fh.attrs["meta"] = json.dumps(_jsonable(self.meta), sort_keys=True)
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

        ckpt._atomic_h5(path, write)
        return path


def _floats_from_json(d: dict[str, Any]) -> dict[str, float]:
    return {k: float(v) for k, v in d.items()}


def read_analysis(path: str | Path) -> Analysis:
    """Read an :class:`Analysis` written by :meth:`Analysis.to_hdf5`."""
    import h5py

    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"no analysis file at {path}; make one with `thermonet "
                                   "analyse RUN_DIR`")
    try:
        fh = h5py.File(path, "r")
    except OSError as err:
        raise CheckpointFormatError(f"{path} is not a readable HDF5 file ({err})") from None
    with fh:
        if fh.attrs.get("format") != "thermonet.analysis":
            raise CheckpointFormatError(f"{path} is not a thermonet analysis file (format "
                                             f"{fh.attrs.get('format')!r})")
        table = {n: fh["table"][n][()] for n in json.loads(fh["table"].attrs["columns"])}
        pairs = {n: fh["pairs"][n][()] for n in json.loads(fh["pairs"].attrs["columns"])}
        return Analysis(
            run_dir=Path(str(fh.attrs["run_dir"])),
            temperatures=fh["temperatures"][()],
            table=table, pairs=pairs,
            references=_floats_from_json(json.loads(fh.attrs["references"])),
            best=_floats_from_json(json.loads(fh.attrs["best"])),
            warnings=list(json.loads(fh.attrs["warnings"])),
            meta=json.loads(fh.attrs["meta"]))


# --- reading a run ----------------------------------------------------------------------------

class _SampleStore:
    """Stored parameter vectors of a run, read one temperature (slot) at a time."""

    def __init__(self, run_dir: Path, run_uuid: str, last_iteration: int) -> None:
        import h5py

        self.parts: list[tuple[Path, np.ndarray]] = []
        its: list[np.ndarray] = []
        for _, _, path in ckpt.list_segments(run_dir):
            try:
                fh = h5py.File(path, "r")
            except OSError as err:
                raise CheckpointFormatError(f"trace segment {path} is unreadable "
                                                 f"({err})") from None
            with fh:
                if fh.attrs.get("run_uuid") != run_uuid or "samples" not in fh:
                    continue
                it = fh["samples/iteration"][()]
                self.parts.append((path, it))
                its.append(it)
        self.iterations = np.concatenate(its) if its else np.zeros(0, np.int64)
        self.last_iteration = last_iteration

    def select(self, first: int) -> np.ndarray:
        """Iterations of the samples in ``[first, last_iteration]``."""
        it = self.iterations
        return it[(it >= first) & (it <= self.last_iteration)]

    def slot(self, k: int, first: int) -> np.ndarray:
        """Parameters at slot k of the samples in ``[first, last_iteration]``, (S, P)."""
        import h5py

        rows = []
        for path, it in self.parts:
            idx = np.flatnonzero((it >= first) & (it <= self.last_iteration))
            if idx.size == 0:
                continue
            with h5py.File(path, "r") as fh:
                ds = fh["samples/theta"]
                rows.append(np.asarray(ds[idx.tolist(), k, :], dtype=np.float64))
        if not rows:
            return np.zeros((0, 0))
        return np.concatenate(rows)


def _read_baseline(path: str | Path, arch: Any, split: Any, workers: int,
                   warnings: list[str]) -> dict[str, float]:
    """Reference numbers from a `thermonet baseline` result: its JSON summary (``--json``
    output) or its saved minima (``--out``, an (n_kept, n_params) .npy array, evaluated here on
    the run's test set); a directory is searched for ``baseline.json`` then ``baseline.npy``."""
    p = Path(path)
    if p.is_dir():
        for name in ("baseline.json", "baseline.npy"):
            if (p / name).is_file():
                p = p / name
                break
        else:
            raise ConfigError(f"--baseline {path} is a directory without baseline.json or "
                              "baseline.npy; expected the JSON of `thermonet baseline --json` or "
                              "the .npy of `thermonet baseline --out`")
    if not p.is_file():
        raise ConfigError(f"--baseline {path} does not exist; expected the JSON printed by "
                          "`thermonet baseline --json` (saved to a file) or the .npy written by "
                          "`thermonet baseline --out`")
    if p.suffix == ".npy":
        try:
            minima = np.load(p, allow_pickle=False)
        except (OSError, ValueError) as err:
            raise ConfigError(f"--baseline {p} is not a readable .npy file ({err})") from None
        if arch is None or split is None:
            raise ConfigError(f"--baseline {p} holds parameter vectors, which need the run's "
                              "architecture and test set; this run has no data")
        if minima.ndim != 2 or minima.shape[1] != arch.n_params or minima.shape[0] == 0:
            raise ConfigError(f"--baseline {p} has shape {minima.shape}; expected (n_kept, "
                              f"{arch.n_params}) minima of this run's architecture")
        ev = evaluate_samples(arch, minima, test=split.test, predictive=False, workers=workers)
        n_test = len(split.test.y)
        e = ev.test_energy / n_test
        k = minima.shape[0]
        sem = (lambda a: float(np.std(a, ddof=1) / math.sqrt(k)) if k > 1 else math.nan)
        return {"baseline_test_energy_per_point": float(e.mean()),
                "baseline_test_energy_per_point_err": sem(e),
                "baseline_test_error": float(ev.test_error.mean()),
                "baseline_test_error_err": sem(ev.test_error),
                "baseline_n_kept": float(k)}
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
        out = {"baseline_test_energy_per_point": doc["test_energy_per_point_mean"],
               "baseline_test_energy_per_point_err": doc["test_energy_per_point_sem"],
               "baseline_test_error": doc["test_error_mean"],
               "baseline_test_error_err": doc["test_error_sem"],
               "baseline_n_kept": doc["n_kept"]}
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as err:
        raise ConfigError(f"--baseline {p} is not the JSON of `thermonet baseline --json` "
                          f"({type(err).__name__}: {err}); expected keys "
                          "test_energy_per_point_mean, test_error_mean, ...") from None
    if split is not None:
        n_test, kind = len(split.test.y), getattr(split, "test_kind", None)
        if doc.get("n_test") not in (None, n_test) or doc.get("test_kind") not in (None, kind):
            warnings.append(f"the baseline was evaluated on a different test set "
                            f"({doc.get('test_kind')}, {doc.get('n_test')} images) than this "
                            f"analysis ({kind}, {n_test} images); its lines are not comparable")
        n_train = len(split.train.y)
        if doc.get("n_train") not in (None, n_train):
            warnings.append(f"the baseline was trained on {doc.get('n_train')} images; this run "
                            f"on {n_train}")
    return {k: (math.nan if v is None else float(v)) for k, v in out.items()}


def _build_model(cfg_toml: str, mnist_dir: str | None) -> tuple[Any, Any, Any]:
    """(architecture, data split or None, resolved config) of a run."""
    import tomllib

    from thermonet import config as cfgmod
    from thermonet import registry

    cfg = cfgmod.resolve(tomllib.loads(cfg_toml))
    settings = {k: (list(v) if isinstance(v, tuple) else v)
                for k, v in cfg["architecture"].items() if k != "name"}
    arch = registry.load("architecture", cfg["architecture"]["name"])(**settings)
    split = None
    if cfg["data"]["name"] != "none":
        from thermonet.data import load_data

        split = load_data(cfg["data"]["name"], test=cfg["data"]["test"], mnist_dir=mnist_dir)
    return arch, split, cfg


def analyse(run_dir: str | Path, *, discard: float | None = None, test: bool = True,
            baseline: str | Path | None = None, predictive: bool = True, workers: int = 1,
            swap_threshold: float = SWAP_WARN_THRESHOLD, stop_sigma: float = STOP_SIGMA,
            stop_patience: int = STOP_PATIENCE,
            mnist_dir: str | None = None) -> Analysis:
    """Analyse a run directory: per temperature, averages with error bars and test-set
    performance; reference lines; the temperature of best generalisation; ladder health.

    Parameters
    ----------
    run_dir : path
        A directory made by ``thermonet run`` (it is only read).
    discard : float, optional
        Fraction of the recorded iterations discarded as burn-in (default: the run's
        ``run.discard``, 0.2). Applies to the trace and to the stored samples.
    test : bool
        Evaluate the stored samples on the test set (the expensive part).
    baseline : path, optional
        A ``thermonet baseline`` result: the JSON of ``--json`` (saved to a file), or the
        ``--out`` .npy of its minima (evaluated here on the run's test set).
    predictive : bool
        Also the Bayesian predictive (average of the samples' softmax outputs).
    workers : int
        Threads over stored samples; the result does not depend on it.
    swap_threshold : float
        Pairs with a lower swap acceptance get a warning.
    stop_sigma : float
        Significance of an increase in the stopping rule (:func:`stopping_rule`).
    mnist_dir : str, optional
        Directory of the MNIST files (for the complement test set).

    Returns
    -------
    Analysis
    """
    import tomllib

    run_dir = Path(run_dir)
    if not run_dir.exists():
        raise CheckpointError(f"{run_dir} does not exist; expected a run directory made by "
                                   "`thermonet run`")
    if isinstance(workers, bool) or not isinstance(workers, (int, np.integer)) or workers < 1:
        raise ConfigError(f"workers = {workers!r}; expected an integer >= 1")
    if baseline is not None and not Path(baseline).exists():   # fail before loading any data
        raise ConfigError(f"--baseline {baseline} does not exist; expected the JSON printed by "
                          "`thermonet baseline --json` (saved to a file) or the .npy written by "
                          "`thermonet baseline --out`")
    ck = ckpt.read_checkpoint(run_dir)
    tr = ckpt.read_trace(run_dir, run_uuid=ck.run_uuid)
    try:
        cfg_raw = tomllib.loads(ck.config_toml)
    except tomllib.TOMLDecodeError as err:
        raise CheckpointFormatError(f"the configuration stored in {run_dir} is not valid "
                                         f"TOML ({err})") from None
    run_cfg = cfg_raw.get("run", {})
    if discard is None:
        discard = float(run_cfg.get("discard", 0.2))
    if not (isinstance(discard, (int, float)) and 0 <= discard < 1):
        raise ConfigError(f"discard = {discard!r}; expected a fraction in [0, 1), e.g. 0.2")
    warnings: list[str] = []
    temps = np.asarray(ck.temperatures, dtype=np.float64)
    k_n = temps.size
    # rows beyond the checkpoint (left by a crash, trimmed on resume) are not part of the run
    its = np.asarray(tr.get("iteration", np.zeros(0, np.int64)))
    keep_rows = its <= ck.iteration
    tr = {name: np.asarray(a)[keep_rows] for name, a in tr.items()}
    n = int(keep_rows.sum())
    start = math.floor(discard * n)
    sl = slice(start, n)
    n_used = n - start
    first_it = int(tr["iteration"][start]) if n_used > 0 else ck.iteration + 1
    sampler = cfg_raw.get("sampler", {})
    n_traj = int(cfg_raw.get("ladder", sampler).get("n_trajectories", 1))
    nan_k = np.full(k_n, np.nan)
    table: dict[str, np.ndarray] = {c: nan_k.copy() for c in TABLE_COLUMNS}
    table["temperature"] = temps.copy()
    table["n_samples"] = np.zeros(k_n, dtype=np.int64)
    if n == 0:
        warnings.append(f"{run_dir} has no recorded iterations yet; continue it with "
                        f"`thermonet resume {run_dir}`")
    if n_used > 0:
        e_nk = np.asarray(tr["energy_k"], dtype=np.float64)[sl]
        table["acceptance"] = tr["n_accepted_k"][sl].sum(axis=0) / (n_used * n_traj)
        table["dt"] = np.asarray(tr["step_size_k"], dtype=np.float64)[sl].mean(axis=0)
        short = []
        for k in range(k_n):
            m, err, tau = series_stats(e_nk[:, k])
            table["train_energy"][k], table["train_energy_err"][k] = m, err
            table["tau_train_energy"][k] = tau
            c, cerr = heat_capacity(e_nk[:, k], temps[k])
            table["heat_capacity"][k], table["heat_capacity_err"][k] = c, cerr
            if np.isfinite(tau) and n_used < MIN_TAU_MULTIPLE * tau:
                short.append(float(temps[k]))
        if short:
            warnings.append(f"at {len(short)} of {k_n} temperatures (T = "
                            f"{', '.join(f'{t:.4g}' for t in short[:6])}"
                            f"{', ...' if len(short) > 6 else ''}) the {n_used} iterations "
                            f"used are fewer than {MIN_TAU_MULTIPLE:g} autocorrelation times "
                            "of the training energy; its error bars are rough")
    gaussian = cfg_raw.get("prior", {}).get("gaussian_std") is not None
    if gaussian:
        warnings.append("this run has a Gaussian prior: the trace energies (train_energy, "
                        "heat_capacity) include its term; the test energies do not")

    # samples: train/test errors, test energies, the predictive
    store = _SampleStore(run_dir, ck.run_uuid, ck.iteration)
    used_its = store.select(first_it)
    n_s = int(used_its.size)
    table["n_samples"][:] = n_s
    data_name = cfg_raw.get("data", {}).get("name", "none")
    arch = split = None
    meta: dict[str, Any] = {}
    if data_name != "none":
        arch, split, _ = _build_model(ck.config_toml, mnist_dir)
    n_train = len(split.train.y) if split is not None else 0
    n_test = len(split.test.y) if split is not None else 0
    if split is not None and n_train:
        table["train_energy_per_point"] = table["train_energy"] / n_train
        table["train_energy_per_point_err"] = table["train_energy_err"] / n_train
    if n_s == 0 and n_used > 0:
        warnings.append("no stored parameter samples after the discarded part (run."
                        f"sample_every = {run_cfg.get('sample_every')}); the error and test "
                        "columns are NaN")
    elif 0 < n_s < MIN_SAMPLES and split is not None:
        warnings.append(f"only {n_s} stored samples per temperature after discard; the test "
                        "and error columns have rough error bars")
    if split is not None and n_s > 0:
        for k in range(k_n):
            theta = store.slot(k, first_it)
            ev = evaluate_samples(arch, theta, train=split.train,
                                  test=split.test if test else None,
                                  predictive=predictive and test, workers=workers)
            m, err, _ = series_stats(ev.train_error)
            table["train_error"][k], table["train_error_err"][k] = m, err
            if test:
                m, err, _ = series_stats(ev.test_energy)
                table["test_energy"][k], table["test_energy_err"][k] = m, err
                m, err, _ = series_stats(ev.test_error)
                table["test_error"][k], table["test_error_err"][k] = m, err
                if predictive:
                    table["predictive_test_energy_per_point"][k] = \
                        ev.predictive_test_energy / n_test
                    table["predictive_test_error"][k] = ev.predictive_test_error
        if n_test:
            table["test_energy_per_point"] = table["test_energy"] / n_test
            table["test_energy_per_point_err"] = table["test_energy_err"] / n_test

    # ladder health
    if k_n > 1 and n_used > 0:
        pairs = swap_table(temps, tr["swap_attempted_k"][sl], tr["swap_accepted_k"][sl])
    else:
        pairs = swap_table(temps, np.zeros((0, max(k_n - 1, 0))), np.zeros((0, max(k_n - 1, 0))))
    trips = (round_trips_per_replica(tr["replica_k"]) if n > 0
             else np.zeros(k_n, dtype=np.int64))
    if k_n > 1 and n_used > 0:
        low = [(float(a), float(b), float(r)) for a, b, r in
               zip(pairs["t_low"], pairs["t_high"], pairs["swap_acceptance"], strict=True)
               if not (r >= swap_threshold)]
        if low:
            listed = "; ".join(f"T = {a:.4g}-{b:.4g}: {100 * r:.1f}%" for a, b, r in low[:6])
            warnings.append(f"{len(low)} of {k_n - 1} adjacent pairs have swap acceptance "
                            f"below {100 * swap_threshold:g}% ({listed}"
                            f"{'; ...' if len(low) > 6 else ''}); the ladder may not mix: add "
                            "temperatures there")
        if trips.sum() == 0:
            warnings.append(f"no replica completed a round trip T_min -> T_max -> T_min in "
                            f"{n} iterations; the ladder has not mixed, so temperatures may "
                            "not be sampled in equilibrium")

    # references and the best temperature
    n_classes = int(getattr(arch, "widths", [0, 10])[-1]) if arch is not None else 10
    references = {"uninformed_per_point": math.log(n_classes),
                  "uninformed_error": 1.0 - 1.0 / n_classes,
                  "baseline_test_energy_per_point": math.nan,
                  "baseline_test_energy_per_point_err": math.nan,
                  "baseline_test_error": math.nan, "baseline_test_error_err": math.nan,
                  "baseline_n_kept": math.nan}
    if baseline is not None:
        references.update(_read_baseline(baseline, arch, split, workers, warnings))
    best = _best(temps, table, stop_sigma, stop_patience)

    meta.update({
        "run_dir": str(run_dir), "run_uuid": ck.run_uuid,
        "thermonet_version": ck.thermonet_version,
        "architecture": (arch.describe() if arch is not None
                         else cfg_raw.get("architecture", {})),
        "data": data_name,
        "test_set": getattr(split.test, "name", None) if split is not None else None,
        "test_kind": getattr(split, "test_kind", None) if split is not None else None,
        "n_train": n_train, "n_test": n_test, "n_classes": n_classes,
        "iterations": ck.iteration, "discard": float(discard),
        "discarded_iterations": start, "iterations_used": n_used,
        "first_iteration_used": first_it if n_used > 0 else None,
        "sample_iterations_used": [int(i) for i in used_its],
        "n_samples": n_s, "n_trajectories": n_traj,
        "round_trips": int(trips.sum()),
        "round_trips_per_replica": [int(v) for v in trips],
        "swap_warn_threshold": float(swap_threshold), "stop_sigma": float(stop_sigma),
        "stop_patience": int(stop_patience),
        "test": bool(test), "predictive": bool(predictive and test),
        "gaussian_prior": gaussian,
        "baseline": None if baseline is None else str(baseline),
    })
    return Analysis(run_dir, temps, table, pairs, references, best, warnings, meta)


def _best(temps: FloatArray, table: dict[str, np.ndarray], stop_sigma: float,
          stop_patience: int = STOP_PATIENCE) -> dict[str, float]:
    def argmin(col: str) -> tuple[float, float]:
        v = table[col]
        if not np.any(np.isfinite(v)):
            return math.nan, math.nan
        k = int(np.nanargmin(v))
        return float(temps[k]), float(v[k])

    out: dict[str, float] = {}
    out["min_test_error_temperature"], out["min_test_error"] = argmin("test_error")
    out["min_test_energy_temperature"], out["min_test_energy_per_point"] = \
        argmin("test_energy_per_point")
    out["min_predictive_test_error_temperature"], out["min_predictive_test_error"] = \
        argmin("predictive_test_error")
    out["min_predictive_test_energy_temperature"], out["min_predictive_test_energy_per_point"] \
        = argmin("predictive_test_energy_per_point")
    rule = stopping_rule(temps, table["test_error"], table["test_error_err"], n_sigma=stop_sigma,
                         patience=stop_patience)
    out["stopping_temperature"] = rule["temperature"]
    out["stopping_test_error"] = rule["value"]
    out["stopping_index"] = rule["index"]
    out["stopping_stopped_at"] = rule["stopped_at"]
    return out


# --- thermonet info ---------------------------------------------------------------------------

def summarise(run_dir: str | Path) -> dict[str, Any]:
    """The ``thermonet info`` summary of a run directory (JSON-serialisable)."""
    import tomllib

    run_dir = Path(run_dir)
    ck = ckpt.read_checkpoint(run_dir)
    tr = ckpt.read_trace(run_dir, run_uuid=ck.run_uuid)
    cfg = tomllib.loads(ck.config_toml)
    n = int(tr["iteration"].shape[0]) if "iteration" in tr else 0
    discard = float(cfg.get("run", {}).get("discard", 0.2))
    start = int(np.floor(discard * n))
    sl = slice(start, n)
    k = len(ck.temperatures)
    sampler = cfg.get("sampler", {})
    n_traj = int(cfg.get("ladder", sampler).get("n_trajectories", 1))
    out: dict[str, Any] = {
        "run_dir": str(run_dir),
        "run_uuid": ck.run_uuid,
        "iterations": ck.iteration,
        "n_iterations": int(cfg.get("run", {}).get("n_iterations", ck.iteration)),
        "discarded_iterations": start,
        "temperatures": [float(t) for t in ck.temperatures],
        "dt": [float(v) for v in np.atleast_1d(ck.slots["step_size"])],
        "elapsed_s": float(ck.counters.get("elapsed_s", 0.0)),
        "architecture": cfg.get("architecture", {}).get("name"),
        "data": cfg.get("data", {}).get("name"),
        "sampler": sampler.get("name"),
    }
    if n - start > 0:
        acc = tr["n_accepted_k"][sl].sum(axis=0) / ((n - start) * n_traj)
        out["acceptance"] = [float(a) for a in acc]
        out["mean_energy"] = [float(e) for e in tr["energy_k"][sl].mean(axis=0)]
        out["divergences"] = int(tr["n_divergent_k"].sum())
    else:
        out["acceptance"] = [float("nan")] * k
        out["mean_energy"] = [float("nan")] * k
        out["divergences"] = 0
    if k > 1 and n > 0:
        att = tr["swap_attempted_k"].sum(axis=0)
        accd = tr["swap_accepted_k"].sum(axis=0)
        out["swap_acceptance"] = [float(a / b) if b else float("nan")
                                  for a, b in zip(accd, att, strict=True)]
        out["round_trips"] = round_trips(tr["replica_k"])
    else:
        out["swap_acceptance"] = []
        out["round_trips"] = 0
    return out


__all__ = [
    "PAIR_COLUMNS",
    "STOP_PATIENCE",
    "STOP_SIGMA",
    "SWAP_WARN_THRESHOLD",
    "TABLE_COLUMNS",
    "Analysis",
    "SampleEvaluation",
    "analyse",
    "evaluate_samples",
    "heat_capacity",
    "read_analysis",
    "round_trips",
    "round_trips_per_replica",
    "series_stats",
    "stopping_rule",
    "summarise",
    "swap_table",
]
