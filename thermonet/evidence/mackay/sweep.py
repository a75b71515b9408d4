"""An architecture sweep by MacKay's evidence: networks of H hidden units, several restarts
each, every solution's log evidence and its terms beside its test error (MacKay 1992,
Fig. 2b), and the rank correlation between the two."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from thermonet.errors import ConfigError
from thermonet.evidence.mackay.framework import mackay_evidence
from thermonet.kernels.threads import blas_single

__all__ = ["SweepRow", "fixed_width", "format_table", "mackay_sweep", "parse_hidden",
           "rank_correlation"]


@dataclass
class SweepRow:
    """One trained network of the sweep: its evidence terms (nats), gamma, the re-estimated
    alpha_c and noise level, and its squared errors."""

    hidden: int
    restart: int
    log_evidence: float
    log_likelihood: float
    log_occam_w: float
    log_occam_hyper: float
    log_symmetry: float
    gamma: float
    alpha: list[float]
    noise_std: float
    train_error: float
    test_error: float
    n_iter: int
    converged: bool
    seconds: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def parse_hidden(text: str) -> list[int]:
    """``"1-10"``, ``"1,2,4,8"`` or a mix (``"1-4,8,16"``) as a list of positive integers."""
    out: list[int] = []
    try:
        for part in str(text).split(","):
            lo, _, hi = part.strip().partition("-")
            out.extend(range(int(lo), int(hi or lo) + 1))
    except ValueError:
        raise ConfigError(f"hidden units {text!r}; expected e.g. '1-10' or '1,2,4,8'") from None
    if not out or min(out) < 1:
        raise ConfigError(f"hidden units {text!r}; expected positive integers, e.g. '1-10'")
    return out


def _sq_error(arch: Any, theta: Any, data: Any) -> float:
    """Squared error summed over the outputs, mean over the cases (docs/regression.md)."""
    pred = arch.predict(theta, data.x)
    return float(np.mean(np.sum((pred - np.asarray(data.y).reshape(pred.shape)) ** 2,
                                axis=1)))


def mackay_sweep(hidden: Sequence[int], restarts: int = 3, *, seed: int = 0,
                 activation: str = "tanh", data: str = "robot-arm",
                 progress: Callable[[SweepRow], None] | None = None,
                 **options: Any) -> list[SweepRow]:
    """MacKay's framework for ``mlp-regression`` networks of each width in ``hidden`` (one
    hidden layer, three weight groups), ``restarts`` random starts each; the start of
    (H, r) is seeded by ``seed``, H and r, so any subset of the sweep reproduces.
    ``options`` go to :func:`thermonet.evidence.mackay.framework.reestimate`."""
    from thermonet.data import load_data
    from thermonet.registry import get_architecture

    if int(restarts) < 1:
        raise ConfigError(f"restarts = {restarts}; expected a positive integer")
    split = load_data(data)
    if split.train.task != "regression":
        # the regression framework would fit the class labels 0..9 as numbers: a NaN
        # evidence after minutes of work, not an error
        raise ConfigError(f"--data {data}: a classification set (labels 0..9); expected a "
                          "regression set such as robot-arm for the mlp-regression sweep; "
                          f"compare classifiers with --arch, e.g. --arch M1,M3 --data {data}")
    if getattr(split, "test", None) is None:
        raise ConfigError(f"data set {data!r} has no test split; the sweep reports test errors")
    n_in = int(np.asarray(split.train.x).shape[1])
    n_out = int(np.asarray(split.train.y).reshape(len(split.train.x), -1).shape[1])
    rows: list[SweepRow] = []
    for h in hidden:
        arch = get_architecture("mlp-regression", n_inputs=n_in, hidden=[int(h)],
                                n_outputs=n_out, hidden_activation=activation)
        for r in range(int(restarts)):
            t0 = time.perf_counter()
            # the matrices are at most ~100 x 100: a threaded BLAS only adds contention
            with blas_single():
                res = mackay_evidence(arch, split.train, seed=int(
                    np.random.SeedSequence([int(seed), int(h), r]).generate_state(1)[0]),
                    **options)
            row = SweepRow(
                hidden=int(h), restart=r, log_evidence=res.log_evidence,
                log_likelihood=res.log_likelihood, log_occam_w=res.log_occam_w,
                log_occam_hyper=res.log_occam_hyper, log_symmetry=res.log_symmetry,
                gamma=res.gamma, alpha=[float(a) for a in res.alpha],
                noise_std=1.0 / math.sqrt(res.beta),
                train_error=_sq_error(arch, res.theta, split.train),
                test_error=_sq_error(arch, res.theta, split.test), n_iter=res.n_iter,
                converged=res.converged, seconds=time.perf_counter() - t0)
            rows.append(row)
            if progress is not None:
                progress(row)
    return rows


def rank_correlation(rows: Sequence[SweepRow], converged_only: bool = True) -> float:
    """Spearman's rank correlation between log evidence and test error over the solutions
    with a finite evidence (and, by default, a converged re-estimation); NaN below 3."""
    from scipy.stats import spearmanr

    keep = [r for r in rows if math.isfinite(r.log_evidence)
            and (r.converged or not converged_only)]
    if len(keep) < 3:
        return math.nan
    return float(spearmanr([r.log_evidence for r in keep],
                           [r.test_error for r in keep]).statistic)


HEADER = ("H", "restart", "log ev", "ln L(w_MP)", "Occam w", "Occam hyp", "symmetry",
          "gamma", "noise sd", "train err", "test err", "iter", "conv")


def fixed_width(header: Sequence[str], rows: Sequence[Any], head: Callable[[Any], list[str]],
                tail: Callable[[Any], list[str]]) -> str:
    """A table of networks, one line each, every cell 10 wide: ``head(row)``, the evidence
    terms and gamma (2 decimals), then ``tail(row)``."""
    lines = ["  ".join(f"{h:>10}" for h in header)]
    for r in rows:
        terms = [f"{v:>10.2f}" for v in (r.log_evidence, r.log_likelihood, r.log_occam_w,
                                           r.log_occam_hyper, r.log_symmetry, r.gamma)]
        cells = [*head(r), *terms, *tail(r), f"{r.n_iter:>10d}",
                 f"{'yes' if r.converged else 'no':>10}"]
        lines.append("  ".join(cells))
    return "\n".join(lines)


def format_table(rows: Sequence[SweepRow]) -> str:
    """The sweep as a fixed-width text table, one line per network."""
    return fixed_width(HEADER, rows, lambda r: [f"{r.hidden:>10d}", f"{r.restart:>10d}"],
                       lambda r: [f"{r.noise_std:>10.4f}", f"{r.train_error:>10.5f}",
                                  f"{r.test_error:>10.5f}"])
