"""The posterior predictive of a run's stored samples on any cases (what ``thermonet
predict`` and :meth:`RunRecord.predict <thermonet.analysis.run_record.RunRecord.predict>`
compute).

Regression, per case and output, in the data file's units: the mean, standard deviation and
quantiles of the network function f over the S stored networks, and of a new observation
(f plus Gaussian noise of each sample's level, variance ``T / tau``: a mixture of S normals,
whose quantiles are solved exactly by :func:`mixture_quantiles`). Classification: the class
probabilities ``pbar(q|x) = (1/S) sum_s p(q|x, w_s)`` (Neal 1993 eq. 10), accumulated in log
space. With targets, per-case scores averaged with their standard error over cases:
``squared_error`` (summed over the outputs, of the predictive mean; Neal's measure),
``log_loss`` (``-ln`` of the predictive density or probability of the target) and, for
classifiers, ``error_rate`` (argmax, ties to the lowest class) and ``brier_score`` (squared
error of the probability vector against the one-hot label). Everything goes through the
Architecture contract (``predict``, ``potential(...).logits`` or ``predict_proba``), so
plugins work.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from thermonet.errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover
    from thermonet.analysis.run_reader import RunReader

#: file suffixes :meth:`Prediction.write` knows
OUTPUT_SUFFIXES = (".csv", ".npz", ".nc")


def mixture_quantiles(f: np.ndarray, sd: np.ndarray, quantiles: Any,
                      *, iterations: int = 80) -> np.ndarray:
    """Quantiles of the equal-weight mixture of normals N(f[s], sd[s]^2) over the first axis.

    ``f`` (S, ...) means, ``sd`` broadcastable to it (positive). Returns (Q, ...): the points
    where ``mean_s Phi((x - f_s) / sd_s)`` equals each quantile, by bisection on the whole
    array at once (the mixture CDF is increasing; 80 halvings of a bracket 16 sd wide leave an
    error below 1e-20 of it)."""
    from scipy.special import ndtr

    sd = np.broadcast_to(sd, f.shape)
    out = []
    for q in quantiles:
        lo = (f - 8.0 * sd).min(axis=0)
        hi = (f + 8.0 * sd).max(axis=0)
        for _ in range(iterations):
            mid = 0.5 * (lo + hi)
            below = ndtr((mid[None] - f) / sd).mean(axis=0) < q
            lo = np.where(below, mid, lo)
            hi = np.where(below, hi, mid)
        out.append(0.5 * (lo + hi))
    return np.stack(out)


def mean_and_se(per_case: np.ndarray) -> dict[str, float]:
    """The mean over cases and its standard error (NaN for a single case)."""
    a = np.asarray(per_case, dtype=np.float64)
    se = float(np.std(a, ddof=1) / math.sqrt(a.size)) if a.size > 1 else math.nan
    return {"mean": float(a.mean()), "se": se}


@dataclass
class Prediction:
    """The posterior predictive on a set of cases (see the module docstring).

    Attributes
    ----------
    task : ``"regression"`` or ``"classification"``
    temperature : the rung whose samples were used
    n_samples : S, stored networks averaged
    n_cases : int
    source : what the cases were read from
    quantiles : the quantile levels of the ``*_quantiles`` arrays
    names : output column names (regression) or class labels ``0..C-1`` as strings
    arrays : per-case arrays: regression ``f_mean``, ``f_sd`` (n, K), ``f_quantiles``
        (Q, n, K) and, when the run has a noise level, ``y_mean``, ``y_sd``, ``y_quantiles``;
        classification ``probabilities`` (n, C) and ``predicted`` (n,); ``targets`` when
        the cases have them
    metrics : score name -> ``{"mean", "se"}`` over cases (empty without targets)
    notes : what could not be computed, and why
    """

    task: str
    temperature: float
    n_samples: int
    n_cases: int
    source: str
    quantiles: tuple[float, ...]
    names: list[str]
    arrays: dict[str, np.ndarray]
    metrics: dict[str, dict[str, float]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable summary (no per-case arrays)."""
        return {"task": self.task, "temperature": self.temperature,
                "n_samples": self.n_samples, "n_cases": self.n_cases, "source": self.source,
                "quantiles": list(self.quantiles), "outputs": list(self.names),
                "has_targets": "targets" in self.arrays, "metrics": self.metrics,
                "notes": list(self.notes)}

    def describe(self) -> str:
        """A few lines: what was predicted and the scores with their error bars."""
        lines = [f"{self.n_cases} cases from {self.source}: posterior predictive of "
                 f"{self.n_samples} stored networks at T = {self.temperature:.4g} "
                 f"({self.task})"]
        for name, m in self.metrics.items():
            lines.append(f"  {name.replace('_', ' ')}: {m['mean']:.6g} ± {m['se']:.2g}")
        if not self.metrics:
            lines.append("  no targets in the data: predictions only")
        lines.extend(f"  note: {n}" for n in self.notes)
        return "\n".join(lines)

    def columns(self) -> dict[str, np.ndarray]:
        """Per-case columns (one (n,) array each), named for the CSV and NetCDF files."""
        out: dict[str, np.ndarray] = {"case": np.arange(self.n_cases)}
        qs = [f"q{q:g}" for q in self.quantiles]
        for key, arr in self.arrays.items():
            if key.endswith("_quantiles"):
                stem = key[:-len("_quantiles")]
                for i, q in enumerate(qs):
                    for j, o in enumerate(self.names):
                        out[f"{stem}_{q}_{o}"] = arr[i, :, j]
            elif arr.ndim == 2:
                stem = "p" if key == "probabilities" else key
                for j, o in enumerate(self.names):
                    out[f"{stem}_{o}"] = arr[:, j]
            else:
                out[key] = arr
        return out

    def write(self, path: str | Path) -> Path:
        """Write the per-case predictions to ``path``: CSV (one row per case), NPZ (the
        arrays and the summary) or NetCDF (``.nc``; needs xarray), by suffix; atomically."""
        from thermonet.io.atomic import write_atomic

        out = Path(path)
        suffix = out.suffix.lower()
        if suffix not in OUTPUT_SUFFIXES:
            raise ConfigError(f"--out {out}: suffix {out.suffix!r}; expected .csv, .npz or .nc")
        if not out.parent.is_dir():
            raise ConfigError(f"--out {out}: directory {out.parent} does not exist")
        writer = {".csv": self._write_csv, ".npz": self._write_npz, ".nc": self._write_nc}
        return write_atomic(out, writer[suffix])

    def _write_csv(self, tmp: Path) -> None:
        cols = self.columns()
        names = list(cols)
        table = np.column_stack([np.asarray(cols[n], dtype=np.float64) for n in names])
        ints = [n in ("case", "predicted", "targets") for n in names]
        with tmp.open("w", encoding="utf-8", newline="") as fh:
            fh.write(",".join(names) + "\n")
            for row in table:
                fh.write(",".join(str(int(v)) if i and np.isfinite(v) else repr(float(v))
                                  for v, i in zip(row, ints, strict=True)) + "\n")

    def _write_npz(self, tmp: Path) -> None:
        import json

        arrays: dict[str, Any] = {**self.arrays, "quantiles": np.asarray(self.quantiles),
                                  "summary": np.asarray(json.dumps(self.to_dict()))}
        with tmp.open("wb") as fh:
            np.savez(fh, **arrays)

    def _write_nc(self, tmp: Path) -> None:
        import json

        try:
            import xarray as xr
        except ImportError:
            raise ConfigError("a .nc output needs xarray (pip install 'thermonet[arviz]'); "
                              "or write .csv or .npz") from None
        dims = {2: ("case", "output"), 3: ("quantile", "case", "output"), 1: ("case",)}
        ds = xr.Dataset(
            {k: (dims[v.ndim], v) for k, v in self.arrays.items()},
            coords={"case": np.arange(self.n_cases), "output": list(self.names),
                    "quantile": list(self.quantiles)},
            attrs={"summary": json.dumps(self.to_dict())})
        ds.to_netcdf(tmp)


def _cases(rec: RunReader, data: Any, split: Any) -> tuple[Any, bool, str]:
    """(dataset, whether it has targets, where it came from) of ``data``."""
    from thermonet.data import Dataset, read_cases

    if isinstance(data, Dataset):
        return data, not (data.task == "regression" and np.isnan(data.y).all()), data.name
    if isinstance(data, str) and data in ("train", "test"):
        what = "training" if data == "train" else "test"
        return getattr(split, data), True, f"the run's {what} set"
    ds, has_y = read_cases(data, split.train)
    return ds, has_y, str(data)


def sample_outputs(arch: Any, thetas: np.ndarray, ds: Any) -> np.ndarray:
    """Per stored network: regression outputs in the data file's units (S, n, K), or class
    log-probabilities (S, n, C)."""
    from thermonet.analysis.samples import log_proba
    from thermonet.data import to_original_units

    if ds.task == "regression":
        if not hasattr(arch, "predict"):
            raise ConfigError(f"architecture {arch.name!r} has no predict(theta, x); a "
                              "regression model needs it for predictions")
        return np.stack([to_original_units(ds, arch.predict(np.ascontiguousarray(t), ds.x))[0]
                         for t in thetas])
    pot = arch.potential(ds)
    return np.stack([log_proba(arch, pot, np.ascontiguousarray(t)) for t in thetas])


def _regression(f: np.ndarray, sd: np.ndarray | None, ds: Any, has_y: bool,
                quantiles: tuple[float, ...]) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Per-case arrays and scores of regression outputs ``f`` (S, n, K) with noise standard
    deviations ``sd`` (S, K) in the data file's units (None: unknown)."""
    from thermonet.data import to_original_units

    arrays = {"f_mean": f.mean(axis=0), "f_sd": f.std(axis=0),
              "f_quantiles": np.quantile(f, quantiles, axis=0)}
    metrics: dict[str, Any] = {}
    y = to_original_units(ds, f[0])[1] if has_y else None
    if sd is not None:
        s = sd[:, None, :]
        arrays["y_mean"] = arrays["f_mean"]
        arrays["y_sd"] = np.sqrt((s ** 2).mean(axis=0) + arrays["f_sd"] ** 2)
        arrays["y_quantiles"] = mixture_quantiles(f, np.broadcast_to(s, f.shape), quantiles)
    if y is not None:
        arrays["targets"] = y
        metrics["squared_error"] = mean_and_se(((arrays["f_mean"] - y) ** 2).sum(axis=1))
        if sd is not None:
            z = (y[None] - f) / s
            log_n = -0.5 * (z ** 2 + np.log(2 * math.pi * s ** 2)).sum(axis=2)   # (S, n)
            log_p = np.logaddexp.reduce(log_n, axis=0) - math.log(f.shape[0])
            metrics["log_loss"] = mean_and_se(-log_p)
    return arrays, metrics


def _classification(lp: np.ndarray, y: np.ndarray | None
                    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Per-case arrays and scores of class log-probabilities ``lp`` (S, n, C)."""
    log_pbar = np.logaddexp.reduce(lp, axis=0) - math.log(lp.shape[0])
    p = np.exp(log_pbar)
    arrays = {"probabilities": p, "predicted": np.argmax(log_pbar, axis=1)}
    metrics: dict[str, Any] = {}
    if y is not None:
        arrays["targets"] = y
        rows = np.arange(y.size)
        onehot = np.zeros_like(p)
        onehot[rows, y] = 1.0
        metrics["log_loss"] = mean_and_se(-log_pbar[rows, y])
        metrics["error_rate"] = mean_and_se(arrays["predicted"] != y)
        metrics["brier_score"] = mean_and_se(((p - onehot) ** 2).sum(axis=1))
    return arrays, metrics


@dataclass
class Draws:
    """What a prediction is made from: the outputs of every stored network on the cases.

    Attributes
    ----------
    record : the run
    slot, temperature : the rung whose samples were used
    split : the run's own training and test sets
    cases : the Dataset predicted on; ``has_targets``: whether it has targets
    source : where the cases came from
    outputs : (S, n, K) regression outputs in the data file's units, or (S, n, C) class
        log-probabilities
    """

    record: RunReader
    slot: int
    temperature: float
    split: Any
    cases: Any
    has_targets: bool
    source: str
    outputs: np.ndarray

    @property
    def task(self) -> str:
        return str(self.cases.task)


def predictive_draws(rec: RunReader, data: Any, temperature: float | None = None, *,
                     mnist_dir: str | None = None) -> Draws:
    """The outputs of ``rec``'s stored networks at ``temperature`` (default: T = 1 if a rung,
    else the lowest) on ``data``; one-line errors for the prior rung, a data-free run, a run
    without stored samples after its discard and data the model cannot read."""
    k = rec.slot(temperature)
    t_k = float(rec.temperatures[k])
    if math.isinf(t_k):
        raise ConfigError(f"T = inf is the prior rung of {rec.path}: its samples are prior "
                          "draws, not the posterior; pass a finite temperature")
    split = rec.data(mnist_dir)
    if split is None:
        raise ConfigError(f"{rec.path} is a data-free run ({rec.architecture_name}); there is "
                          "no model of data to predict with")
    ds, has_y, source = _cases(rec, data, split)
    thetas = rec.samples(t_k)
    if thetas.shape[0] == 0:
        raise ConfigError(f"{rec.path} has no stored samples after its discard ({rec.discard:g}"
                          f" of {rec.n_recorded} iterations); set run.sample_every and run "
                          "longer, or lower the discard")
    out = sample_outputs(rec.architecture(), thetas, ds)
    return Draws(rec, k, t_k, split, ds, has_y, source, out)


def summarise_draws(d: Draws, quantiles: tuple[float, ...] = (0.05, 0.5, 0.95)
                    ) -> Prediction:
    """The per-case predictive and the scores of :func:`predictive_draws`' outputs."""
    quantiles = tuple(float(q) for q in quantiles)
    if not all(0.0 <= q <= 1.0 for q in quantiles):
        raise ConfigError(f"quantiles {list(quantiles)}; expected levels in [0, 1]")
    notes: list[str] = []
    if d.task == "regression":
        from thermonet.data import column_names

        arch = d.record.architecture()
        sd = d.record.noise_sd(d.slot, d.record.sample_iterations(), d.split.train, arch)
        sd_orig = None
        if sd is None:
            notes.append("the run has no noise level (neither a sampled noise precision nor "
                         "the architecture's noise_std): no y_* columns and no log loss")
        else:
            st = d.cases.provenance.get("standardisation")
            y_std = np.asarray(st["y_std"]) if st else np.ones(d.outputs.shape[2])
            sd_orig = sd[:, None] * y_std[None, :]
        arrays, metrics = _regression(d.outputs, sd_orig, d.cases, d.has_targets, quantiles)
        names = column_names(d.split.train)[1]
    else:
        arrays, metrics = _classification(d.outputs,
                                          np.asarray(d.cases.y) if d.has_targets else None)
        names = [str(c) for c in range(d.outputs.shape[2])]
    return Prediction(d.task, d.temperature, int(d.outputs.shape[0]), len(d.cases), d.source,
                      quantiles, names, arrays, metrics, notes)


def predict_run(rec: RunReader, data: Any, temperature: float | None = None, *,
                quantiles: tuple[float, ...] = (0.05, 0.5, 0.95),
                mnist_dir: str | None = None) -> Prediction:
    """:meth:`RunRecord.predict`: the predictive of ``rec``'s samples at ``temperature``
    (default: T = 1 if a rung, else the lowest) on ``data``."""
    draws = predictive_draws(rec, data, temperature, mnist_dir=mnist_dir)
    return summarise_draws(draws, quantiles)


__all__ = ["OUTPUT_SUFFIXES", "Draws", "Prediction", "mean_and_se", "mixture_quantiles",
           "predict_run", "predictive_draws", "sample_outputs", "summarise_draws"]
