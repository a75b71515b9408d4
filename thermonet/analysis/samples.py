"""Evaluation of stored parameter samples: energies, errors and the Bayesian predictive on
training and test data, threaded over samples."""

from __future__ import annotations

import math
import threading
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from thermonet.errors import CheckpointFormatError, ConfigError, IntegrityError
from thermonet.io.trace import list_segments
from thermonet.parallel import LOCAL, World, executor_in
from thermonet.types import FloatArray


class SampleEvaluation(NamedTuple):
    """Per-sample numbers of one temperature (see :func:`evaluate_samples`). For a regression
    data set the errors are squared errors (summed over the outputs, averaged over the cases)
    and the energies NaN (they need the noise level, which the samples do not store)."""

    train_error: FloatArray          #: (S,) fraction misclassified on the training set
    test_energy: FloatArray          #: (S,) E(D_test|w), summed over the test set
    test_error: FloatArray           #: (S,) fraction misclassified on the test set
    predictive_test_energy: float    #: -sum_i ln pbar(t_i | x_i), pbar = mean of softmaxes
    predictive_test_error: float     #: fraction with argmax pbar != t_i


def log_proba(arch: Any, pot: Any, theta: FloatArray) -> FloatArray:
    """``ln p(q | x_i, w)`` for every point of ``pot``'s data, shape (N, C), float64."""
    if hasattr(pot, "logits"):
        z = pot.logits(theta)
        m = z.max(axis=1, keepdims=True)
        return np.asarray(z - (m + np.log(np.exp(z - m).sum(axis=1, keepdims=True))))
    with np.errstate(divide="ignore"):
        return np.log(np.asarray(arch.predict_proba(theta, pot.x), dtype=np.float64))


def evaluate_samples(arch: Any, theta_sp: Any, *, train: Any = None, test: Any = None,
                     predictive: bool = True, workers: int = 1,
                     world: World | None = None) -> SampleEvaluation:
    """Evaluate stored parameter vectors of one temperature on the training and test sets.

    For each sample s: the training error, the test energy ``-sum_i ln p(t_i|x_i, w_s)`` (from
    the same forward pass as the class probabilities when the potential has ``logits``, else
    the compiled ``arch.potential(test).energy`` as :func:`thermonet.evaluate`) and the test error
    (argmax of the class probabilities, ties to the lowest class). With ``predictive``, also the
    Bayesian predictive of Neal (1993): ``pbar(q|x) = (1/S) sum_s p(q|x, w_s)``, the average of the
    softmax outputs (not the softmax of averaged logits), accumulated in log space, its test energy
    ``-sum_i ln pbar(t_i|x_i)`` and its test error.

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
    world : World, optional
        The processes sharing the samples (in blocks per rank under MPI, every rank getting
        every result: bitwise the one-process result). Default: this process alone.

    Returns
    -------
    SampleEvaluation
    """
    th = np.asarray(theta_sp, dtype=np.float64)
    if th.ndim != 2:
        raise ConfigError(f"theta_sp has shape {th.shape}; expected (n_samples, n_params)")
    if any(getattr(d, "task", None) == "regression" for d in (train, test) if d is not None):
        return evaluate_regression(arch, th, train=train, test=test, predictive=predictive)
    n_s = th.shape[0]
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
            lp = log_proba(arch, p_tr, theta)
            err_tr = float(np.mean(np.argmax(lp, axis=1) != train.y))
        if p_te is not None:
            lp = log_proba(arch, p_te, theta)
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

    nan_s = np.full(n_s, np.nan)
    err_tr_s, e_te_s, err_te_s = nan_s.copy(), nan_s.copy(), nan_s.copy()
    acc = _collect(one, n_s, (err_tr_s, e_te_s, err_te_s), workers, world)
    pe = perr = math.nan
    if acc is not None and test is not None:
        log_pbar = acc - math.log(n_s)
        y = np.asarray(test.y)
        pe = float(-np.sum(log_pbar[np.arange(y.size), y]))
        perr = float(np.mean(np.argmax(log_pbar, axis=1) != y))
    return SampleEvaluation(err_tr_s, e_te_s, err_te_s, pe, perr)


def _collect(one: Any, n_s: int, columns: tuple[FloatArray, ...], workers: int,
             world: World | None) -> FloatArray | None:
    """Run ``one`` over the samples in order (threads or ranks), filling ``columns`` with its
    three numbers per sample; return the log-sum of its log-probabilities (None if none)."""
    ex = executor_in(LOCAL if world is None else world, max(1, int(workers)))
    acc: FloatArray | None = None
    chunk = 2 * ex.n_workers
    try:
        for lo in range(0, n_s, chunk):
            for s, (a, b, c, lp) in zip(range(lo, min(lo + chunk, n_s)),
                                        ex.map(one, range(lo, min(lo + chunk, n_s))),
                                        strict=True):
                columns[0][s], columns[1][s], columns[2][s] = a, b, c
                if lp is not None:
                    acc = lp.copy() if acc is None else np.logaddexp(acc, lp)
    finally:
        close = getattr(ex, "close", None)
        if close is not None:
            close()
    return acc


def squared_error(f: FloatArray, y: FloatArray) -> float:
    """Squared error summed over the outputs, averaged over the cases (Neal 1993's measure of
    the robot arm: its floor is the noise variance times the number of outputs)."""
    return float(np.mean(np.sum((np.asarray(f) - np.asarray(y)) ** 2, axis=1)))


def evaluate_regression(arch: Any, theta_sp: FloatArray, *, train: Any = None,
                        test: Any = None, predictive: bool = True) -> SampleEvaluation:
    """:func:`evaluate_samples` for real-valued targets: per sample the training and test
    squared errors (:func:`squared_error`) of the network's outputs ``arch.predict(w, x)``;
    with ``predictive``, the squared error of the averaged outputs (the Bayesian predictive
    mean, Neal 1993) in ``predictive_test_error``. Energies are NaN: ``-ln p(D_test|w)``
    needs the noise level of each sample, which the stored samples do not carry. Standardised
    data (``[data] standardise``) are scored in the data file's units."""
    from thermonet.data import to_original_units

    n_s = theta_sp.shape[0]
    nan_s = np.full(n_s, np.nan)
    err_tr, err_te = nan_s.copy(), nan_s.copy()
    mean_out: FloatArray | None = None
    y_te: FloatArray | None = None
    for s in range(n_s):
        theta = np.ascontiguousarray(theta_sp[s])
        if train is not None and len(train.y):
            err_tr[s] = squared_error(*to_original_units(train, arch.predict(theta, train.x)))
        if test is not None and len(test.y):
            f, y_te = to_original_units(test, arch.predict(theta, test.x))
            err_te[s] = squared_error(f, y_te)
            if predictive:
                mean_out = f.copy() if mean_out is None else mean_out + f
    perr = math.nan
    if mean_out is not None and y_te is not None:
        perr = squared_error(mean_out / n_s, y_te)
    return SampleEvaluation(err_tr, nan_s.copy(), err_te, math.nan, perr)


class SampleStore:
    """Stored parameter vectors of a run, read one temperature (slot) at a time."""

    def __init__(self, run_dir: Path, run_uuid: str, last_iteration: int) -> None:
        import h5py

        self.parts: list[tuple[Path, np.ndarray]] = []
        its: list[np.ndarray] = []
        for _, _, path in list_segments(run_dir):
            try:
                fh = h5py.File(path, "r")
            except OSError as err:
                raise CheckpointFormatError(f"trace segment {path} is unreadable "
                                                 f"({err})") from None
            with fh:
                if fh.attrs.get("run_uuid") != run_uuid:
                    raise IntegrityError(
                        f"trace segment {path} belongs to another run (run id "
                        f"{fh.attrs.get('run_uuid')!r}, this run {run_uuid!r}); move it out of "
                        f"{run_dir / 'trace'}")
                if "samples" not in fh:
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
