"""Classifiers compared by MacKay's evidence: the paper's M(1) and M(3) (or any registered
``mlp`` architectures) with Gaussian priors per layer, trained by
:func:`~thermonet.evidence.mackay.classify.mackay_classifier` on a data set, each with its
log evidence, its terms and its test error (MacKay 1992b; beside the box-prior thermodynamic
integration of Baldock & Marzari 2019, Sec. 4.2, this is a second, independent view of
their model selection: different prior, Gaussian approximation of each basin).
"""

from __future__ import annotations

import math
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from thermonet.errors import ConfigError

__all__ = ["GROUPINGS", "ClassifierRow", "compare_classifiers", "format_classifiers",
           "layer_groups"]

#: how the parameters are grouped, one weight decay per group
GROUPINGS = ("layer", "weights-biases")


@dataclass
class ClassifierRow:
    """One trained classifier: its evidence terms (nats), gamma per group, the re-estimated
    weight decays, and its errors at ``w_MP``."""

    model: str
    restart: int
    n_params: int
    log_evidence: float
    log_likelihood: float
    log_occam_w: float
    log_occam_hyper: float
    log_symmetry: float
    gamma: float
    groups: list[str]
    gamma_groups: list[float]
    alpha: list[float]
    train_error: float           # fraction misclassified
    test_error: float
    test_nll: float              # cross-entropy per test case at w_MP (no moderation)
    n_iter: int
    converged: bool
    factorisation: str
    seconds: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def layer_groups(arch: Any, grouping: str = "layer") -> dict[str, Any]:
    """The weight groups of an ``mlp`` architecture: one per layer (its weights and biases
    together), or ``"weights-biases"`` (the architecture's own groups: each layer's weights
    and its biases apart)."""
    if grouping not in GROUPINGS:
        raise ConfigError(f"grouping {grouping!r}; expected one of {GROUPINGS}")
    own = arch.param_groups()
    if grouping == "weights-biases":
        return dict(own)
    out: dict[str, list[int]] = {}
    for name, sel in own.items():
        layer = name.split(".")[0]
        idx = np.arange(arch.n_params)[sel] if isinstance(sel, slice) else np.asarray(sel)
        out.setdefault(layer, []).extend(int(i) for i in idx)
    return {k: np.array(sorted(v), dtype=np.int64) for k, v in out.items()}


def _errors(arch: Any, theta: Any, data: Any) -> tuple[float, float]:
    """Fraction misclassified and the mean cross-entropy of ``data`` at ``theta``."""
    pot = arch.potential(data)
    logits = np.asarray(pot.logits(theta, None), dtype=np.float64)
    y = np.asarray(data.y, dtype=np.int64)
    z = logits - logits.max(axis=1, keepdims=True)
    log_p = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    return (float(np.mean(np.argmax(logits, axis=1) != y)),
            float(-np.mean(log_p[np.arange(y.shape[0]), y])))


def compare_classifiers(models: Sequence[Any], data: str = "D500", restarts: int = 1, *,
                        seed: int = 0, grouping: str = "layer", test: str = "official",
                        progress: Callable[[ClassifierRow], None] | None = None,
                        **options: Any) -> list[ClassifierRow]:
    """MacKay's framework for each architecture in ``models`` (a registered name, an
    architecture, or a ``(name, architecture)`` pair) on ``data``, ``restarts`` random starts
    each (the start of (model, r) is seeded by ``seed``, the model's name and r, so any
    subset reproduces). ``options`` go to
    :func:`~thermonet.evidence.mackay.classify.mackay_classifier`."""
    from thermonet.data import load_data
    from thermonet.evidence.mackay.classify import mackay_classifier
    from thermonet.registry import get_architecture

    if int(restarts) < 1:
        raise ConfigError(f"restarts = {restarts}; expected a positive integer")
    split = load_data(data, test=test)
    rows: list[ClassifierRow] = []
    for model in models:
        if isinstance(model, tuple):
            name, arch = model
        else:
            arch = get_architecture(model) if isinstance(model, str) else model
            name = model if isinstance(model, str) else str(arch.describe()["name"])
        if not hasattr(arch, "param_groups"):
            raise ConfigError(f"architecture {name!r} has no weight groups; expected an mlp "
                              "classifier such as M1 or M3")
        groups = layer_groups(arch, grouping)
        for r in range(int(restarts)):
            t0 = time.perf_counter()
            start = int(np.random.SeedSequence(
                [int(seed), zlib.crc32(name.encode()), r]).generate_state(1)[0])
            res = mackay_classifier(arch, split.train, seed=start, groups=groups, **options)
            train_err, _ = _errors(arch, res.theta, split.train)
            test_err, test_nll = (_errors(arch, res.theta, split.test)
                                  if split.test is not None else (math.nan, math.nan))
            row = ClassifierRow(
                model=name, restart=r, n_params=int(arch.n_params),
                log_evidence=res.log_evidence, log_likelihood=res.log_likelihood,
                log_occam_w=res.log_occam_w, log_occam_hyper=res.log_occam_hyper,
                log_symmetry=res.log_symmetry, gamma=res.gamma, groups=list(res.group_names),
                gamma_groups=[float(g) for g in res.gamma_groups],
                alpha=[float(a) for a in res.alpha], train_error=train_err,
                test_error=test_err, test_nll=test_nll, n_iter=res.n_iter,
                converged=res.converged,
                factorisation=res.hessian_factor().method,
                seconds=time.perf_counter() - t0)
            rows.append(row)
            if progress is not None:
                progress(row)
    return rows


CLASSIFIER_HEADER = ("model", "restart", "log ev", "ln L(w_MP)", "Occam w", "Occam hyp",
                     "symmetry", "gamma", "train err", "test err", "test nll", "iter", "conv")


def format_classifiers(rows: Sequence[ClassifierRow]) -> str:
    """The comparison as a fixed-width text table, one line per network."""
    from thermonet.evidence.mackay.sweep import fixed_width

    return fixed_width(CLASSIFIER_HEADER, rows,
                       lambda r: [f"{r.model:>10}", f"{r.restart:>10d}"],
                       lambda r: [f"{r.train_error:>10.4f}", f"{r.test_error:>10.4f}",
                                  f"{r.test_nll:>10.4f}"])


def run_config(cfg: Any, out: Any, *, quiet: bool = True,
               progress: Callable[[ClassifierRow], None] | None = None
               ) -> list[ClassifierRow]:
    """``thermonet evidence`` with ``evidence.method = "mackay"``: every ``[model.NAME]`` of
    the configuration by MacKay's framework with the ``[mackay]`` settings, on ``[data]``;
    the configuration, ``summary.json`` (one row per model and restart) and ``table.txt`` go
    to ``out`` (a directory holding another configuration is refused)."""
    from pathlib import Path

    from thermonet import registry
    from thermonet.evidence import config as evcfg
    from thermonet.evidence.models import prepare_dir
    from thermonet.io.atomic import write_json, write_text

    out = Path(out)
    prepare_dir(cfg, out)
    mk = cfg["mackay"]
    models = []
    for name, m in cfg["model"].items():
        settings = {k: (list(v) if isinstance(v, tuple) else v) for k, v in m.items()
                    if k not in evcfg.MODEL_KEYS}
        models.append((name, registry.get_architecture(m["architecture"], **settings)))
    rows = compare_classifiers(
        models, cfg["data"]["name"], mk["restarts"], seed=cfg["evidence"]["seed"],
        grouping=mk["groups"], test=cfg["data"]["test"], progress=progress,
        max_iter=mk["max_iter"], tol=mk["tol"], newton_steps=mk["newton_steps"],
        curvature=mk["curvature"])
    write_json(out / "summary.json", {"method": "mackay", "rows": [r.as_dict() for r in rows]})
    write_text(out / "table.txt", format_classifiers(rows) + "\n")
    return rows


def progress_line(row: ClassifierRow) -> str:
    """One finished model and restart, for progress output."""
    return (f"{row.model} restart {row.restart}: log evidence {row.log_evidence:.2f}, test "
            f"error {row.test_error:.4f}, {row.n_iter} cycles ({row.seconds:.0f} s)")


def best_line(rows: Sequence[ClassifierRow]) -> str | None:
    """The model and restart of the highest log evidence, or None if none is finite."""
    best = max((r for r in rows if math.isfinite(r.log_evidence)),
               key=lambda r: r.log_evidence, default=None)
    if best is None:
        return None
    return (f"best evidence: {best.model} (restart {best.restart}), log evidence "
            f"{best.log_evidence:.2f}, test error {best.test_error:.4f}")
