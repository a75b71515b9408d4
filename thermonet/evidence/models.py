"""The models of an evidence calculation and its run directory."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from thermonet import config as cfgmod
from thermonet.errors import CheckpointMismatchError, ConfigError
from thermonet.evidence import config as evcfg
from thermonet.io.atomic import write_text
from thermonet.io.checkpoint import CHECKPOINT

CONFIG_NAME = "evidence.toml"


def prepare_dir(cfg: cfgmod.ResolvedConfig, out: Path) -> cfgmod.ResolvedConfig:
    """Create ``out`` or check that it holds this configuration; store the configuration.

    A directory holding a different evidence configuration (other than the extendable keys
    :data:`thermonet.evidence.config.EXTENDABLE`), or a sampling run, is refused.
    """
    out = Path(out)
    if (out / CHECKPOINT).exists():
        raise ConfigError(f"{out} holds a `thermonet run` sampling run, not an evidence "
                          "calculation; choose another --out")
    stored_path = out / CONFIG_NAME
    if stored_path.is_file():
        try:
            stored = evcfg.resolve(cfgmod.parse_toml(stored_path.read_text(encoding="utf-8")))
        except (ConfigError, cfgmod.TOMLDecodeError) as err:
            raise CheckpointMismatchError(f"{stored_path} cannot be read back ({err}); choose "
                                          "another --out") from None
        names = set(stored["model"]) | set(cfg["model"])
        ignore = evcfg.EXTENDABLE + tuple(f"model.{n}.{k}" for n in sorted(names)
                                          for k in evcfg.EXTENDABLE_MODEL_KEYS)
        changed = cfgmod.diff(stored, cfg, ignore=ignore)
        if changed:
            what = "; ".join(f"{k}: {a!r} -> {b!r}" for k, a, b in changed[:4])
            more = f" and {len(changed) - 4} more" if len(changed) > 4 else ""
            raise CheckpointMismatchError(
                f"{out} holds an evidence calculation with a different configuration ({what}"
                f"{more}); re-run with the same config to continue it, or choose another --out")
    elif out.is_dir() and any(out.iterdir()):
        raise ConfigError(f"{out} is not empty and holds no evidence calculation; choose "
                          "another --out")
    out.mkdir(parents=True, exist_ok=True)
    write_text(stored_path, cfg.to_toml())
    return cfg


@dataclass
class Model:
    """One model of the comparison: architecture, potential and box prior."""

    name: str
    settings: dict[str, Any]
    arch: Any
    potential: Any
    prior: Any

    @property
    def n_params(self) -> int:
        return int(self.arch.n_params)


def build_models(cfg: cfgmod.ResolvedConfig) -> list[Model]:
    """Load the data once and build every model's potential and prior."""
    from thermonet import registry
    from thermonet.priors import BoxPrior

    data = cfg["data"]
    split = None
    if data["name"] != "none":
        from thermonet.data import load_data

        split = load_data(data["name"], test=data["test"])
    models = []
    for name, m in cfg["model"].items():
        settings = {k: (list(v) if isinstance(v, tuple) else v) for k, v in m.items()
                    if k not in evcfg.MODEL_KEYS}
        arch = registry.get_architecture(m["architecture"], **settings)
        pot = arch.potential(split.train) if split is not None else arch.potential()
        models.append(Model(name, dict(m), arch, pot, BoxPrior.for_architecture(arch)))
    return models


def build_minimiser(cfg: cfgmod.ResolvedConfig) -> Any:
    """The minimiser of the ``[minimiser]`` table, through the registry."""
    from thermonet import registry

    table = dict(cfg["minimiser"])
    name = table.pop("name")
    return registry.load("minimiser", name)(**table)


def loaded_vectors(model: Model, n: int) -> list[tuple[np.ndarray, str]]:
    """The first ``n`` parameter vectors of the model's ``params`` files, each with a label
    saying where it came from."""
    from thermonet.params import load_params

    out: list[tuple[np.ndarray, str]] = []
    for path in model.settings["params"]:
        p = Path(path)
        rows = evcfg.rows_in(p)
        for r in range(rows):
            if len(out) >= n:
                return out
            theta = load_params(p, model.n_params, index=r if rows > 1 else None)
            out.append((theta, f"{p}" + (f" row {r}" if rows > 1 else "")))
    return out


@dataclass
class Minimum:
    """One minimum of one model: where it is, once found or loaded."""

    model: Model
    index: int
    theta: np.ndarray | None = None
    info: dict[str, Any] | None = None
