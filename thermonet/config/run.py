"""The run configuration: TOML in, validated and fully resolved settings out.

One file describes a run (see docs/config.md for every key)::

    [run]          seed, n_iterations (total), checkpoint_every, sample_every, adapt_every, ...
    [data]         name (D50, D500, D5000, D<n>), test (auto | complement | official)
    [architecture] name (M1, M3, M3*, mlp, ...) and the architecture's own settings, among
                   them prior_scale (c of the box prior sigma_i = c/sqrt(k_i))
    [prior]        gaussian_std, gaussian_tempered (an optional Gaussian prior)
    [init]         minimise, burn_in, params (a file to start from instead of a draw)
    [minimiser]    name (rmin, fire) and its settings
    [sampler]      name (hmc, or a plugin): the per-temperature sampler, and its settings
    [ladder]       the temperatures (n_temperatures, t_min, t_max | temperatures), the
                   transitions per iteration and the swap scheme; one rung: a single chain

Validation happens before any work: unknown keys (with a did-you-mean suggestion), wrong types
and out-of-range values are rejected with a message naming the key, the value received and what
is allowed. Every default is made explicit in the resolved configuration, together with where
each value came from (``default``, ``config``, ``set`` for ``--set``, ``commandline``). Each
plugin's ``Config`` and the :class:`~thermonet.tempering.Ladder` are built once, here, and held
in the :class:`RunConfig`.

Configurations written before the ``[ladder]`` section (``[sampler] name = "rehmc"`` with
``[sampler.inner]``, or a single chain's ``[sampler] temperature``/``n_trajectories``) are
translated by :func:`thermonet.config.legacy.translate_legacy` with a DeprecationWarning naming
the new form.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from thermonet.accel import ENGINES
from thermonet.config import budget, local_budget_keys
from thermonet.config.data import (
    DATA_KEYS,
    absolute_data_paths,
    resolve_data_file,
    widths_from_data,
)
from thermonet.config.legacy import rename_sources, translate_legacy
from thermonet.config.schema import (
    ResolvedConfig,
    apply_overrides,
    plugin_defaults,
    plugin_settings,
    read_toml,
    resolve_section,
    suggest,
)
from thermonet.errors import ConfigError
from thermonet.parallel import EXECUTORS
from thermonet.tempering import SCHEMES, Ladder, make_scheme

log = logging.getLogger(__name__)

#: independent chains of a one-rung run when ``run.chains`` is unset (Stan's default: one
#: chain cannot see that it is stuck, several started apart can)
DEFAULT_CHAINS = 4

#: keys of the runner's own sections: name -> (default, allowed types, check, help)
_POS_INT = (lambda v: v >= 1, "an integer >= 1")
_NONNEG_INT = (lambda v: v >= 0, "an integer >= 0")
RUN_KEYS: dict[str, tuple[Any, tuple[type, ...], Any, str]] = {
    "seed": (0, (int,), _NONNEG_INT, "master seed of every random stream"),
    "n_iterations": (100, (int,), _POS_INT, "total iterations (resume continues up to it)"),
    "checkpoint_every": (10, (int,), _POS_INT, "iterations between checkpoints"),
    "sample_every": (10, (int,), _NONNEG_INT,
                     "iterations between stored parameter vectors (0: never)"),
    "adapt_every": (0, (int,), _NONNEG_INT,
                    ("iterations between step-size adaptations during production (0, the "
                     "default: only in warm-up, so production is an exact chain; the paper "
                     "adapted every 25, which biases averages)")),
    "adapt_factor": (0.9, (float, int), (lambda v: 0 < v < 1, "a number in (0, 1)"),
                     "multiplicative factor of the periodic adaptation"),
    "discard": (0.2, (float, int), (lambda v: 0 <= v < 1, "a fraction in [0, 1)"),
                "fraction of iterations discarded as burn-in in summaries"),
    "min_restarts": (20, (int,), _NONNEG_INT,
                     ("restarts after the discard that the mixing verdict requires of a "
                      "ladder (docs/samplers.md, \"The verdict\")")),
    "min_ess": (100.0, (float, int), (lambda v: v >= 0, "a number >= 0"),
                ("rank-normalised bulk ESS of the energy that the mixing verdict requires at "
                 "every rung")),
    "chains": (None, (int,), _POS_INT,
               ("independent chains of a one-rung run, from one seed, each from its own "
                "initial draw; the verdict compares them (split R-hat between chains). Unset: "
                f"{DEFAULT_CHAINS} on one rung (1 with engine = jax), 1 on a ladder, whose "
                "rungs already check each other; more than 1 on a ladder is refused")),
    "workers": (1, (int,), _POS_INT,
                "threads running replicas in parallel (in each MPI rank under MPI)"),
    "executor": ("auto", (str,), (lambda v: v in EXECUTORS, "one of " + ", ".join(EXECUTORS)),
                 ("where replicas run: auto (the ranks of an MPI job when mpiexec or srun "
                  "started several processes, else threads), threads, or mpi (docs/cluster.md); "
                  "never changes the result")),
    "engine": ("numba", (str,), (lambda v: v in ENGINES, "one of " + ", ".join(ENGINES)),
               ("what advances the replicas: numba (thermonet's compiled CPU kernels) or jax "
                "(every slot of the ladder at once as batched arrays, on a GPU where JAX has "
                "one; the `[jax]` extra); the chains agree in distribution, not bit for bit "
                "(docs/cluster.md)")),
}
PRIOR_KEYS: dict[str, tuple[Any, tuple[type, ...], Any, str]] = {
    "gaussian_std": (None, (float, int, dict), (
        lambda v: (all(isinstance(x, (int, float)) and x > 0 for x in v.values())
                   if isinstance(v, dict) else v > 0),
        "a positive width, or a table of positive widths by parameter group"),
        "add a Gaussian prior: one width, or widths per group (layer1.weight, bias, default...)"),
    "gaussian_tempered": (True, (bool,), None,
                          "true: target [p(D|w) p(w)]^(1/T); false: p(D|w)^(1/T) p(w)"),
}
INIT_KEYS: dict[str, tuple[Any, tuple[type, ...], Any, str]] = {
    "minimise": (True, (bool,), None, "minimise each initial draw with the minimiser"),
    "burn_in": ([20, 80], (list,), (lambda v: all(isinstance(n, int) and n >= 0 for n in v),
                                    "a list of non-negative integers"),
                "burn-in blocks: coarse dt adaptation then that many trajectories each"),
    "params": ("", (str,), None, "start every replica from this parameter file instead"),
    "params_index": (None, (int,), _NONNEG_INT,
                     "row of a multi-vector params file (.npy of shape (n, n_params))"),
}
#: ``[sampler] mass``: unit masses, the fan-in k_i, or the architecture's masses()
MASS_KINDS = ("unit", "fan_in", "architecture")
#: keys of [sampler] handled by the runner (not passed to the sampler's Config)
SAMPLER_RUNNER_KEYS: dict[str, tuple[Any, tuple[type, ...], Any, str]] = {
    "mass": ("unit", (str,), (lambda v: v in MASS_KINDS, "unit, fan_in or architecture"),
             "per-parameter masses: 1, the fan-in k_i, or the architecture's masses() array"),
}
_POSITIVE_LIST = (lambda v: all(isinstance(t, (int, float)) and not isinstance(t, bool)
                                for t in v), "a list of positive numbers, e.g. [0.5, 1.0, 2.0]")
_FINITE_T = (lambda v: math.isfinite(v) and v > 0,
             "a finite positive temperature (prior_rung = true adds a rung at T = inf)")
#: most random-pairs swap attempts per iteration: more cannot mix the ladder further (the
#: configurations do not move between attempts) and the draws alone would take seconds
MAX_SWAPS = 1_000_000
LADDER_KEYS: dict[str, tuple[Any, tuple[type, ...], Any, str]] = {
    "n_temperatures": (1, (int,), _POS_INT,
                       "K, rungs of the geometric ladder (1: a single chain at t_min)"),
    "t_min": (1.0, (float, int), _FINITE_T, "lowest temperature T_0"),
    "t_max": (1.0, (float, int), _FINITE_T, "highest temperature T_{K-1} (t_min <= t_max)"),
    "temperatures": ([], (list,), _POSITIVE_LIST,
                     ("an explicit ascending ladder, replacing n_temperatures, t_min, t_max; "
                      "[] (the default, which every resolved config.toml records) means unset: "
                      "the geometric ladder")),
    "n_trajectories": (1, (int,), _POS_INT,
                       "N_traj, transitions of the sampler per slot per iteration"),
    "slow_band": ([], (list,), _POSITIVE_LIST,
                  ("[T_low, T_high]: a band of temperatures where the local sampler is slow "
                   "(find it with `thermonet plot --kind flow`); its rungs run "
                   "slow_band_trajectories transitions per iteration; [] (the default): none")),
    "slow_band_trajectories": (0, (int,), _NONNEG_INT,
                               ("transitions per iteration at the rungs in slow_band (>= "
                                "n_trajectories; 0: slow_band unused)")),
    "swap_scheme": ("random-pairs", (str,), (lambda v: v in SCHEMES,
                                             "one of " + ", ".join(SCHEMES)),
                    ("random-pairs: n_swaps attempts on random adjacent pairs after the "
                     "transitions (paper Alg. 2); even-odd: one sweep of disjoint pairs before "
                     "them, starting at a random parity; deo: non-reversible parallel "
                     "tempering, even pairs at even iterations and odd pairs at odd ones, "
                     "after the transitions (Syed et al. 2022)")),
    "n_swaps": (None, (int,), (lambda v: 0 <= v <= MAX_SWAPS,
                               f"an integer in [0, {MAX_SWAPS}]"),
                "attempts per iteration of random-pairs (unset: K)"),
    "prior_rung": (False, (bool,), None,
                   ("add a rung at T = inf (beta = 0) above the ladder that draws exact, "
                    "independent samples from the prior (the box; an mlp-regression "
                    "model's own Gaussian prior, its hyperparameters drawn first): a replica "
                    "that reaches it is regenerated (a restart; Syed et al. 2022)")),
    "adapt_rounds": (0, (int,), _NONNEG_INT,
                     ("warm-up rounds of ladder adaptation before iteration 1, each twice as "
                      "long as the one before: the rungs move to equalise the swap rejection "
                      "rates (Syed et al. 2022, Alg. 4), then the ladder is frozen; 0: the "
                      "ladder is used as given")),
    "adapt_round_length": (8, (int,), _POS_INT,
                           "iterations of the first ladder-adaptation round"),
    "adapt_masses": (0, (int,), _NONNEG_INT,
                     ("warm-up iterations (after any ladder adaptation) from which each rung's "
                      "diagonal mass matrix is estimated (inverse sampled variances), then "
                      "frozen; 0: the [sampler] mass setting at every rung")),
    "retune_iterations": (0, (int,), _NONNEG_INT,
                          ("warm-up iterations per correction round (after the ladder and "
                           "masses), with swaps as in production and step sizes frozen, over "
                           "which each rung's acceptance rate is measured; then each rung's "
                           "step size is corrected towards the sampler's target (HMC: the law "
                           "a = 2 Phi(-c dt^2)); frozen after the last round; 0: no "
                           "correction")),
    "retune_rounds": (2, (int,), _POS_INT,
                      ("rounds of the step-size correction (the law is accurate near the "
                       "target only, so a second round fixes what the first could not)")),
    **local_budget_keys.KEYS,
    "anchors": ([], (list,), _POSITIVE_LIST,
                ("temperatures of the initial ladder that ladder adaptation never moves "
                 "(e.g. [1.0] to keep the posterior's own rung); the two ends never move")),
}
SECTIONS = ("run", "data", "architecture", "prior", "init", "minimiser", "sampler", "ladder")
PLUGIN_SECTIONS = {"architecture": "architecture", "minimiser": "minimiser",
                   "sampler": "sampler"}
DEFAULT_NAMES = {"architecture": "M3", "minimiser": "rmin", "sampler": "hmc"}

@dataclasses.dataclass
class RunConfig(ResolvedConfig):
    """A resolved run configuration and what is built from it once.

    Attributes
    ----------
    configs : dict
        Plugin section -> the plugin's ``Config`` instance (or its settings dict for a plugin
        configured through its constructor).
    ladder : Ladder
        The temperatures.
    swap : swap scheme
        See :mod:`thermonet.tempering.swaps`.
    """

    configs: dict[str, Any] = dataclasses.field(default_factory=dict)
    ladder: Ladder = dataclasses.field(default_factory=Ladder.single)
    swap: Any = None


def _resolve_ladder(given: Mapping[str, Any], sources: dict[str, str],
                    given_sources: Mapping[str, str], afford: Any = None
                    ) -> tuple[dict[str, Any], Ladder, Any]:
    table, _ = resolve_section("ladder", given, LADDER_KEYS, sources, given_sources)
    if afford is not None:   # before the ladder's arrays exist
        afford((len(table["temperatures"]) or table["n_temperatures"])
               + bool(table["prior_rung"]))
    if table["temperatures"]:
        ladder = Ladder.from_temperatures(table["temperatures"])
        derived = {"n_temperatures": ladder.n_temperatures,
                   "t_min": float(ladder.temperature_k[0]),
                   "t_max": float(ladder.temperature_k[-1])}
        for key, value in derived.items():
            if sources[f"ladder.{key}"] != "default" and table[key] != value:
                raise ConfigError(f"ladder.{key} = {table[key]!r} disagrees with "
                                  f"ladder.temperatures = {table['temperatures']}; give either "
                                  "temperatures or n_temperatures, t_min, t_max")
        table.update(derived)
        table["temperatures"] = [float(t) for t in ladder.temperature_k]
    else:
        ladder = Ladder.geometric(table["t_min"], table["t_max"], table["n_temperatures"])
    if table["prior_rung"]:
        ladder = ladder.with_prior_rung()
    for t in table["anchors"]:
        if not np.any(np.isclose(ladder.temperature_k, float(t), rtol=1e-12, atol=0.0)):
            raise ConfigError(f"ladder.anchors: {t!r} is not a rung of the initial ladder "
                              f"{[float(v) for v in ladder.temperature_k]}; list it in "
                              "ladder.temperatures")
    if table["adapt_rounds"] and ladder.n_temperatures < 3:
        raise ConfigError(f"ladder.adapt_rounds = {table['adapt_rounds']} needs at least 3 "
                          f"rungs to move; this ladder has {ladder.n_temperatures}")
    band, n_band = table["slow_band"], table["slow_band_trajectories"]
    if bool(band) != bool(n_band) or (band and (len(band) != 2 or band[0] > band[1]
                                                or n_band < table["n_trajectories"])):
        raise ConfigError(f"ladder.slow_band = {band}, slow_band_trajectories = {n_band}; "
                          "expected both or neither: [T_low, T_high] with T_low <= T_high, "
                          f"and at least n_trajectories = {table['n_trajectories']} "
                          "transitions, e.g. slow_band = [2.5, 4.5] and "
                          "slow_band_trajectories = 40")
    local_budget_keys.check(table)
    swap = make_scheme(table["swap_scheme"], n_swaps=table["n_swaps"])
    return table, ladder, swap


def _build_config(section: str, name: str, cls: type, settings: Mapping[str, Any]) -> Any:
    """The plugin's ``Config`` (its value checks run here, once), or its settings."""
    config_cls: Any = getattr(cls, "Config", None)
    if config_cls is None or not dataclasses.is_dataclass(config_cls):
        return dict(settings)
    factory: Any = config_cls
    try:
        return factory(**settings)
    except TypeError as err:
        raise ConfigError(f"[{section}] {name}: {err}") from None


def resolve(raw: Mapping[str, Any], overrides: Mapping[str, Any] | None = None,
            override_source: str = "set", *, warn_legacy: bool = True) -> RunConfig:
    """Validate ``raw`` (a parsed TOML document) plus dotted ``overrides`` and fill defaults.

    Loads the named plugins' classes (to validate their settings), which imports them, and
    builds each plugin's ``Config`` and the ladder. A configuration in the form used before
    ``[ladder]`` is translated (:func:`translate_legacy`; a DeprecationWarning if
    ``warn_legacy``).
    """
    from thermonet import registry

    doc, given_sources = apply_overrides(raw, overrides, override_source)
    doc, renamed = translate_legacy(doc, warn=warn_legacy)
    given_sources = rename_sources(given_sources, renamed)
    for section in doc:
        if section not in SECTIONS:
            raise ConfigError(f"unknown section [{section}]{suggest(section, list(SECTIONS))} "
                              f"Valid sections: {', '.join(SECTIONS)}")
        if not isinstance(doc[section], dict):
            raise ConfigError(f"[{section}] must be a table; got {doc[section]!r}")
    sources: dict[str, str] = {}
    out: dict[str, Any] = {}
    for section, schema in (("run", RUN_KEYS), ("data", DATA_KEYS), ("prior", PRIOR_KEYS),
                            ("init", INIT_KEYS)):
        out[section], _ = resolve_section(section, doc.get(section, {}), schema, sources,
                                          given_sources)
    file_widths = resolve_data_file(out["data"], sources, out["run"]["seed"])
    configs: dict[str, Any] = {}
    arch_cls: Any = None
    for section, role in PLUGIN_SECTIONS.items():
        given = dict(doc.get(section, {}))
        name = given.pop("name", DEFAULT_NAMES[section])
        sources[f"{section}.name"] = given_sources.get(
            f"{section}.name", "config" if "name" in doc.get(section, {}) else "default")
        if not isinstance(name, str):
            raise ConfigError(f"{section}.name = {name!r}; expected a plugin name (string)")
        cls = registry.load(role, name)
        if section == "architecture":
            arch_cls = cls
        table: dict[str, Any] = {"name": name}
        if section == "sampler":
            own, given = resolve_section("sampler", given, SAMPLER_RUNNER_KEYS, sources,
                                         given_sources, extra_ok=True)
            table.update(own)
        if section == "architecture":      # n_inputs, n_outputs: from a data file's columns
            widths = widths_from_data(name, plugin_defaults(cls), given, out["data"],
                                      file_widths)
            given_sources = {**given_sources, **{f"architecture.{k}": "data file"
                                                 for k in widths if k not in given}}
            given = widths
        settings = plugin_settings(section, cls, given, sources, given_sources)
        configs[section] = _build_config(section, name, cls, settings)
        table.update(settings)
        out[section] = table
        if section == "architecture" and not getattr(cls, "uses_data", True) \
                and out["data"]["name"] != "none":
            raise ConfigError(
                f"architecture {name!r} takes no data, but data.name = "
                f"{out['data']['name']!r} ({sources.get('data.name', 'default')}); add "
                '[data] name = "none" to the config')
    arch = _architecture(arch_cls, out["architecture"])

    def afford(n_slots: int) -> None:
        chains = out["run"]["chains"] if n_slots == 1 else 1
        if chains is None:
            chains = DEFAULT_CHAINS if out["run"]["engine"] != "jax" else 1
        budget.check_memory(budget.memory_estimate(arch, out["data"]["name"], n_slots * chains,
                                                   out["run"]["workers"]))

    out["ladder"], ladder, swap = _resolve_ladder(doc.get("ladder", {}), sources, given_sources,
                                                  afford if arch is not None else None)
    out["run"]["chains"] = resolve_chains(out["run"], ladder)
    if (out["prior"]["gaussian_std"] is not None and not out["prior"]["gaussian_tempered"]
            and ladder.n_temperatures > 1):
        raise ConfigError("prior.gaussian_tempered = false (an untempered Gaussian prior) cannot "
                          "be used with replica exchange, whose swaps need one target family "
                          "exp(-U/T); set it to true or use a one-rung [ladder]")
    return RunConfig(out, sources, configs=configs, ladder=ladder, swap=swap)


def resolve_chains(run: Mapping[str, Any], ladder: Ladder) -> int:
    """``run.chains`` resolved for ``ladder``: the number given, or the default (unset:
    :data:`DEFAULT_CHAINS` on one rung with the numba engine, else 1). More than one chain on
    a ladder of several rungs, or on the jax engine, is a one-line error."""
    chains = run.get("chains")
    one_rung = ladder.n_temperatures == 1
    if chains is None:
        return DEFAULT_CHAINS if one_rung and run.get("engine") != "jax" else 1
    if chains > 1 and not one_rung:
        raise ConfigError(f"run.chains = {chains} with a ladder of {ladder.n_temperatures} "
                          "rungs; independent chains are for one-rung runs (a ladder's rungs "
                          "already check each other): remove run.chains or set it to 1, or "
                          "use one rung ([ladder] n_temperatures = 1)")
    if chains > 1 and run.get("engine") == "jax":
        raise ConfigError(f"run.chains = {chains} with engine = 'jax'; the jax engine runs one "
                          "chain per rung: set run.chains = 1, or use engine = 'numba'")
    return int(chains)


def _architecture(cls: Any, table: Mapping[str, Any]) -> Any:
    """The architecture of ``[architecture]`` (cheap: no parameters are allocated), or None
    for a plugin configured through a ``Config`` the constructor does not take."""
    if cls is None:
        return None
    settings = {k: v for k, v in table.items() if k != "name"}
    try:
        return cls(**settings)
    except TypeError:
        return None
    except (ValueError, OverflowError) as err:
        raise ConfigError(f"[architecture] {table['name']}: {err}; check its settings") from None


def build_plugin_configs(cfg: ResolvedConfig) -> dict[str, Any]:
    """Each plugin section's ``Config`` (built once by :func:`resolve`)."""
    if isinstance(cfg, RunConfig):
        return dict(cfg.configs)
    return dict(resolve(cfg.data, warn_legacy=False).configs)


def load(path: str | Path, overrides: Mapping[str, Any] | None = None,
         commandline: Mapping[str, Any] | None = None) -> RunConfig:
    """Read, merge (file < --set < command-line options) and validate a run configuration."""
    merged = dict(overrides or {})
    merged.update(commandline or {})
    raw = read_toml(path)
    absolute_data_paths(raw, Path(path).resolve().parent, merged)
    if not raw:
        raise ConfigError(
            f"config {path} is empty; expected at least one section (an empty file would run "
            "every default: M3 on D50). Start from sample_runs/quickstart.toml, or write [run] "
            "to run the defaults on purpose")
    cfg = resolve(raw, merged)
    for key in commandline or {}:
        cfg.sources[key] = "commandline"
    return cfg


def plan(cfg: RunConfig) -> str | None:
    """One line on what a run of ``cfg`` will compute (rungs x iterations x trajectories x L
    gradients and a rough time), or None when the architecture cannot be built cheaply; the
    command line prints it before a run starts."""
    arch = _architecture(registry_load("architecture", cfg["architecture"]["name"]),
                         cfg["architecture"])
    return None if arch is None else budget.plan(cfg, arch)


def registry_load(role: str, name: str) -> Any:
    """The registered plugin class ``name`` of ``role``."""
    from thermonet import registry

    return registry.load(role, name)


def sampler_masses(arch: Any, kind: str) -> Any:
    """The masses of ``[sampler] mass = kind`` for ``arch`` (None: unit masses)."""
    import numpy as np

    if kind == "unit":
        return None
    masses = arch.fan_in() if kind == "fan_in" else arch.masses()
    masses = np.asarray(masses, dtype=np.float64)
    if masses.shape != (arch.n_params,) or not np.all(np.isfinite(masses)) or np.any(masses <= 0):
        raise ConfigError(f"sampler.mass = {kind!r}: architecture {arch.name!r} gave masses of "
                          f"shape {masses.shape}; expected {arch.n_params} positive finite "
                          "numbers")
    return masses
