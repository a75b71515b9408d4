"""The reading of a run directory: :class:`RunReader` (its checkpoint, configuration, trace
and stored samples), the base of :class:`~thermonet.analysis.run_record.RunRecord`. The
predictive and the ArviZ export take a reader, so they need not import the record, whose
methods call them.

The burn-in fraction is the run's ``run.discard``; a run whose stored configuration lacks it
uses the schema's default (:data:`thermonet.config.RUN_KEYS`), the one place it is set.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from thermonet.config.run import RUN_KEYS
from thermonet.config.schema import TOMLDecodeError, parse_toml
from thermonet.errors import CheckpointFormatError, ConfigError
from thermonet.io.checkpoint import Checkpoint, read_checkpoint
from thermonet.io.trace import read_trace
from thermonet.tempering.ladder import Ladder, trajectories_from_settings

if TYPE_CHECKING:  # pragma: no cover
    from thermonet.analysis.mixing import Mixing, Verdict

#: how close a requested temperature must be to a rung (relative) to mean that rung: the
#: labels print four significant digits
T_MATCH_RTOL = 1e-3


def default_discard() -> float:
    """The burn-in fraction of a run whose configuration does not set ``run.discard``."""
    return float(RUN_KEYS["discard"][0])


def check_discard(discard: Any) -> float:
    """``discard`` as a float in [0, 1), or a one-line :class:`ConfigError`."""
    if isinstance(discard, bool) or not (isinstance(discard, (int, float)) and 0 <= discard < 1):
        raise ConfigError(f"discard = {discard!r}; expected a fraction in [0, 1), e.g. 0.2")
    return float(discard)


def first_kept(n: int, discard: float) -> int:
    """Index of the first of ``n`` recorded iterations kept after discarding the fraction
    ``discard`` (the floor of ``discard * n``)."""
    return math.floor(check_discard(discard) * n)


def temperature_label(temperatures: Any) -> list[str]:
    """Readable, distinct labels ``T=0.147``, ..., ``T=inf``: the fewest significant digits
    (at least three) that tell every rung apart."""
    t = [float(v) for v in np.asarray(temperatures, dtype=np.float64)]
    for digits in range(3, 18):
        labels = [f"T={v:.{digits}g}" for v in t]
        if len(set(labels)) == len(labels):
            return labels
    return [f"T={v!r}" for v in t]


def stored_config(ck: Checkpoint, run_dir: Path) -> dict[str, Any]:
    """The resolved configuration a checkpoint stores, as a dict (one line if unreadable)."""
    try:
        return parse_toml(ck.config_toml)
    except TOMLDecodeError as err:
        raise CheckpointFormatError(f"the configuration stored in {run_dir} is not valid TOML "
                                    f"({err})") from None


_R = TypeVar("_R", bound="RunReader")


class RunReader:
    """A run directory, read once and never written. Build it with :func:`read_run` (or
    :func:`~thermonet.analysis.run_record.open_run`, which adds the predictive).

    Attributes
    ----------
    path : Path
    checkpoint : Checkpoint
        The commit point (``iteration``, ``run_uuid``, the slots' states, counters).
    config : dict
        The resolved configuration the run stored (its TOML, parsed).
    ladder : Ladder
        The run's temperatures (a prior rung, if any, is ``T = inf``).
    discard : float
        The burn-in fraction in use (the run's ``run.discard`` unless overridden).
    n_trajectories : ndarray of int64, shape (K,)
        Transitions per rung and iteration.
    """

    def __init__(self, path: Path, checkpoint: Checkpoint, config: dict[str, Any],
                 discard: float) -> None:
        self.path = path
        self.checkpoint = checkpoint
        self.config = config
        self.ladder = Ladder.from_temperatures(checkpoint.temperatures)
        self.discard = check_discard(discard)
        budget = checkpoint.counters.get("local_budget")   # chosen in the warm-up, if so
        self.n_trajectories = (np.asarray(budget["trajectories"], dtype=np.int64) if budget
                               else trajectories_from_settings(
                                   config.get("ladder", config.get("sampler", {})),
                                   self.temperatures))
        self.n_trajectories.flags.writeable = False

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({str(self.path)!r}, {self.iterations} iterations, "
                f"{self.ladder.n_temperatures} temperature(s), discard {self.discard:g})")

    def with_discard(self: _R, discard: float | None) -> _R:
        """The same run read with another burn-in fraction (None: this one)."""
        if discard is None or discard == self.discard:
            return self
        out = type(self)(self.path, self.checkpoint, self.config, discard)
        if "trace" in self.__dict__:
            out.__dict__["trace"] = self.__dict__["trace"]
        return out

    # ---- identity -----------------------------------------------------------------------
    @property
    def run_uuid(self) -> str:
        return self.checkpoint.run_uuid

    @property
    def iterations(self) -> int:
        """Completed iterations (the checkpoint's commit point)."""
        return int(self.checkpoint.iteration)

    @property
    def temperatures(self) -> np.ndarray:
        """T_k of the rungs, ascending (read-only)."""
        return self.ladder.temperature_k

    @property
    def n_chains(self) -> int:
        """Independent chains of a one-rung run (``run.chains``; 1 for a ladder): the trace's
        and the stored samples' slot axis is then the chain axis."""
        n_slots = int(np.asarray(self.checkpoint.replica_k).size)
        return max(n_slots // self.ladder.n_temperatures, 1)

    def chain_slots(self, k: int) -> list[int]:
        """The slots (trace and sample columns) of rung ``k``: ``[k]`` on a ladder, every
        chain's on one rung."""
        return list(range(self.n_chains)) if self.n_chains > 1 else [int(k)]

    @property
    def seed(self) -> Any:
        return self.config.get("run", {}).get("seed")

    @property
    def elapsed_s(self) -> float | None:
        v = self.checkpoint.counters.get("elapsed_s")
        return None if v is None else float(v)

    @property
    def architecture_name(self) -> str:
        return str(self.config.get("architecture", {}).get("name", "?"))

    @property
    def data_name(self) -> str:
        return str(self.config.get("data", {}).get("name", "none"))

    # ---- the trace ----------------------------------------------------------------------
    @functools.cached_property
    def trace(self) -> dict[str, np.ndarray]:
        """Every recorded iteration of the run (rows beyond the checkpoint, left by a crash
        and trimmed on resume, are not the run's and are left out). Read-only arrays."""
        tr = read_trace(self.path, run_uuid=self.run_uuid)
        its = np.asarray(tr.get("iteration", np.zeros(0, np.int64)))
        keep = its <= self.iterations
        out = {name: np.asarray(a)[keep] for name, a in tr.items()}
        out.setdefault("iteration", np.zeros(0, np.int64))
        for a in out.values():
            a.flags.writeable = False
        return out

    @property
    def n_recorded(self) -> int:
        """Recorded iterations (trace rows)."""
        return int(self.trace["iteration"].shape[0])

    @property
    def start(self) -> int:
        """The first trace row kept after the discard."""
        return first_kept(self.n_recorded, self.discard)

    @property
    def n_kept(self) -> int:
        return self.n_recorded - self.start

    @property
    def kept(self) -> dict[str, np.ndarray]:
        """The trace after the discard (views of :attr:`trace`)."""
        return {name: a[self.start:] for name, a in self.trace.items()}

    @property
    def first_kept_iteration(self) -> int:
        """The iteration number of the first kept row (past the end when none is kept)."""
        return (int(self.trace["iteration"][self.start]) if self.n_kept > 0
                else self.iterations + 1)

    @functools.cached_property
    def mixing(self) -> Mixing:
        """The mixing diagnostics of the kept iterations (:func:`~thermonet.analysis.mixing.
        assess`)."""
        from thermonet.analysis.mixing import assess, assess_chains, verdict_rules

        rules = verdict_rules(self.config.get("run", {}))
        if self.n_chains > 1:
            return assess_chains(self.trace, float(self.temperatures[0]),
                                 n_trajectories=self.n_trajectories, start=self.start,
                                 observables=self.chain_observables(),
                                 ess_min=rules["ess_min"])
        return assess(self.trace, self.temperatures, n_trajectories=self.n_trajectories,
                      start=self.start, elapsed_s=self.elapsed_s,
                      **verdict_rules(self.config.get("run", {})))

    @property
    def verdict(self) -> Verdict:
        """Whether the run mixed, and why."""
        return self.mixing.verdict

    # ---- temperatures and stored samples -------------------------------------------------
    def slot(self, temperature: float | None = None) -> int:
        """The slot of ``temperature`` (a rung within 0.1 %), or of the default prediction
        temperature (None): ``T = 1`` when it is a rung, else the lowest. One line when it is
        not on the ladder."""
        t = self.temperatures
        if temperature is None:
            ones = np.flatnonzero(np.isclose(t, 1.0, rtol=1e-9, atol=0.0))
            return int(ones[0]) if ones.size else 0
        want = float(temperature)
        if math.isinf(want) and np.isinf(t[-1]):
            return int(t.size - 1)
        with np.errstate(invalid="ignore"):
            close = np.flatnonzero(np.isclose(t, want, rtol=T_MATCH_RTOL, atol=0.0))
        if not close.size:
            raise ConfigError(f"temperature {want:g} is not on the ladder of {self.path} "
                              f"({', '.join(temperature_label(t))}); pass one of these")
        return int(close[np.argmin(np.abs(t[close] - want))])

    @functools.cached_property
    def _store(self) -> Any:
        from thermonet.analysis.samples import SampleStore

        return SampleStore(self.path, self.run_uuid, self.iterations)

    def sample_iterations(self) -> np.ndarray:
        """Iterations of the stored samples after the discard."""
        return np.asarray(self._store.select(self.first_kept_iteration), dtype=np.int64)

    def samples(self, temperature: float | None = None, *, slot: int | None = None,
                chain: int | None = None) -> np.ndarray:
        """The stored parameter vectors at ``temperature`` (see :meth:`slot`), or at rung
        ``slot``, after the discard, shape (S, n_params): every chain's, chain by chain
        (:meth:`sample_iterations` of each), or only chain ``chain``'s."""
        k = self.slot(temperature) if slot is None else int(slot)
        cols = self.chain_slots(k)
        if chain is not None:
            if not 0 <= int(chain) < len(cols):
                raise ConfigError(f"chain {chain} of {self.path}; expected 0 to "
                                  f"{len(cols) - 1} (the run has {self.n_chains} chain(s))")
            cols = [cols[int(chain)]]
        parts = [np.asarray(self._store.slot(c, self.first_kept_iteration)) for c in cols]
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def chain_observables(self) -> dict[str, np.ndarray]:
        """The kept draws (n, n_chains) of the permutation-invariant observables beyond the
        energy that the verdict compares between chains: the width ``1/sqrt(h)`` of every
        recorded hyperparameter (a hierarchical model's groups, the noise level; n kept
        iterations), named by the model where it names them (``hyper[j]`` otherwise), and
        the group widths of a scale-factor model (coordinates of the state: n stored
        samples per chain)."""
        out: dict[str, np.ndarray] = {}
        h = self.kept.get("hyper_k")
        arch = None
        if h is not None and np.ndim(h) == 3 and np.shape(h)[2] > 0:
            h = np.asarray(h, dtype=np.float64)
            names = [f"hyper[{j}]" for j in range(h.shape[2])]
            arch = self.architecture()
            if hasattr(arch, "hyper_model") and self.data_name != "none":
                given = list(arch.hyper_model(self.data().train.y.size).names())
                if len(given) == h.shape[2]:
                    names = given
            with np.errstate(divide="ignore", invalid="ignore"):
                widths = 1.0 / np.sqrt(h)
            out.update({f"width[{name}]": widths[:, :, j] for j, name in enumerate(names)})
        scaled = self.config.get("architecture", {}).get("parameterisation") == "scale"
        if scaled and self.data_name != "none" and self.sample_iterations().size > 0:
            arch = arch if arch is not None else self.architecture()
            pot = arch.potential(self.data().train)
            per_chain = [pot.group_widths(self.samples(slot=0, chain=c))
                         for c in range(self.n_chains)]
            for j, name in enumerate(per_chain[0][0]):
                out[f"width[{name}]"] = np.stack([w[:, j] for _, w in per_chain], axis=1)
        return out

    # ---- the model ----------------------------------------------------------------------
    @functools.cached_property
    def resolved(self) -> Any:
        """The stored configuration resolved again (defaults of keys added since filled in)."""
        from thermonet import config as cfgmod

        return cfgmod.resolve(dict(self.config), warn_legacy=False)

    def architecture(self) -> Any:
        """The run's architecture, built through the registry (plugins included)."""
        from thermonet import registry

        a = self.resolved["architecture"]
        settings = {k: (list(v) if isinstance(v, tuple) else v) for k, v in a.items()
                    if k != "name"}
        return registry.get_architecture(a["name"], **settings)

    def data(self, mnist_dir: str | None = None) -> Any:
        """The run's training and test sets (a DataSplit), or None for a data-free run."""
        d = self.resolved["data"]
        if d["name"] == "none":
            return None
        from thermonet.data import load_configured

        return load_configured(d, self.resolved["run"]["seed"], mnist_dir=mnist_dir)

    def noise_sd(self, slot: int, iterations: np.ndarray, train: Any, arch: Any
                 ) -> np.ndarray | None:
        """The noise standard deviation (model units) of the stored networks at
        ``iterations`` of ``slot``: ``sqrt(T / tau)`` with tau the noise precision recorded
        in the trace (``hyper_k``), or the architecture's known ``noise_std`` times
        ``sqrt(T)``, for every chain of a one-rung run (chain by chain, as :meth:`samples`);
        None when the run has no noise level."""
        temperature = float(self.temperatures[slot])
        cols = self.chain_slots(slot)
        known = getattr(arch, "noise_std", None)
        if known is not None:
            return np.full(len(iterations) * len(cols), float(known) * math.sqrt(temperature))
        names = (list(arch.hyper_model(train.y.size).names())
                 if hasattr(arch, "hyper_model") else [])
        if "noise" not in names or "hyper_k" not in self.trace:
            return None
        rows = np.searchsorted(self.trace["iteration"], iterations)
        hyper = np.asarray(self.trace["hyper_k"])
        tau = np.concatenate([hyper[rows, c, names.index("noise")] for c in cols])
        return np.sqrt(temperature / tau)

    # ---- what the samples say -----------------------------------------------------------


def read_config(path: str | Path, discard: float | None
                ) -> tuple[Path, Checkpoint, dict[str, Any], float]:
    """What a reader of ``path`` is built from: the directory, its checkpoint, its stored
    configuration and the burn-in fraction (``discard``, else the run's)."""
    run_dir = Path(path)
    ck = read_checkpoint(run_dir)
    cfg = stored_config(ck, run_dir)
    if discard is None:
        discard = cfg.get("run", {}).get("discard", default_discard())
    return run_dir, ck, cfg, discard



def read_run(path: str | Path, *, discard: float | None = None) -> RunReader:
    """The reader of the run directory ``path``; raises as
    :func:`~thermonet.analysis.run_record.open_run` does."""
    return RunReader(*read_config(path, discard))


__all__ = ["T_MATCH_RTOL", "RunReader", "check_discard", "default_discard", "first_kept",
           "read_config", "read_run", "stored_config", "temperature_label"]
