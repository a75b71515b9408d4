"""The ``thermonet evidence`` configuration: TOML in, validated settings out.

One file describes a model comparison (docs/evidence.md documents every key)::

    [evidence]      seed, temperature, repeats, n_minima, workers, executor, convergence,
                    convergence_minima, tolerance, laplace
    [data]          name (D500, ..., or "none" for data-free models), test
    [minimiser]     name (rmin, fire) and its settings; finds each model's minima
    [ti]            the thermodynamic-integration settings (thermonet.evidence.ti.TIConfig)
    [laplace]       method and the Laplace estimator's options
    [mackay]        with evidence.method = "mackay": MacKay's framework's settings
    [model.NAME]    one table per model: architecture (a registered name), params (minima to
                    load instead of minimising) and the architecture's own settings

Validation reuses :mod:`thermonet.config`: unknown keys get a did-you-mean suggestion, wrong
types and out-of-range values a one-line :class:`~thermonet.errors.ConfigError` naming the key,
the value received and what is allowed, all before any work starts.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from thermonet import config as cfgmod
from thermonet.errors import ConfigError
from thermonet.parallel import EXECUTORS
from thermonet.ranges import COUNT, NON_NEGATIVE_INT, POSITIVE

_POS_INT = (lambda v: v >= 1, "an integer >= 1")

#: how ``thermonet evidence`` computes each model's evidence
METHODS = ("ti", "mackay")

#: [evidence]: name -> (default, allowed types, check, help)
EVIDENCE_KEYS: dict[str, tuple[Any, tuple[type, ...], Any, str]] = {
    "seed": (0, (int,), (lambda v: v >= 0, "an integer >= 0"),
             "master seed: minima draws, every TI and Laplace run"),
    "temperature": (1.0, (float, int), (lambda v: v > 0, "a positive temperature"),
                    "T of the integral (the log evidence is the paper's quantity at T = 1)"),
    "repeats": (1, (int,), _POS_INT,
                "independent TI runs (different seeds) per minimum; summarised as mean ± sd"),
    "n_minima": (1, (int,), _POS_INT,
                 "minima per model (different initial draws, or rows of the params files)"),
    "workers": (1, (int,), _POS_INT, ("threads running minimisations and TI runs in parallel "
                                     "(in each MPI rank under MPI); never changes the result")),
    "executor": ("auto", (str,), (lambda v: v in EXECUTORS, "one of " + ", ".join(EXECUTORS)),
                 ("where the tasks run: auto (the ranks of an MPI job when mpiexec or srun "
                  "started several processes, else threads), threads, or mpi (docs/cluster.md); "
                  "never changes the result")),
    "convergence": (True, (bool,), None,
                    ("run the convergence report (k x0.5 and x2, twice the lambda points, twice "
                    "the samples, reverse sweep, another seed)")),
    "convergence_minima": (0, (int,), (lambda v: v >= 0, "an integer >= 0"),
                           ("with convergence: run the report at the first k minima of each "
                            "model only (0: at every minimum); the others run at the same, "
                            "checked settings and are marked unchecked")),
    "tolerance": (3.0, (float, int), (lambda v: v > 0, "a positive number of sigmas"),
                  "a variant agrees when |delta| < tolerance * sqrt(s_base^2 + s_variant^2)"),
    "laplace": (True, (bool,), None, "also compute the Laplace estimate at every minimum"),
    "method": ("ti", (str,), (lambda v: v in METHODS, "ti or mackay"),
               ("ti: thermodynamic integration at each model's minima (the paper's, with "
                "the Laplace estimate beside it); mackay: MacKay's framework for classifiers "
                "(a Gaussian prior per weight group, re-estimated weight decays, eq. 7, "
                "settings in [mackay]; [minimiser], [ti] and [laplace] are not used)")),
}

#: [mackay] (with evidence.method = "mackay"): name -> (default, types, check, help)
MACKAY_KEYS: dict[str, tuple[Any, tuple[type, ...], Any, str]] = {
    "restarts": (1, (int,), COUNT, "random starts per model"),
    "groups": ("layer", (str,), (lambda v: v in ("layer", "weights-biases"),
                                 "layer or weights-biases"),
               "one weight decay per layer, or per layer's weights and biases"),
    "curvature": ("gauss-newton", (str,), (lambda v: v in ("gauss-newton", "exact"),
                                           "gauss-newton or exact"),
                  "the Hessian A: the positive definite Gauss-Newton form, or exact"),
    "max_iter": (100, (int,), COUNT, "re-estimation cycles at most"),
    "tol": (1e-4, (float,), POSITIVE,
            "converged when every |change of ln alpha_c| per cycle is below this"),
    "newton_steps": (0, (int,), NON_NEGATIVE_INT,
                     "Newton steps after each minimisation (each costs a Hessian)"),
}

DATA_KEYS: dict[str, tuple[Any, tuple[type, ...], Any, str]] = {
    "name": ("D500", (str,), (lambda v: bool(v), "a data set name such as D500, or none"),
             "training set (none: data-free models such as gaussian)"),
    "test": ("official", (str,), (lambda v: v in ("auto", "complement", "official"),
                                  "one of auto, complement, official"),
             "test set of the data loader (the evidence does not use it)"),
}

LAPLACE_KEYS: dict[str, tuple[Any, tuple[type, ...], Any, str]] = {
    "method": ("auto", (str,), (lambda v: bool(v), "a method name such as auto"),
               "Laplace method (see the Laplace section of docs/evidence.md)"),
}

#: keys of a [model.NAME] table handled here (the rest are the architecture's settings)
MODEL_KEYS: dict[str, tuple[Any, tuple[type, ...], Any, str]] = {
    "architecture": ("", (str,), (lambda v: bool(v), "a registered architecture name"),
                     "architecture name: M1, M3, M3*, mlp, gaussian, ..."),
    "params": ([], (str, list), (lambda v: isinstance(v, str) or all(isinstance(p, str)
                                                                      for p in v),
                                 "a file name or a list of file names"),
               ("minima to load (.npy, paper JSON, HDF5; a 2-D array gives one per row) "
               "instead of minimising standard initial draws")),
    "global_log_evidence": ([], (list,), (lambda v: v == [] or (
        len(v) == 2 and all(isinstance(x, (int, float)) and not isinstance(x, bool)
                            and math.isfinite(x) for x in v) and v[1] >= 0),
        "[] or [log evidence, error], two finite numbers"),
        ("the model's log evidence from a prior-anchored ladder that mixed (`thermonet "
         "analyse` prints it), [value, error]: the census reports the fraction of it that "
         "the basins found explain")),
}

TI_METHODS = ("converged", "paper")
SECTIONS = ("evidence", "data", "minimiser", "ti", "laplace", "mackay", "model")

#: keys that may differ when a run directory is continued (they do not change any result
#: already stored; more repeats, minima or the convergence report only add work)
EXTENDABLE = ("evidence.workers", "evidence.executor", "evidence.repeats", "evidence.n_minima",
              "evidence.convergence", "evidence.convergence_minima", "evidence.laplace",
              "data.test")
#: per-model keys that may differ likewise (they only add a comparison to the summary)
EXTENDABLE_MODEL_KEYS = ("global_log_evidence",)

#: the default minimiser is RMin with the baseline's settings (E(D|w) ~ 1e-5 at the stop,
#: thermonet.baseline.BASELINE_RMIN_SETTINGS) and the box respected: the evidence integrates
#: over the box, so the minimum TI starts from must lie inside it
DEFAULT_MINIMISER = {"name": "rmin"}
RMIN_EVIDENCE_SETTINGS: dict[str, Any] = {"respect_box": True}


def _ti_config_class() -> type:
    try:
        from thermonet.evidence.ti.integration import TIConfig
    except ImportError as err:  # pragma: no cover - the engine ships with thermonet
        raise ConfigError(f"the thermodynamic-integration engine is unavailable ({err})"
                          ) from None
    return TIConfig


def _ti_settings(given: Mapping[str, Any], sources: dict[str, str],
                 given_sources: Mapping[str, str]) -> dict[str, Any]:
    """Validate [ti] against the fields of TIConfig (temperature comes from [evidence])."""
    ti_cls = _ti_config_class()
    given = dict(given)
    if "temperature" in given:
        raise ConfigError("ti.temperature is not a setting of [ti]; set evidence.temperature "
                          "(it applies to TI and Laplace alike)")
    if "method" in given and given["method"] not in TI_METHODS:
        raise ConfigError(f"ti.method = {given['method']!r} is not a TI method; expected one "
                          f"of {', '.join(repr(m) for m in TI_METHODS)} (\"paper\" is the "
                          "published legacy recipe)")
    # TIConfig without its temperature, so that the valid keys listed for a typo are exactly
    # the ones [ti] accepts
    import dataclasses

    kept = []
    for f in dataclasses.fields(ti_cls):
        if f.name == "temperature":
            continue
        default = (dataclasses.field(default_factory=f.default_factory)  # type: ignore[misc]
                   if f.default is dataclasses.MISSING else dataclasses.field(default=f.default))
        kept.append((f.name, f.type, default))
    holder = type("TI", (), {"Config": dataclasses.make_dataclass("TISettings", kept)})
    return cfgmod.plugin_settings("ti", holder, given, sources, given_sources)


def _laplace_option_names() -> set[str] | None:
    """Keyword options of laplace_evidence besides the fixed ones (None: accepts any)."""
    try:
        from thermonet.evidence.laplace import approximation as laplace
    except ImportError:
        return None
    sig = inspect.signature(laplace.laplace_evidence)
    if any(p.kind == p.VAR_KEYWORD for p in sig.parameters.values()):
        # the options of its methods, when the module lists them
        known: list[Any] = [getattr(laplace, n, None) for n in ("_DENSE_OPTIONS", "_SLQ_OPTIONS")]
        if all(isinstance(k, (set, frozenset, tuple, list)) for k in known):
            return set().union(*known)
        return None
    fixed = {"potential", "theta0", "prior", "temperature", "seed"}
    return {n for n, p in sig.parameters.items()
            if n not in fixed and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}


def _laplace_settings(given: Mapping[str, Any], sources: dict[str, str],
                      given_sources: Mapping[str, str]) -> dict[str, Any]:
    own, rest = cfgmod.resolve_section("laplace", given, LAPLACE_KEYS, sources, given_sources,
                                      extra_ok=True)
    valid = _laplace_option_names()
    for key, value in rest.items():
        if key in ("temperature", "seed"):
            raise ConfigError(f"laplace.{key} is not a setting of [laplace]; set "
                              f"evidence.{key} instead")
        if valid is not None and key not in valid:
            raise ConfigError(f"unknown key {key!r} in [laplace]"
                              f"{cfgmod.suggest(key, sorted(valid | {'method'}))} Valid keys: "
                              f"{', '.join(sorted(valid | {'method'}))}")
        sources[f"laplace.{key}"] = given_sources.get(f"laplace.{key}", "config")
        own[key] = value
    return own


def _model_settings(name: str, given: Any, sources: dict[str, str],
                    given_sources: Mapping[str, str]) -> dict[str, Any]:
    from thermonet import registry

    where = f"model.{name}"
    if not isinstance(given, dict):
        raise ConfigError(f"[{where}] must be a table; got {given!r}")
    if "architecture" not in given:
        raise ConfigError(f"[{where}] needs architecture = \"...\" (e.g. \"M1\", \"M3\", or "
                          "\"gaussian\" for a data-free test model)")
    own, rest = cfgmod.resolve_section(where, given, MODEL_KEYS, sources, given_sources,
                                      extra_ok=True)
    if isinstance(own["params"], str):
        own["params"] = [own["params"]] if own["params"] else []
    cls = registry.load("architecture", own["architecture"])
    settings = cfgmod.plugin_settings(where, cls, rest, sources, given_sources)
    return {**own, **settings}


def resolve(raw: Mapping[str, Any], overrides: Mapping[str, Any] | None = None,
            override_source: str = "set") -> cfgmod.ResolvedConfig:
    """Validate a parsed evidence TOML document plus dotted ``overrides``; fill defaults."""
    doc, given_sources = cfgmod.apply_overrides(raw, overrides, override_source)
    for section, table in doc.items():
        if section not in SECTIONS:
            hint = cfgmod.suggest(section, list(SECTIONS))
            if section in ("run", "sampler", "init", "architecture"):
                hint = (f"; this looks like a `thermonet run` config, which `thermonet "
                        f"evidence` does not read{hint}")
            raise ConfigError(f"unknown section [{section}] in an evidence config{hint} "
                              f"Valid sections: {', '.join(SECTIONS)}")
        if not isinstance(table, dict):
            raise ConfigError(f"[{section}] must be a table; got {table!r}")
    sources: dict[str, str] = {}
    out: dict[str, Any] = {}
    out["evidence"], _ = cfgmod.resolve_section("evidence", doc.get("evidence", {}),
                                               EVIDENCE_KEYS, sources, given_sources)
    out["data"], _ = cfgmod.resolve_section("data", doc.get("data", {}), DATA_KEYS, sources,
                                           given_sources)
    from thermonet import registry

    mgiven = dict(doc.get("minimiser", {}))
    mname = mgiven.pop("name", DEFAULT_MINIMISER["name"])
    sources["minimiser.name"] = given_sources.get(
        "minimiser.name", "config" if "name" in doc.get("minimiser", {}) else "default")
    if not isinstance(mname, str):
        raise ConfigError(f"minimiser.name = {mname!r}; expected a minimiser name (string)")
    if mname == "rmin":
        from thermonet.baseline import BASELINE_RMIN_SETTINGS

        for key, value in {**BASELINE_RMIN_SETTINGS, **RMIN_EVIDENCE_SETTINGS}.items():
            mgiven.setdefault(key, value)
    mcls = registry.load("minimiser", mname)
    out["minimiser"] = {"name": mname, **cfgmod.plugin_settings(
        "minimiser", mcls, mgiven, sources, given_sources)}
    out["ti"] = _ti_settings(doc.get("ti", {}), sources, given_sources)
    out["laplace"] = _laplace_settings(doc.get("laplace", {}), sources, given_sources)
    out["mackay"], _ = cfgmod.resolve_section("mackay", doc.get("mackay", {}), MACKAY_KEYS,
                                             sources, given_sources)
    models = doc.get("model", {})
    if not models:
        raise ConfigError("an evidence config needs at least one model: add a table such as "
                          "[model.M1] with architecture = \"M1\"")
    out["model"] = {name: _model_settings(name, table, sources, given_sources)
                    for name, table in models.items()}
    n_min = out["evidence"]["n_minima"]
    for name, m in out["model"].items():
        if m["params"]:
            n_have = count_params(m, n_min, name)
            if n_have < n_min:
                raise ConfigError(f"model.{name}.params holds {n_have} parameter vector(s) but "
                                  f"evidence.n_minima = {n_min}; give more files or lower "
                                  "n_minima")
    if out["evidence"]["method"] == "mackay" and out["data"]["name"].lower() == "none":
        raise ConfigError(
            "data.name = 'none' (no data: for the data-free models of TI, such as gaussian) "
            "with evidence.method = \"mackay\": MacKay's framework fits classifiers to a "
            "training set; expected a data set name such as D500; set data.name, or use "
            "evidence.method = \"ti\" for a data-free model")
    cfg = cfgmod.ResolvedConfig(out, sources)
    ti_config(cfg)          # the engine's own value checks, before any work
    return cfg


def count_params(model: Mapping[str, Any], limit: int, name: str = "NAME") -> int:
    """Number of parameter vectors in a model's params files (stops counting at ``limit``)."""
    n = 0
    for path in model["params"]:
        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"model.{name}.params: {p} does not exist (paths are relative to "
                              f"the working directory {Path.cwd()})")
        n += rows_in(p)
        if n >= limit:
            break
    return n


def rows_in(path: Path) -> int:
    import numpy as np

    if path.suffix.lower() == ".npy":
        arr = np.load(path, mmap_mode="r", allow_pickle=False)
        return int(arr.shape[0]) if arr.ndim == 2 else 1
    return 1


def ti_config(cfg: cfgmod.ResolvedConfig, **changes: Any) -> Any:
    """The TIConfig of ``cfg`` (with ``changes``); its value checks become ConfigErrors."""
    ti_cls = _ti_config_class()
    fields = {f.name for f in dataclasses.fields(ti_cls)}
    kwargs = {k: (tuple(v) if isinstance(v, list) else v) for k, v in cfg["ti"].items()}
    if "temperature" in fields:
        kwargs["temperature"] = cfg["evidence"]["temperature"]
    kwargs.update(changes)
    try:
        return ti_cls(**kwargs)
    except (TypeError, ValueError, ConfigError) as err:
        msg = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise ConfigError(f"[ti] settings rejected: {msg}") from None


def load(path: str | Path, overrides: Mapping[str, Any] | None = None,
         commandline: Mapping[str, Any] | None = None) -> cfgmod.ResolvedConfig:
    """Read, merge (file < --set < command-line options) and validate an evidence config."""
    return cfgmod.load_layers(path, overrides, commandline, resolve)


def reference_table() -> list[tuple[str, str, str, str]]:
    """(key, type, default, meaning) of the fixed sections, for the documentation."""
    rows = []
    for section, schema in (("evidence", EVIDENCE_KEYS), ("data", DATA_KEYS),
                            ("laplace", LAPLACE_KEYS), ("mackay", MACKAY_KEYS),
                            ("model.NAME", MODEL_KEYS)):
        for key, (default, types, _check, help_) in schema.items():
            rows.append((f"{section}.{key}", cfgmod.type_name(types), repr(default), help_))
    return rows


__all__ = ["EVIDENCE_KEYS", "EXTENDABLE", "EXTENDABLE_MODEL_KEYS", "TI_METHODS", "load",
           "resolve", "ti_config"]
