"""The paper's "standard optimisation" baseline (Baldock & Marzari 2019, Sec. 3.4).

Draw many initial parameter vectors from the standard initialisation
``w_i ~ U(-1/sqrt(k_i), +1/sqrt(k_i))``, minimise ``E(D|w)`` from each with Algorithm 3
(:class:`thermonet.minimisers.rmin.RMin`), keep the minima with ``E(D|w) = 0`` (or the
lowest-energy ones), and report the mean test energy per data point and the mean test error
of the kept vectors, with their standard errors. This is the "standard optimisation" line of
the paper's Fig. 3: 100 vectors with E = 0 for D50 and D500, and for D5000 the 100 best of
4000 minimisations.

"E = 0" in float64
------------------
The paper's code computed E in float32, where the summed cross-entropy underflows to exactly
0.0 once every training point's loss is below about 2^-24 ~ 6e-8. In float64 E never reaches
0 (the paper's own minima have E = 4.5e-9 and 9.3e-6 in float64). thermonet therefore calls
a minimum "E = 0" when ``E(D|w) < energy_threshold`` with the default
:data:`ZERO_ENERGY_THRESHOLD` = 1e-3 nats, summed over the training set. Below it every
training point has probability > 0.999 for its label (so the training error is exactly 0),
and the baseline's default minimiser, RMin with ``grad_tol = 1e-5``
(:data:`BASELINE_RMIN_SETTINGS`), ends every minimisation that reaches the E = 0 basin at
E ~ 1e-5 to 6e-5. The test energy of the kept minima grows as they get deeper (the weights
grow), while the test error barely changes; docs/minimisers.md quantifies this. To emulate the
float32 criterion use ``energy_threshold = N * 2**-24`` with a much tighter ``grad_tol``.

Reproducibility
---------------
Draw ``i`` uses its own generator ``np.random.default_rng(SeedSequence(seed).spawn(n)[i])``
and every kernel is deterministic, so the results are bitwise identical for any number of
``workers`` and ranks. Workers are threads: the energy kernels release the GIL, and each thread
owns its own ``potential.copy()``. Under MPI (``world``) each rank minimises a contiguous block
of the draws on its own threads and the results are gathered on every rank.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from thermonet.api import Architecture, Minimiser
from thermonet.api.minimiser import accepts_callback
from thermonet.errors import ConfigError
from thermonet.evaluation import classification_error
from thermonet.parallel import LOCAL, World
from thermonet.priors import BoxPrior
from thermonet.types import FloatArray, IntArray

logger = logging.getLogger(__name__)

#: "E(D|w) = 0" means E(D|w) < this (nats, summed over the training set); see the module docs
ZERO_ENERGY_THRESHOLD = 1e-3

#: settings of the default minimiser, RMin: a budget far above the ~1e4 steps M3 needs on D500
#: from the standard initialisation, and a gradient tolerance that ends every minimisation
#: reaching the E = 0 basin at E ~ 1e-5 to 6e-5, well below ZERO_ENERGY_THRESHOLD (with
#: RMin's default 1e-4, E ends at 1e-4 to 1.2e-3 and can miss the threshold)
BASELINE_RMIN_SETTINGS: dict[str, Any] = {"max_steps": 50_000, "grad_tol": 1e-5}

BoolArray = npt.NDArray[np.bool_]


class _Draw(NamedTuple):
    """One minimisation's numbers (the minimum itself only with keep_params)."""

    draw_index: int
    train_energy: float
    train_error: float
    test_energy_per_point: float
    test_error: float
    n_steps: int
    n_grad_evals: int
    max_abs_grad: float
    reason: str
    theta: FloatArray | None


def default_minimiser() -> Minimiser:
    """RMin (the paper's Algorithm 3) with :data:`BASELINE_RMIN_SETTINGS`."""
    from thermonet import registry

    cls = registry.load("minimiser", "rmin")
    return cls(**BASELINE_RMIN_SETTINGS)  # type: ignore[no-any-return]


@dataclass(frozen=True, eq=False)
class BaselineResult:
    """Outcome of :func:`standard_optimisation`. Arrays have one entry per draw, in draw order.

    Attributes
    ----------
    train_energy : ndarray of float64, shape (n_draws,)
        ``E(D_train|w)`` at each minimum, summed over the training set (nats).
    train_error : ndarray of float64, shape (n_draws,)
        Training classification error (fraction).
    test_energy_per_point : ndarray of float64, shape (n_draws,)
        ``E(D_test|w) / N_test``.
    test_error : ndarray of float64, shape (n_draws,)
        Test classification error (fraction).
    n_steps, n_grad_evals : ndarray of int64, shape (n_draws,)
    max_abs_grad : ndarray of float64, shape (n_draws,)
    reason : tuple of str, length n_draws
        Why each minimisation stopped.
    kept : ndarray of bool, shape (n_draws,)
        The draws entering the means.
    test_energy_mean, test_energy_sem : float
        Mean of ``test_energy_per_point`` over the kept draws and its standard error
        (``std(ddof=1)/sqrt(n_kept)``; NaN with fewer than two kept draws).
    test_error_mean, test_error_sem : float
        The same for ``test_error``.
    energy_threshold : float or None
        "E = 0" threshold used for keeping (None: the ``n_keep`` lowest energies were kept).
    n_keep : int or None
    train_set, test_set, test_kind : str
        Data set names; ``test_kind`` is "complement" or "official".
    n_train, n_test : int
    seed : int
    minimiser : str
        Name of the minimiser.
    minimiser_config : dict
        Its settings.
    architecture : dict
        ``arch.describe()``.
    params : ndarray of float64, shape (n_kept, n_params), or None
        The kept minima (with ``keep_params=True``).
    """

    train_energy: FloatArray
    train_error: FloatArray
    test_energy_per_point: FloatArray
    test_error: FloatArray
    n_steps: IntArray
    n_grad_evals: IntArray
    max_abs_grad: FloatArray
    reason: tuple[str, ...]
    kept: BoolArray
    test_energy_mean: float
    test_energy_sem: float
    test_error_mean: float
    test_error_sem: float
    energy_threshold: float | None
    n_keep: int | None
    train_set: str
    test_set: str
    test_kind: str
    n_train: int
    n_test: int
    seed: int
    minimiser: str
    minimiser_config: dict[str, Any] = field(default_factory=dict)
    architecture: dict[str, Any] = field(default_factory=dict)
    params: FloatArray | None = None

    @property
    def n_draws(self) -> int:
        return int(self.train_energy.shape[0])

    @property
    def n_kept(self) -> int:
        return int(np.count_nonzero(self.kept))

    def summary(self) -> dict[str, Any]:
        """A JSON-serialisable dict: the settings, the means and the per-draw arrays."""
        def num(v: float) -> float | None:
            return None if not math.isfinite(v) else float(v)

        reasons: dict[str, int] = {}
        for r in self.reason:
            reasons[r] = reasons.get(r, 0) + 1
        return {
            "architecture": self.architecture,
            "minimiser": self.minimiser,
            "minimiser_config": {k: _jsonable(v) for k, v in self.minimiser_config.items()},
            "train_set": self.train_set, "n_train": self.n_train,
            "test_set": self.test_set, "n_test": self.n_test, "test_kind": self.test_kind,
            "seed": self.seed, "n_draws": self.n_draws, "n_kept": self.n_kept,
            "energy_threshold": self.energy_threshold, "n_keep": self.n_keep,
            "test_energy_per_point_mean": num(self.test_energy_mean),
            "test_energy_per_point_sem": num(self.test_energy_sem),
            "test_error_mean": num(self.test_error_mean),
            "test_error_sem": num(self.test_error_sem),
            "reasons": reasons,
            "draws": {
                "train_energy": [num(v) for v in self.train_energy],
                "train_error": [num(v) for v in self.train_error],
                "test_energy_per_point": [num(v) for v in self.test_energy_per_point],
                "test_error": [num(v) for v in self.test_error],
                "n_steps": [int(v) for v in self.n_steps],
                "max_abs_grad": [num(v) for v in self.max_abs_grad],
                "reason": list(self.reason),
                "kept": [bool(v) for v in self.kept],
            },
        }


def _jsonable(v: Any) -> Any:
    """Non-finite floats as the strings "inf", "-inf", "nan" (JSON has no such numbers)."""
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    return v


def select_kept(train_energy: FloatArray, *, n_keep: int | None = None,
                energy_threshold: float | None = None) -> BoolArray:
    """Which draws to keep.

    ============================  ==========================================================
    arguments                     kept draws
    ============================  ==========================================================
    neither                       ``E < ZERO_ENERGY_THRESHOLD`` (every "E = 0" minimum)
    ``energy_threshold`` only     ``E < energy_threshold``
    ``n_keep`` only               the ``n_keep`` lowest finite energies (ties: earlier draw)
    both                          the *first* ``n_keep`` draws (in draw order) with
                                  ``E < energy_threshold``: the paper's "repeat until 100
                                  vectors with E = 0"
    ============================  ==========================================================

    Parameters
    ----------
    train_energy : ndarray of float64, shape (n_draws,)

    Returns
    -------
    ndarray of bool, shape (n_draws,)
    """
    e = np.asarray(train_energy, dtype=np.float64)
    kept = np.zeros(e.shape, dtype=bool)
    finite = np.isfinite(e)
    if n_keep is not None and energy_threshold is None:
        order = np.argsort(np.where(finite, e, np.inf), kind="stable")
        chosen = [i for i in order[:n_keep] if finite[i]]
        kept[chosen] = True
        return kept
    thr = ZERO_ENERGY_THRESHOLD if energy_threshold is None else energy_threshold
    below = finite & (e < thr)
    if n_keep is None:
        return below
    idx = np.flatnonzero(below)[:n_keep]
    kept[idx] = True
    return kept


def _mean_sem(values: FloatArray) -> tuple[float, float]:
    n = values.shape[0]
    if n == 0:
        return math.nan, math.nan
    mean = float(np.mean(values))
    sem = float(np.std(values, ddof=1) / math.sqrt(n)) if n > 1 else math.nan
    return mean, sem


def _check_count(name: str, value: Any, minimum: int, fix: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ConfigError(f"{name} = {value!r}; expected an integer >= {minimum}. {fix}")
    return int(value)


def _resolve_minimiser(minimiser: Minimiser | str | None) -> Minimiser:
    if minimiser is None:
        return default_minimiser()
    if isinstance(minimiser, str):
        from thermonet import registry

        return registry.load("minimiser", minimiser)()  # type: ignore[no-any-return]
    if not isinstance(minimiser, Minimiser):
        raise ConfigError(f"minimiser is a {type(minimiser).__name__}; expected a "
                          "thermonet.api.Minimiser instance, a registered name such as 'rmin', "
                          "or None for RMin")
    return minimiser


def standard_optimisation(arch: Architecture, split: Any, *, n_draws: int,
                          n_keep: int | None = None, energy_threshold: float | None = None,
                          minimiser: Minimiser | str | None = None, seed: int = 0,
                          workers: int = 1,
                          progress: Callable[[int, int], Any] | None = None,
                          keep_params: bool = False,
                          world: World | None = None) -> BaselineResult:
    """The paper's standard-optimisation baseline: minimise from many standard initial draws.

    Parameters
    ----------
    arch : Architecture
        A classifier (it needs ``predict_proba``), e.g. ``M3()``.
    split : DataSplit
        ``.train`` (minimised on), ``.test`` (evaluated on) and ``.test_kind``, as returned by
        :func:`thermonet.data.load_data`.
    n_draws : int
        Number of initial draws (each minimised once).
    n_keep, energy_threshold
        Which minima enter the means; see :func:`select_kept`. By default every minimum with
        ``E(D_train|w) < ZERO_ENERGY_THRESHOLD`` (1e-3).
    minimiser : Minimiser, str or None
        A minimiser instance (shared by the worker threads, so it must be re-entrant; the
        built-ins are), a registered name, or None for RMin with
        :data:`BASELINE_RMIN_SETTINGS` (``max_steps=50000, grad_tol=1e-5``). It is given the paper's
        box prior for ``arch`` (used only with ``respect_box=True``).
    seed : int
        Root of ``np.random.SeedSequence(seed).spawn(n_draws)``: draw ``i`` uses child ``i``.
    workers : int
        Threads (in each process of ``world``). The result does not depend on it (bitwise).
    progress : callable, optional
        ``progress(n_done, n_draws)``, called from the calling thread after each draw (under
        MPI on rank 0 only, counting rank 0's block: ``n_draws`` is the block's length).
    keep_params : bool
        Also return the kept minima in ``result.params``.
    world : World, optional
        The processes sharing the draws (:func:`thermonet.parallel.world`): each rank of an
        MPI job minimises a contiguous block and every rank returns the whole result, bitwise
        the one-process result. Default: this process alone.

    Returns
    -------
    BaselineResult
    """
    n_draws, n_keep, energy_threshold, workers = _checked(n_draws, n_keep, energy_threshold,
                                                          workers, seed)
    mini = _resolve_minimiser(minimiser)
    job = LOCAL if world is None else world
    if len(split.test.y) == 0:
        raise ConfigError("the test set is empty; expected test images to evaluate the minima on")
    children = np.random.SeedSequence(int(seed)).spawn(n_draws)
    results = _minimise_draws(arch, split, mini, children, workers=workers, progress=progress,
                              keep_params=keep_params, job=job)
    return _result(arch, split, mini, results, n_keep=n_keep, energy_threshold=energy_threshold,
                   keep_params=keep_params, seed=seed)


def _checked(n_draws: Any, n_keep: Any, energy_threshold: Any, workers: Any, seed: Any
             ) -> tuple[int, int | None, float | None, int]:
    """The arguments of :func:`standard_optimisation` checked, as numbers."""
    n_draws = _check_count("n_draws", n_draws, 1, "Pass the number of initial draws, e.g. 100.")
    if n_keep is not None:
        n_keep = _check_count("n_keep", n_keep, 1, "Pass a positive number, or None to keep "
                              "every draw below the energy threshold.")
        if n_keep > n_draws:
            raise ConfigError(f"n_keep = {n_keep} is larger than n_draws = {n_draws}; at most "
                              f"{n_draws} minima can be kept. Raise n_draws or lower n_keep.")
    if energy_threshold is not None:
        if (isinstance(energy_threshold, bool) or not isinstance(energy_threshold, (int, float))
                or not energy_threshold > 0 or math.isnan(energy_threshold)):
            raise ConfigError(f"energy_threshold = {energy_threshold!r}; expected a positive "
                              f"number of nats (default {ZERO_ENERGY_THRESHOLD})")
        energy_threshold = float(energy_threshold)
    workers = _check_count("workers", workers, 1, "Use 1 for serial runs.")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ConfigError(f"seed = {seed!r}; expected a non-negative integer")
    return n_draws, n_keep, energy_threshold, workers


def _minimise_draws(arch: Architecture, split: Any, mini: Minimiser, children: list[Any], *,
                    workers: int, progress: Callable[[int, int], Any] | None,
                    keep_params: bool, job: World) -> list[_Draw]:
    """Every draw minimised and evaluated, the draws shared among the processes of ``job``
    and each process's block among ``workers`` threads; in draw order."""
    train, test = split.train, split.test
    n_test = len(test.y)
    prior = BoxPrior.for_architecture(arch)
    train_pot = arch.potential(train)
    test_pot = arch.potential(test)
    local = threading.local()
    # on an error or Ctrl-C in the calling thread, running minimisations stop at their next
    # step (for minimisers that take a callback, as the built-ins do)
    stop = threading.Event()
    extra: dict[str, Any] = {}
    if accepts_callback(mini):
        extra["callback"] = lambda *_: stop.is_set()

    def potentials() -> tuple[Any, Any]:
        if not hasattr(local, "pots"):
            local.pots = (train_pot.copy(), test_pot.copy())
        return local.pots  # type: ignore[no-any-return]

    def one(i: int) -> _Draw:
        pot_train, pot_test = potentials()
        theta0 = arch.initial_draw(np.random.default_rng(children[i]))
        res = mini.minimise(pot_train, theta0, prior=prior, **extra)
        e_test = float(pot_test.energy(res.theta)) / n_test
        err_test = classification_error(arch, res.theta, test.x, test.y)
        err_train = classification_error(arch, res.theta, train.x, train.y)
        logger.debug("draw %d: %s after %d steps, E = %.4g, test E/N = %.4g, test error %.4f",
                     i, res.reason, res.n_steps, res.energy, e_test, err_test)
        return _Draw(i, float(res.energy), err_train, e_test, err_test, int(res.n_steps),
                     int(res.n_grad_evals), float(res.max_abs_grad), str(res.reason),
                     res.theta if keep_params else None)

    def run_block(block: list[int]) -> list[_Draw]:
        """The draws ``block`` on this process's threads, in order."""
        report = progress if job.is_root else None    # under MPI rank 0 reports its share
        return _on_threads(one, block, workers, report, stop)

    return job.share(run_block, range(len(children)))


def _on_threads(one: Callable[[int], _Draw], block: list[int], workers: int,
                report: Callable[[int, int], Any] | None, stop: threading.Event
                ) -> list[_Draw]:
    """``one(i)`` for every ``i`` of ``block`` on ``workers`` threads, reporting each finished
    draw; on an error the others are cancelled and ``stop`` set. In the order of ``block``."""
    out: dict[int, _Draw] = {}
    if workers == 1:
        for done, i in enumerate(block, 1):
            out[i] = one(i)
            if report is not None:
                report(done, len(block))
        return [out[i] for i in block]
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="baseline") as pool:
        futures = [pool.submit(one, i) for i in block]
        try:
            for done, fut in enumerate(as_completed(futures), 1):
                draw = fut.result()
                out[draw.draw_index] = draw
                if report is not None:
                    report(done, len(block))
        except BaseException:
            stop.set()
            for fut in futures:
                fut.cancel()
            raise
    return [out[i] for i in block]


def _result(arch: Architecture, split: Any, mini: Minimiser, results: list[_Draw], *,
            n_keep: int | None, energy_threshold: float | None, keep_params: bool, seed: int
            ) -> BaselineResult:
    """The minima kept, their means and the per-draw arrays as a :class:`BaselineResult`."""
    train, test = split.train, split.test
    train_energy = np.array([r.train_energy for r in results], dtype=np.float64)
    test_e = np.array([r.test_energy_per_point for r in results], dtype=np.float64)
    test_err = np.array([r.test_error for r in results], dtype=np.float64)
    kept = select_kept(train_energy, n_keep=n_keep, energy_threshold=energy_threshold)
    n_kept = int(np.count_nonzero(kept))
    thr_used = (None if (n_keep is not None and energy_threshold is None)
                else (ZERO_ENERGY_THRESHOLD if energy_threshold is None else energy_threshold))
    if thr_used is not None and n_kept < (n_keep or 1):
        logger.warning("only %d of %d minimisations reached E(D|w) < %g%s; raise the number of "
                       "draws or the minimiser's max_steps", n_kept, len(results), thr_used,
                       f" (wanted {n_keep})" if n_keep else "")
    e_mean, e_sem = _mean_sem(test_e[kept])
    r_mean, r_sem = _mean_sem(test_err[kept])
    cfg = getattr(mini, "config", None)
    cfg_dict = (dataclasses.asdict(cfg)
                if dataclasses.is_dataclass(cfg) and not isinstance(cfg, type) else {})
    params = None
    if keep_params:
        params = np.empty((n_kept, arch.n_params))
        for row, k in enumerate(np.flatnonzero(kept)):
            params[row] = results[k].theta
    return BaselineResult(
        train_energy=train_energy,
        train_error=np.array([r.train_error for r in results], dtype=np.float64),
        test_energy_per_point=test_e,
        test_error=test_err,
        n_steps=np.array([r.n_steps for r in results], dtype=np.int64),
        n_grad_evals=np.array([r.n_grad_evals for r in results], dtype=np.int64),
        max_abs_grad=np.array([r.max_abs_grad for r in results], dtype=np.float64),
        reason=tuple(r.reason for r in results),
        kept=kept,
        test_energy_mean=e_mean, test_energy_sem=e_sem,
        test_error_mean=r_mean, test_error_sem=r_sem,
        energy_threshold=thr_used, n_keep=n_keep,
        train_set=str(getattr(train, "name", "train")),
        test_set=str(getattr(test, "name", "test")),
        test_kind=str(getattr(split, "test_kind", "unknown")),
        n_train=len(train.y), n_test=len(test.y), seed=int(seed),
        minimiser=str(getattr(mini, "name", type(mini).__name__)),
        minimiser_config=cfg_dict,
        architecture=arch.describe(),
        params=params,
    )
