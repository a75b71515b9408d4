"""Full-batch simulated annealing with early stopping on a validation set.

Baldock & Marzari (arXiv:1904.04154, Secs. 3 and 5) observe a minimum of the test error at
T > 0 and propose: "cool until the average validation error starts to increase, then revert to
the parameters with the lowest validation error". This module implements that procedure:

1. start hot from a standard initial draw (or its minimum, or a parameter file);
2. visit a decreasing schedule of temperatures T_0 > T_1 > ... (geometric by default). At each
   temperature: adapt the HMC step size (:meth:`thermonet.samplers.hmc.HMC.adapt`, extra
   trajectories that are not part of the chain; again every ``adapt_every`` trajectories if
   set), then run ``n_trajectories`` HMC trajectories (Algorithm 1, box prior) on the full
   training set, and after each one evaluate the classification error and energy of the
   current parameters on a **validation set**;
3. record at each temperature the average validation error over its trajectories (after the
   first ``burn_in``), the average training energy E(D|w), and the best single parameter vector;
4. stop when the average validation error "starts to increase" (:func:`stop_index`: ``patience``
   temperatures in a row without improving on the best running average of ``window``
   temperatures by more than ``min_delta``), or at the end of the schedule;
5. return the parameter vector with the lowest validation error seen at any trajectory (ties:
   the lower validation energy, then the earlier one), and report its test error and energy.

The validation set
------------------
``n_validation`` images, ``n_validation/10`` per class, drawn (seeded by ``run.seed``) from the
MNIST training images that are not in the training set: the full MNIST training set if the
MNIST files are found (``validation_pool = "mnist"``), else the training images embedded in
thermonet (the union of D50, D500 and D5000; ``"embedded"``). The default ``"auto"`` takes the
first that is available. The validation set never overlaps the test set: the official test set
holds no MNIST training image, and when the test set is the complement of the training set the
validation images are removed from it (the test set is then ``complement(D500) - validation``).

Reproducibility
---------------
Every random stream comes from ``SeedSequence(run.seed).spawn(3)``: child 0 draws the initial
parameters, child 1 drives the chain (momenta, accept/reject, adaptation), child 2 selects the
validation images. The state of the chain, its random generator and the per-temperature table
are written atomically to ``DIR/anneal.h5`` after every temperature, so an interrupted anneal
resumes bit for bit.
"""

from __future__ import annotations

import datetime as _dt
import itertools
import json
import logging
import math
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from thermonet import __version__
from thermonet import config as cfgmod
from thermonet._types import FloatArray, IntArray
from thermonet.errors import CheckpointFormatError, CheckpointMismatchError, ConfigError

log = logging.getLogger("thermonet.anneal")

ANNEAL_FORMAT = "thermonet.anneal"
ANNEAL_FORMAT_VERSION = 1
ANNEAL_H5 = "anneal.h5"
ANNEAL_JSON = "anneal.json"
VALIDATION_POOLS = ("auto", "mnist", "embedded")
STARTS = ("draw", "minimum", "params")

_Schema = dict[str, tuple[Any, tuple[type, ...], Any, str]]

ANNEAL_RUN_KEYS: _Schema = {
    "seed": (0, (int,), (lambda v: v >= 0, "an integer >= 0"),
             "master seed: initial draw, chain and validation set"),
}
ANNEAL_KEYS: _Schema = {
    "t_start": (10.0, (float, int), (lambda v: math.isfinite(v) and v > 0, "a positive number"),
                "first (hottest) temperature of the geometric schedule"),
    "t_end": (1e-3, (float, int), (lambda v: math.isfinite(v) and v > 0, "a positive number"),
              "last (coldest) temperature of the geometric schedule"),
    "n_temperatures": (16, (int,), (lambda v: v >= 1, "an integer >= 1"),
                       "temperatures of the geometric schedule"),
    "temperatures": ([], (list,), (
        lambda v: all(isinstance(t, (int, float)) and not isinstance(t, bool)
                      and math.isfinite(t) and t > 0 for t in v)
        and all(a > b for a, b in itertools.pairwise(v)),
        "a list of positive, strictly decreasing temperatures"),
        "explicit schedule (replaces t_start, t_end, n_temperatures when not empty)"),
    "n_trajectories": (50, (int,), (lambda v: v >= 1, "an integer >= 1"),
                       "HMC trajectories at each temperature"),
    "burn_in": (0, (int,), (lambda v: v >= 0, "an integer >= 0"),
                "first trajectories at each temperature left out of the averages"),
    "patience": (3, (int,), (lambda v: v >= 1, "an integer >= 1"),
                 "stop after this many temperatures without improvement"),
    "window": (1, (int,), (lambda v: v >= 1, "an integer >= 1"),
               "temperatures in the running average of the validation error"),
    "min_delta": (0.0, (float, int), (lambda v: v >= 0, "a number >= 0"),
                  "an improvement must lower the running average by more than this"),
    "n_validation": (1000, (int,), (lambda v: v >= 10 and v % 10 == 0,
                                    "a positive multiple of 10 (n/10 images per class)"),
                     "validation images, n/10 per class"),
    "validation_pool": ("auto", (str,), (lambda v: v in VALIDATION_POOLS,
                                         "one of auto, mnist, embedded"),
                        "where validation images come from"),
    "start": ("draw", (str,), (lambda v: v in STARTS, "one of draw, minimum, params"),
              "initial parameters: standard draw, its minimum ([minimiser]), or a file"),
    "params": ("", (str,), None, "parameter file for start = \"params\""),
    "adapt_factor": (0.9, (float, int), (lambda v: 0 < v < 1, "a number in (0, 1)"),
                     "factor of the step-size search at each temperature after the first"),
    "adapt_every": (0, (int,), (lambda v: v >= 0, "an integer >= 0"),
                    ("also adapt dt after every this many trajectories within a temperature "
                     "(0: only at the start of each temperature)")),
}
ANNEAL_SECTIONS = ("run", "data", "architecture", "anneal", "sampler", "minimiser")


# ---------------------------------------------------------------------------------------------
# schedule and stopping rule

def geometric_schedule(t_start: float, t_end: float, n: int) -> FloatArray:
    """``T_k = t_start (t_end/t_start)^(k/(n-1))``, k = 0..n-1, with both ends exact.

    Parameters
    ----------
    t_start, t_end : float
        First and last temperature (``t_start > t_end`` for cooling).
    n : int
        Number of temperatures; ``n = 1`` gives ``[t_start]``.

    Returns
    -------
    ndarray of float64, shape (n,)
    """
    if n == 1:
        return np.array([float(t_start)])
    t_k = float(t_start) * (float(t_end) / float(t_start)) ** (np.arange(n) / (n - 1))
    t_k[0], t_k[-1] = float(t_start), float(t_end)
    return t_k


def running_average(values: Sequence[float], window: int) -> FloatArray:
    """``m_k = mean(values[max(0, k - window + 1) : k + 1])`` (the first ones over fewer).

    Returns
    -------
    ndarray of float64, shape (len(values),)
    """
    v = np.asarray(values, dtype=np.float64)
    out = np.empty_like(v)
    for k in range(v.shape[0]):
        out[k] = np.mean(v[max(0, k - window + 1): k + 1])
    return out


def best_index(values: Sequence[float], min_delta: float = 0.0) -> int:
    """Index of the best (lowest) value, where a later value counts as better only if it is
    more than ``min_delta`` below the best so far (so ties keep the earlier one)."""
    v = np.asarray(values, dtype=np.float64)
    best = 0
    for k in range(1, v.shape[0]):
        if v[k] < v[best] - min_delta:
            best = k
    return best


def stop_index(curve: Sequence[float], patience: int, window: int = 1,
               min_delta: float = 0.0) -> int | None:
    """The temperature after which annealing stops, or None if it does not stop on ``curve``.

    The rule ("the average validation error starts to increase", made robust to noise): let
    ``m_k`` be the running average of ``curve`` over ``window`` temperatures
    (:func:`running_average`) and ``b_k`` the index of the best ``m_j``, j <= k
    (:func:`best_index` with ``min_delta``). Annealing stops after temperature k as soon as
    ``k - b_k >= patience``: ``patience`` temperatures in a row have not improved on the best.

    Parameters
    ----------
    curve : sequence of float
        Average validation error at each temperature, in schedule order.
    patience : int
    window : int
    min_delta : float

    Returns
    -------
    int or None
    """
    m = running_average(curve, window)
    best = 0
    for k in range(m.shape[0]):
        if k > 0 and m[k] < m[best] - min_delta:
            best = k
        if k - best >= patience:
            return k
    return None


# ---------------------------------------------------------------------------------------------
# configuration

def resolve_config(raw: Mapping[str, Any], overrides: Mapping[str, Any] | None = None,
                   override_source: str = "set") -> cfgmod.ResolvedConfig:
    """Validate an anneal configuration (a parsed TOML document) and fill every default.

    Sections: ``[run]`` seed; ``[data]`` name, test; ``[architecture]`` name and settings;
    ``[anneal]`` (:data:`ANNEAL_KEYS`); ``[sampler]`` the HMC settings
    (:class:`thermonet.samplers.hmc.HMCConfig`) and ``mass``; ``[minimiser]`` name and settings
    (used with ``start = "minimum"``). Unknown keys raise :class:`ConfigError` with a
    did-you-mean suggestion.
    """
    from thermonet import registry
    from thermonet.samplers.hmc import HMC

    doc, given_sources = cfgmod.apply_overrides(raw, overrides, override_source)
    for section, table_given in doc.items():
        if section not in ANNEAL_SECTIONS:
            raise ConfigError(f"unknown section [{section}] in an anneal configuration"
                              f"{cfgmod.suggest(section, list(ANNEAL_SECTIONS))} Valid "
                              f"sections: {', '.join(ANNEAL_SECTIONS)}")
        if not isinstance(table_given, dict):
            raise ConfigError(f"[{section}] must be a table; got {table_given!r}")
    if "anneal" not in doc:
        raise ConfigError("the configuration has no [anneal] section; expected one with e.g. "
                          "t_start, t_end, n_temperatures, n_trajectories, patience")
    sources: dict[str, str] = {}
    out: dict[str, Any] = {}
    out["run"], _ = cfgmod.resolve_section("run", doc.get("run", {}), ANNEAL_RUN_KEYS, sources,
                                          given_sources)
    out["data"], _ = cfgmod.resolve_section("data", doc.get("data", {}), cfgmod.DATA_KEYS,
                                           sources, given_sources)
    for section, role in (("architecture", "architecture"), ("minimiser", "minimiser")):
        given = dict(doc.get(section, {}))
        name = given.pop("name", cfgmod.DEFAULT_NAMES[section])
        if not isinstance(name, str):
            raise ConfigError(f"{section}.name = {name!r}; expected a plugin name (string)")
        sources[f"{section}.name"] = given_sources.get(
            f"{section}.name", "config" if "name" in doc.get(section, {}) else "default")
        cls = registry.load(role, name)
        out[section] = {"name": name, **cfgmod.plugin_settings(section, cls, given, sources,
                                                                given_sources)}
    given = dict(doc.get("sampler", {}))
    if "name" in given and given.pop("name") != "hmc":
        raise ConfigError(f"sampler.name = {doc['sampler']['name']!r}; annealing uses HMC: "
                          "remove the name or set it to \"hmc\"")
    own, rest = cfgmod.resolve_section("sampler", given, cfgmod.SAMPLER_RUNNER_KEYS, sources,
                                      given_sources, extra_ok=True)
    out["sampler"] = {"name": "hmc", **own,
                      **cfgmod.plugin_settings("sampler", HMC, rest, sources, given_sources)}
    a, _ = cfgmod.resolve_section("anneal", doc["anneal"], ANNEAL_KEYS, sources, given_sources)
    if a["temperatures"]:
        a["temperatures"] = [float(t) for t in a["temperatures"]]
    elif a["n_temperatures"] > 1 and not a["t_start"] > a["t_end"]:
        raise ConfigError(f"anneal.t_start = {a['t_start']} is not above anneal.t_end = "
                          f"{a['t_end']}; annealing cools: expected t_start > t_end")
    if a["burn_in"] >= a["n_trajectories"]:
        raise ConfigError(f"anneal.burn_in = {a['burn_in']} leaves no trajectory to average "
                          f"out of anneal.n_trajectories = {a['n_trajectories']}; expected "
                          "burn_in < n_trajectories")
    if a["start"] == "params" and not a["params"]:
        raise ConfigError("anneal.start = \"params\" needs anneal.params = \"FILE\" (a .npy, "
                          "JSON or thermonet HDF5 parameter file)")
    if a["params"] and a["start"] != "params":
        raise ConfigError(f"anneal.params = {a['params']!r} is only used with start = "
                          f"\"params\" (start is {a['start']!r}); set start = \"params\" or "
                          "remove params")
    out["anneal"] = a
    cfg = cfgmod.ResolvedConfig(out, sources)
    hmc_settings = {k: v for k, v in out["sampler"].items() if k not in ("name", "mass")}
    try:
        HMC.Config(**hmc_settings)
    except TypeError as err:
        raise ConfigError(f"[sampler] hmc: {err}") from None
    return cfg


def load_config(path: str | Path, overrides: Mapping[str, Any] | None = None,
                commandline: Mapping[str, Any] | None = None) -> cfgmod.ResolvedConfig:
    """Read and validate an anneal configuration file (file < --set < command line)."""
    merged = dict(overrides or {})
    merged.update(commandline or {})
    cfg = resolve_config(cfgmod.read_toml(path), merged)
    for key in commandline or {}:
        cfg.sources[key] = "commandline"
    return cfg


def schedule_of(cfg: cfgmod.ResolvedConfig) -> FloatArray:
    """The temperatures of a resolved configuration, hottest first."""
    a = cfg["anneal"]
    if a["temperatures"]:
        return np.asarray(a["temperatures"], dtype=np.float64)
    return geometric_schedule(a["t_start"], a["t_end"], a["n_temperatures"])


# ---------------------------------------------------------------------------------------------
# data: validation set disjoint from training and test sets

def _validation_pool(train: Any, pool: str) -> tuple[IntArray, np.ndarray, np.ndarray, str]:
    """MNIST training images not in ``train``: (indices, labels, uint8 16x16 images, pool)."""
    from thermonet.data import MnistNotFoundError, find_mnist
    from thermonet.data._embedded import read_embedded
    from thermonet.data._mnist import N_TRAIN, mnist16

    if pool in ("auto", "mnist"):
        try:
            files = find_mnist(verify=False)
        except MnistNotFoundError as err:
            if pool == "mnist":
                raise MnistNotFoundError(f"anneal.validation_pool = \"mnist\" needs the full "
                                         f"MNIST files (or use \"embedded\"). {err}") from None
        else:
            full = mnist16(files)
            keep = np.ones(N_TRAIN, dtype=bool)
            keep[np.asarray(train.indices)] = False
            idx = np.flatnonzero(keep).astype(np.int64)
            return idx, full.train_labels[idx], full.train16[idx], "mnist"
    arrays = read_embedded()["arrays"]
    all_idx = np.asarray(arrays["train/indices"], dtype=np.int64)
    keep = ~np.isin(all_idx, np.asarray(train.indices))
    return (all_idx[keep], np.asarray(arrays["train/labels"])[keep],
            np.asarray(arrays["train/images16"])[keep], "embedded")


def make_validation(train: Any, n: int, seed_seq: np.random.SeedSequence,
                    pool: str = "auto") -> Any:
    """A stratified validation set of ``n`` MNIST training images not in ``train``.

    ``perm = default_rng(seed_seq).permutation(len(pool))``; walking ``perm``, an image is kept
    while its class has fewer than n/10 kept (as the paper's subsets were drawn). The kept
    images are returned in ascending MNIST index order.

    Parameters
    ----------
    train : Dataset
        The training set (its ``indices`` are excluded).
    n : int
        Number of validation images, a multiple of 10.
    seed_seq : numpy.random.SeedSequence
    pool : {"auto", "mnist", "embedded"}

    Returns
    -------
    Dataset
        Named ``validation(<train name>)``; ``provenance["pool"]`` says where it came from.
    """
    from thermonet.data import Dataset, normalise
    from thermonet.errors import DataError

    idx, labels, images16, used = _validation_pool(train, pool)
    per_class = n // 10
    counts = np.bincount(np.asarray(labels, dtype=np.int64), minlength=10)
    if np.any(counts < per_class):
        raise DataError(f"anneal.n_validation = {n} needs {per_class} images of each class, "
                        f"but the {used} pool of images outside {train.name} has only "
                        f"{int(counts.min())} of class {int(counts.argmin())}; lower "
                        "n_validation or use validation_pool = \"mnist\" (full MNIST)")
    perm = np.random.default_rng(seed_seq).permutation(idx.size)
    lab = np.asarray(labels)[perm]
    keep = np.zeros(idx.size, dtype=bool)
    for c in range(10):
        keep[np.flatnonzero(lab == c)[:per_class]] = True
    rows = np.sort(perm[keep])
    prov = {"role": "validation", "pool": used, "train_set": train.name,
            "selection": "stratified, n/10 per class, seeded permutation of the pool"}
    return Dataset(f"validation({train.name})", normalise(images16[rows]), labels[rows],
                   idx[rows], prov)


def without(data: Any, indices: IntArray, name: str) -> Any:
    """``data`` without the images whose MNIST index is in ``indices`` (order kept)."""
    from thermonet.data import Dataset

    keep = ~np.isin(data.indices, indices)
    prov = {**dict(data.provenance), "name": name, "removed": int(np.count_nonzero(~keep))}
    return Dataset(name, data.x[keep], data.y[keep], data.indices[keep], prov)


# ---------------------------------------------------------------------------------------------
# the anneal

@dataclass
class Setup:
    """Everything built from a resolved anneal configuration."""

    cfg: cfgmod.ResolvedConfig
    arch: Any
    split: Any                 #: the training set and the full test set (as load_data gives)
    validation: Any            #: Dataset, disjoint from split.train and from test
    test: Any                  #: the test set used for the reported numbers (no validation)
    prior: Any
    potential: Any
    val_potential: Any
    masses: FloatArray | None
    hmc_config: Any
    schedule: FloatArray
    seeds: list[np.random.SeedSequence] = field(default_factory=list)


def build(cfg: cfgmod.ResolvedConfig) -> Setup:
    """Load the data, carve the validation set, build the architecture, prior and HMC settings."""
    from thermonet import registry
    from thermonet.data import DataSplit, load_data
    from thermonet.priors import BoxPrior
    from thermonet.samplers.hmc import HMCConfig

    seeds = np.random.SeedSequence(cfg["run"]["seed"]).spawn(3)
    arch_cls = registry.load("architecture", cfg["architecture"]["name"])
    arch = arch_cls(**{k: (list(v) if isinstance(v, tuple) else v)
                       for k, v in cfg["architecture"].items() if k != "name"})
    split = load_data(cfg["data"]["name"], test=cfg["data"]["test"])
    a = cfg["anneal"]
    val = make_validation(split.train, a["n_validation"], seeds[2], a["validation_pool"])
    test = split.test
    if split.test_kind == "complement":
        test = without(test, val.indices, f"{test.name}-validation")
    DataSplit(split.train, test, split.test_kind)    # validates
    prior = BoxPrior.for_architecture(arch)
    s = cfg["sampler"]
    masses = arch.fan_in().astype(np.float64) if s["mass"] == "fan_in" else None
    hmc_config = HMCConfig(**{k: (tuple(v) if isinstance(v, list) else v)
                              for k, v in s.items() if k not in ("name", "mass")})
    return Setup(cfg, arch, split, val, test, prior, arch.potential(split.train),
                 arch.potential(val), masses, hmc_config, schedule_of(cfg), seeds)


#: columns of the per-temperature table (anneal.h5 table/<column>, anneal.json "table")
TABLE_COLUMNS = ("temperature", "step_size", "acceptance", "n_divergent", "energy_mean",
                 "energy_std", "val_error_mean", "val_error_std", "val_energy_mean",
                 "val_error_min", "val_energy_at_min", "running_average", "seconds")


@dataclass
class AnnealResult:
    """Outcome of an anneal (also what ``anneal.json`` holds)."""

    table: dict[str, FloatArray]
    best_theta: FloatArray
    best: dict[str, Any]
    stop_reason: str
    summary: dict[str, Any]


class Annealer:
    """Simulated annealing with HMC and validation-based early stopping, with checkpoints.

    Use :meth:`create` for a new anneal in a directory, :meth:`open` to continue one, then
    :meth:`run`.
    """

    def __init__(self, out_dir: Path, setup: Setup, chain: Any, rng: np.random.Generator,
                 n_done: int, table: dict[str, list[float]], best_theta: FloatArray | None,
                 best: dict[str, Any], run_uuid: str, status: str, stop_reason: str,
                 counters: dict[str, Any], created: str) -> None:
        self.dir = Path(out_dir)
        self.s = setup
        self.chain = chain
        self.rng = rng
        self.n_done = n_done
        self.table = table
        self.best_theta = best_theta
        self.best = best
        self.run_uuid = run_uuid
        self.status = status
        self.stop_reason = stop_reason
        self.counters = counters
        self.created = created

    # -- construction --------------------------------------------------------------------

    def _hmc(self, temperature: float) -> Any:
        from thermonet.samplers.hmc import HMC

        return HMC(self.s.potential, prior=self.s.prior, temperature=float(temperature),
                   masses=self.s.masses, config=self.s.hmc_config)

    @classmethod
    def create(cls, cfg: cfgmod.ResolvedConfig, out_dir: str | Path, *,
               overwrite: bool = False) -> Annealer:
        """Set up a new anneal in ``out_dir``: initial parameters, checkpoint at 0 temperatures."""
        out = Path(out_dir)
        path = out / ANNEAL_H5
        if path.exists() and not overwrite:
            raise ConfigError(f"{out} already holds an anneal ({path}); continue it with "
                              "--resume, pass --overwrite to discard it, or choose another --out")
        t0, c0 = time.monotonic(), time.process_time()
        setup = build(cfg)             # data errors surface before anything is removed
        out.mkdir(parents=True, exist_ok=True)
        for name in (ANNEAL_H5, ANNEAL_JSON, ANNEAL_H5 + ".tmp"):
            (out / name).unlink(missing_ok=True)
        a = cfg["anneal"]
        rng_init = np.random.default_rng(setup.seeds[0])
        if a["start"] == "params":
            from thermonet.params import load_params

            theta = load_params(a["params"], setup.arch.n_params)
        else:
            theta = setup.arch.initial_draw(rng_init)
            if a["start"] == "minimum":
                from thermonet import registry

                mcls = registry.load("minimiser", cfg["minimiser"]["name"])
                mini = mcls(**{k: (tuple(v) if isinstance(v, list) else v)
                               for k, v in cfg["minimiser"].items() if k != "name"})
                theta = mini.minimise(setup.potential, theta, prior=setup.prior).theta
        rng = np.random.default_rng(setup.seeds[1])
        self = cls(out, setup, None, rng, 0, {c: [] for c in TABLE_COLUMNS}, None, {},
                   str(uuid.uuid4()), "running", "", {"elapsed_s": 0.0}, _now())
        self.chain = self._hmc(setup.schedule[0]).init(theta)
        self.counters["init_s"] = time.monotonic() - t0
        self.counters["elapsed_s"] = self.counters["init_s"]
        self.counters["cpu_s"] = time.process_time() - c0
        self.write()
        return self

    @classmethod
    def open(cls, out_dir: str | Path, cfg: cfgmod.ResolvedConfig | None = None) -> Annealer:
        """Reopen the anneal in ``out_dir`` at its last completed temperature.

        ``cfg``, if given, must equal the stored configuration.
        """
        import tomllib

        out = Path(out_dir)
        ck = read_anneal(out / ANNEAL_H5, full=True)
        stored = resolve_config(tomllib.loads(ck["config_toml"]))
        if cfg is not None:
            changed = cfgmod.diff(stored, cfg)
            if changed:
                what = "; ".join(f"{k}: {a!r} -> {b!r}" for k, a, b in changed)
                raise CheckpointMismatchError(
                    f"cannot resume {out}: the configuration differs from the stored one "
                    f"({what}). Use the same configuration, or start anew with --overwrite "
                    "or another --out")
        (out / (ANNEAL_H5 + ".tmp")).unlink(missing_ok=True)
        setup = build(stored)
        if not np.array_equal(setup.validation.indices, ck["validation_indices"]):
            raise CheckpointMismatchError(
                f"cannot resume {out}: the validation images differ from the stored ones (the "
                f"pool is now {setup.validation.provenance['pool']!r}; was the full MNIST "
                "added or removed?). Restore the data, or start anew with --overwrite")
        from thermonet.samplers.hmc import HMCState

        c = ck["chain"]
        chain = HMCState(np.ascontiguousarray(c["theta"]), float(c["energy"]),
                         np.ascontiguousarray(c["grad"]), float(c["step_size"]))
        e = setup.potential.energy(chain.theta)
        if not (e == chain.energy or abs(e - chain.energy) <= 1e-9 * max(1.0, abs(chain.energy))):
            raise CheckpointMismatchError(
                f"cannot resume {out}: E(theta) is {e:.10g} now but {chain.energy:.10g} in the "
                "checkpoint; the data set or architecture changed. Start anew with --overwrite")
        rng = np.random.default_rng(setup.seeds[1])
        rng.bit_generator.state = ck["rng"]
        table = {k: [float(v) for v in ck["table"].get(k, [])] for k in TABLE_COLUMNS}
        return cls(out, setup, chain, rng, ck["n_done"], table, ck.get("theta"), ck["best"],
                   ck["run_uuid"], ck["status"], ck["stop_reason"], ck["counters"],
                   ck["created_utc"])

    # -- running ---------------------------------------------------------------------------

    @property
    def is_done(self) -> bool:
        return self.status != "running"

    def _validation(self, theta: FloatArray) -> tuple[float, float]:
        from thermonet.evaluation import classification_error

        v = self.s.validation
        err = classification_error(self.s.arch, theta, v.x, v.y)
        return err, float(self.s.val_potential.energy(theta)) / len(v)

    def run(self, *, max_temperatures: int | None = None,
            progress: Callable[[Annealer], Any] | None = None) -> Annealer:
        """Anneal until the stopping rule fires or the schedule ends.

        Parameters
        ----------
        max_temperatures : int, optional
            Do at most this many temperatures in this call (then return, checkpointed): an
            interruption at a temperature boundary.
        progress : callable, optional
            ``progress(self)`` after every temperature.
        """
        from thermonet.kernels import threads

        with threads.blas_single():
            return self._run(max_temperatures, progress)

    def _run(self, max_temperatures: int | None,
             progress: Callable[[Annealer], Any] | None) -> Annealer:
        n_new = 0
        while not self.is_done and (max_temperatures is None or n_new < max_temperatures):
            self._one_temperature(self.n_done)
            n_new += 1
            if progress is not None:
                progress(self)
        if self.is_done and "test" not in self.best:
            self._finish()
        return self

    def _one_temperature(self, k: int) -> None:
        a = self.s.cfg["anneal"]
        t0, c0 = time.monotonic(), time.process_time()
        temp = float(self.s.schedule[k])
        hmc = self._hmc(temp)
        state = self.chain
        factor = 0.1 if k == 0 else a["adapt_factor"]
        state = hmc.adapt(state, self.rng, factor=factor)
        n_acc = n_div = 0
        e_n, verr_n, ven_n = [], [], []
        best_key = (math.inf, math.inf)
        best_theta: FloatArray | None = None
        best_j = -1
        for j in range(a["n_trajectories"]):
            if j > 0 and a["adapt_every"] and j % a["adapt_every"] == 0:
                state = hmc.adapt(state, self.rng, factor=a["adapt_factor"])
            state, info = hmc.step(state, self.rng)
            n_acc += bool(info.is_accepted)
            n_div += bool(info.is_divergent)
            err, ven = self._validation(state.theta)
            if (err, ven) < best_key:
                best_key, best_theta, best_j = (err, ven), state.theta.copy(), j
            if j >= a["burn_in"]:
                e_n.append(state.energy)
                verr_n.append(err)
                ven_n.append(ven)
        self.chain = state
        row = {
            "temperature": temp, "step_size": float(state.step_size),
            "acceptance": n_acc / a["n_trajectories"], "n_divergent": float(n_div),
            "energy_mean": float(np.mean(e_n)), "energy_std": float(np.std(e_n)),
            "val_error_mean": float(np.mean(verr_n)), "val_error_std": float(np.std(verr_n)),
            "val_energy_mean": float(np.mean(ven_n)),
            "val_error_min": best_key[0], "val_energy_at_min": best_key[1],
        }
        curve = [*self.table["val_error_mean"], row["val_error_mean"]]
        row["running_average"] = float(running_average(curve, a["window"])[-1])
        prev = (self.best.get("val_error", math.inf), self.best.get("val_energy_per_point",
                                                                     math.inf))
        if best_key < prev:
            self.best_theta = best_theta
            self.best = {"val_error": best_key[0], "val_energy_per_point": best_key[1],
                         "temperature_index": k, "temperature": temp, "trajectory": best_j}
        self.n_done = k + 1
        stop = stop_index(curve, a["patience"], a["window"], a["min_delta"])
        if stop is not None:
            k_best = best_index(running_average(curve, a["window"]), a["min_delta"])
            self.status = "stopped"
            self.stop_reason = (f"the average validation error did not improve for "
                                f"{a['patience']} temperature(s) after T = "
                                f"{self.s.schedule[k_best]:.6g}")
        elif self.n_done == len(self.s.schedule):
            self.status, self.stop_reason = "finished", "end of the schedule"
        row["seconds"] = time.monotonic() - t0
        for c in TABLE_COLUMNS:
            self.table[c].append(float(row[c]))
        self.counters["elapsed_s"] = self.counters.get("elapsed_s", 0.0) + row["seconds"]
        self.counters["cpu_s"] = self.counters.get("cpu_s", 0.0) + time.process_time() - c0
        self.write()

    def _finish(self) -> None:
        """Evaluate the best parameters on the training and test sets; write the results."""
        from thermonet.evaluation import classification_error, evaluate

        if self.best_theta is None:     # cannot happen: a finished anneal did a temperature
            raise ConfigError("the anneal finished without completing a temperature")
        arch, theta = self.s.arch, self.best_theta
        test = self.s.test
        e_test = float(arch.potential(test).energy(theta))
        full = evaluate(arch, self.s.split, theta, self.s.prior)
        self.best.update({
            "train_energy": full["train_energy"],
            "train_error": full["train_error"],
            "test": {"set": test.name, "kind": self.s.split.test_kind, "n": len(test),
                     "energy_per_point": e_test / len(test),
                     "error": classification_error(arch, theta, test.x, test.y)},
            "test_full": {"set": full["test_set"], "n": full["n_test"],
                          "energy_per_point": full["test_energy_per_point"],
                          "error": full["test_error"]},
            "in_prior_box": full["in_prior_box"],
        })
        self.write()
        summary = self.summary()
        tmp = self.dir / (ANNEAL_JSON + ".tmp")
        tmp.write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        import os

        os.replace(tmp, self.dir / ANNEAL_JSON)

    def result(self) -> AnnealResult:
        """The outcome (after :meth:`run` has finished)."""
        if self.best_theta is None:
            raise ConfigError("the anneal has not completed a temperature yet; run it first")
        return AnnealResult({k: np.asarray(v) for k, v in self.table.items()},
                            self.best_theta, dict(self.best), self.stop_reason, self.summary())

    def summary(self) -> dict[str, Any]:
        """A JSON-serialisable summary (what ``anneal.json`` holds)."""
        def num(v: Any) -> Any:
            return None if isinstance(v, float) and not math.isfinite(v) else v

        s = self.s
        return {
            "format": ANNEAL_FORMAT, "thermonet_version": __version__, "run_uuid": self.run_uuid,
            "status": self.status, "stop_reason": self.stop_reason,
            "architecture": s.arch.describe(), "train_set": s.split.train.name,
            "n_train": len(s.split.train),
            "validation": {"set": s.validation.name, "n": len(s.validation),
                           "pool": s.validation.provenance["pool"]},
            "test": {"set": s.test.name, "kind": s.split.test_kind, "n": len(s.test)},
            "schedule": [float(t) for t in s.schedule],
            "n_temperatures_done": self.n_done,
            "table": {k: [num(x) for x in v] for k, v in self.table.items()},
            "best": {k: num(v) for k, v in self.best.items()},
            "elapsed_s": self.counters.get("elapsed_s", 0.0),
            "cpu_s": self.counters.get("cpu_s", 0.0),
            "init_s": self.counters.get("init_s", 0.0),
            "config": s.cfg.data,
        }

    # -- checkpoint ------------------------------------------------------------------------

    def write(self) -> Path:
        """Atomically replace ``DIR/anneal.h5`` (the checkpoint and the result)."""
        from thermonet.checkpoint import _atomic_h5

        path = self.dir / ANNEAL_H5
        s = self.s

        def write(fh: Any) -> None:
            fh.attrs["format"] = ANNEAL_FORMAT
            fh.attrs["format_version"] = ANNEAL_FORMAT_VERSION
            fh.attrs["thermonet_version"] = __version__
            fh.attrs["run_uuid"] = self.run_uuid
            fh.attrs["n_done"] = np.int64(self.n_done)
            fh.attrs["status"] = self.status
            fh.attrs["stop_reason"] = self.stop_reason
            fh.attrs["config_toml"] = s.cfg.to_toml()
            fh.attrs["config_sources"] = json.dumps(s.cfg.sources, sort_keys=True)
            fh.attrs["rng"] = json.dumps(self.rng.bit_generator.state)
            fh.attrs["counters"] = json.dumps(self.counters, sort_keys=True)
            fh.attrs["best"] = json.dumps(self.best, sort_keys=True)
            fh.attrs["created_utc"] = self.created
            fh.attrs["updated_utc"] = _now()
            if self.best_theta is not None:
                d = fh.create_dataset("theta", data=self.best_theta)
                d.attrs["axes"] = "param"
                d.attrs["description"] = "parameters with the lowest validation error"
            g = fh.create_group("chain")
            g.create_dataset("theta", data=self.chain.theta).attrs["axes"] = "param"
            g.create_dataset("grad", data=self.chain.grad).attrs["axes"] = "param"
            g.attrs["energy"] = float(self.chain.energy)
            g.attrs["step_size"] = float(self.chain.step_size)
            fh.create_dataset("schedule/temperature_k", data=s.schedule).attrs["axes"] = "k"
            t = fh.create_group("table")
            t.attrs["axes"] = "k (completed temperatures, hottest first)"
            for c in TABLE_COLUMNS:
                t.create_dataset(c, data=np.asarray(self.table[c], dtype=np.float64))
            v = fh.create_group("validation")
            v.create_dataset("indices", data=s.validation.indices).attrs["axes"] = "d"
            v.attrs["pool"] = s.validation.provenance["pool"]
            v.attrs["name"] = s.validation.name

        _atomic_h5(path, write)
        return path


def read_anneal(path: str | Path, *, full: bool = False) -> dict[str, Any]:
    """Read ``anneal.h5`` (or a directory holding it) with one-line errors.

    Returns a dict with ``n_done``, ``status``, ``stop_reason``, ``best`` (dict), ``table``
    (column -> array), ``schedule``, ``theta`` (best parameters, or None), and with
    ``full=True`` also ``chain``, ``rng``, ``config_toml``, ``validation_indices``, ...
    """
    import h5py

    p = Path(path)
    if p.is_dir():
        p = p / ANNEAL_H5
    if not p.is_file():
        raise CheckpointFormatError(f"no anneal at {p}; expected a directory made by "
                                    "`thermonet anneal CONFIG --out DIR`")
    try:
        fh = h5py.File(p, "r")
    except OSError as err:
        raise CheckpointFormatError(f"{p} is not a readable HDF5 file ({err})") from None
    with fh:
        if fh.attrs.get("format") != ANNEAL_FORMAT:
            raise CheckpointFormatError(f"{p} is not a thermonet anneal file (format "
                                        f"{fh.attrs.get('format')!r}; expected "
                                        f"{ANNEAL_FORMAT!r})")
        version = int(fh.attrs.get("format_version", -1))
        if version != ANNEAL_FORMAT_VERSION:
            raise CheckpointFormatError(f"{p} has anneal format version {version}; this "
                                        f"thermonet ({__version__}) reads version "
                                        f"{ANNEAL_FORMAT_VERSION}")
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
                    "chain": {"theta": fh["chain/theta"][()], "grad": fh["chain/grad"][()],
                              "energy": float(fh["chain"].attrs["energy"]),
                              "step_size": float(fh["chain"].attrs["step_size"])},
                    "validation_indices": fh["validation/indices"][()],
                })
        except (KeyError, ValueError, OSError) as err:
            raise CheckpointFormatError(f"{p} is incomplete or corrupt ({err}); expected a "
                                        "thermonet anneal file") from None
    return out


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


__all__ = [
    "ANNEAL_H5",
    "ANNEAL_JSON",
    "ANNEAL_KEYS",
    "TABLE_COLUMNS",
    "AnnealResult",
    "Annealer",
    "Setup",
    "best_index",
    "build",
    "geometric_schedule",
    "load_config",
    "make_validation",
    "read_anneal",
    "resolve_config",
    "running_average",
    "schedule_of",
    "stop_index",
    "without",
]
