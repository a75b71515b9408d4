"""The reference lines of a ``thermonet baseline`` result, for ``thermonet analyse
--baseline``: read from its JSON summary, or evaluated from its saved minima."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from thermonet.analysis.samples import evaluate_samples
from thermonet.errors import ConfigError


def read_baseline(path: str | Path, arch: Any, split: Any, workers: int,
                  warnings: list[str], world: Any = None) -> dict[str, float]:
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
        ev = evaluate_samples(arch, minima, test=split.test, predictive=False, workers=workers,
                              world=world)
        n_test = len(split.test.y)
        e = ev.test_energy / n_test
        k = minima.shape[0]

        def sem(a: np.ndarray) -> float:
            return float(np.std(a, ddof=1) / math.sqrt(k)) if k > 1 else math.nan

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
