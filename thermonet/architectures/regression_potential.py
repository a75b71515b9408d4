"""The potential of a regression network (:class:`RegressionMLP`) bound to its data.

``E(w) = tau S(w) + (N K/2) ln(2 pi/tau) + sum_i prec_i w_i^2/2`` with the noise precision
``tau`` and the prior precisions ``prec`` set from the hyperparameters, the compiled energy,
gradient and trajectory of :mod:`thermonet.kernels.mlp_regression`, its exact Hessian, and an
exact draw from its prior (for the prior rung of a ladder).
"""

from __future__ import annotations

import math
from typing import Any, Protocol

import numpy as np

from thermonet.api import NetworkSpec, Potential, as_theta
from thermonet.api.hyper import HyperModel
from thermonet.errors import ConfigError, DataError
from thermonet.kernels import leapfrog as lf
from thermonet.kernels import mlp as k
from thermonet.kernels import mlp_hessian as krop
from thermonet.kernels import mlp_regression as kr
from thermonet.kernels import mlp_regression_hessian as krh
from thermonet.kernels import mlp_shallow as ks
from thermonet.types import FloatArray


class RegressionArchitecture(Protocol):
    """What the potential reads of its architecture
    (:class:`~thermonet.architectures.regression.RegressionMLP`)."""

    widths: Any
    act: int
    kernel: str
    noise_std: float | None
    hierarchical: bool
    scaled: bool

    @property
    def name(self) -> str: ...

    @property
    def n_params(self) -> int: ...

    def hyper_model(self, n_residuals: int) -> HyperModel: ...

    def initial_hyper(self) -> FloatArray: ...

    def expand_hyper(self, hyper: FloatArray, scale: float) -> tuple[float, FloatArray]: ...

#: rows per block: the robot arm's 200 cases are one block
DEFAULT_BLOCK = 512


#: ``kernel = "auto"`` picks the shallow kernel for one hidden layer with at most this many
#: inputs and at most :data:`SHALLOW_MAX_IN_OUT` inputs and outputs together, or with at most
#: :data:`SHALLOW_REGISTER_OUTPUTS` outputs (which the kernel keeps in registers) and at most
#: :data:`SHALLOW_MAX_IN_HIDDEN` input-to-hidden weights: the shapes at which it was measured
#: faster (docs/performance.md, "The shallow kernel")
SHALLOW_MAX_INPUTS = 8
SHALLOW_MAX_IN_OUT = 12
SHALLOW_REGISTER_OUTPUTS = 4
SHALLOW_MAX_IN_HIDDEN = 1024


def choose_kernel(widths: Any, requested: str) -> str:
    """The network kernel a potential runs: ``requested`` unless it is ``"auto"``, which
    picks ``"shallow"`` (:mod:`thermonet.kernels.mlp_shallow`) for one hidden layer with few
    inputs and outputs (the constants above) and ``"blocked"`` otherwise.

    The shallow kernel's work per case grows with the inputs and outputs of each hidden unit,
    while the matrix products of the blocked kernel get more efficient with them; the
    constants come from ``benchmarks/bench_regression.py --shapes``, which also flags every
    shape of its grid where this rule picks the slower kernel on the machine it runs on. The
    rule depends on the network only, never on a timing, so that a run and its resumption use
    the same kernel and repeat bit for bit.
    """
    if requested != "auto":
        return requested
    w = [int(v) for v in widths]
    if len(w) != 3:
        return "blocked"
    n_in, hidden, n_out = w
    if n_in <= SHALLOW_MAX_INPUTS and n_in + n_out <= SHALLOW_MAX_IN_OUT:
        return "shallow"
    if n_out <= SHALLOW_REGISTER_OUTPUTS and n_in * hidden <= SHALLOW_MAX_IN_HIDDEN:
        return "shallow"
    return "blocked"


class RegressionPotential(Potential):
    """``E(w) = tau S(w) + (N K/2) ln(2 pi/tau) + sum_i prec_i w_i^2/2`` on fixed data.

    ``tau`` and ``prec`` are set by :meth:`set_hyperparameters`; at construction they are
    the architecture's initial values (at scale 1).
    """

    def __init__(self, arch: RegressionArchitecture, x: Any, y: Any, *, block: int = DEFAULT_BLOCK
                 ) -> None:
        self.arch = arch
        x = np.asarray(x)
        y = np.asarray(y)
        n_in, n_out = int(arch.widths[0]), int(arch.widths[-1])
        if x.ndim != 2 or x.shape[1] != n_in:
            raise DataError(f"inputs have shape {x.shape}; expected (n_data, {n_in}) for "
                            f"{arch.name}")
        if y.ndim == 1 and n_out == 1:
            y = y[:, None]
        if y.shape != (x.shape[0], n_out):
            raise DataError(f"targets have shape {y.shape}; expected ({x.shape[0]}, {n_out}): "
                            "one row of real-valued outputs per input row")
        for what, a in (("inputs", x), ("targets", y)):
            if not (np.issubdtype(a.dtype, np.floating) or np.issubdtype(a.dtype, np.integer)):
                raise DataError(f"{what} have dtype {a.dtype}; expected real numbers")
            bad = ~np.isfinite(a.astype(np.float64)).all(axis=1)
            if bad.any():
                raise DataError(f"{what} hold NaN or inf in {int(bad.sum())} of {a.shape[0]} "
                                f"rows (first: row {int(np.flatnonzero(bad)[0])}); expected "
                                "finite numbers: drop or impute those rows")
        if int(block) < 1:
            raise ConfigError(f"block = {block}; expected a positive number of rows")
        self.x = np.ascontiguousarray(x, dtype=np.float64)
        self.y = np.ascontiguousarray(y, dtype=np.float64)
        self.block = int(block)
        self.n_params = arch.n_params
        self.n_data = self.x.shape[0]
        self.n_residuals = self.n_data * n_out
        self._widths = arch.widths
        self._act = arch.act
        #: the network kernel (:func:`choose_kernel`) and the data and activation code in the
        #: layout it takes: what the compiled energy, gradient and trajectory are passed
        self.kernel = choose_kernel(self._widths, arch.kernel)
        work = int(k.work_size(self._widths, self.block))
        if self.kernel == "shallow":
            self.kx = np.ascontiguousarray(self.x.T)
            self.ky = np.ascontiguousarray(self.y.T)
            self.kact = int(self._act) | ks.FEATURE_MAJOR
            work = max(work, int(ks.work_size(self._widths, self.block)))
        else:
            self.kx, self.ky, self.kact = self.x, self.y, int(self._act)
        #: length of the scratch array the compiled kernels take (in this layout)
        self.work_length = work
        self._kernels = kr.kernels_for(self.kact)
        self._work = np.empty(work)
        self._partial = np.empty(self.n_params)
        self.prec = np.empty(self.n_params)
        self.tau = 1.0
        self.const = 0.0
        # one hidden layer: the compiled closed form (one pass over the data for the whole
        # matrix); deeper nets: the R-operator, one product per column
        self.hessian_method = "analytic" if len(self._widths) == 3 else "rop"
        self.set_hyperparameters(arch.initial_hyper(), 1.0)

    # -- hyperparameters --------------------------------------------------------------------

    def hyper_model(self) -> HyperModel:
        """The groups and Gamma priors of the hyperparameters (:mod:`thermonet.api.hyper`)."""
        return self.arch.hyper_model(self.n_residuals)

    def set_hyperparameters(self, hyper: Any, scale: float) -> None:
        """Precisions per group (then the noise precision, if unknown) in the order of
        :meth:`hyper_model`; the prior term is multiplied by ``scale`` (the temperature T)."""
        self.tau, self.prec[:] = self.arch.expand_hyper(np.asarray(hyper, dtype=np.float64),
                                                        scale)
        self.const = 0.5 * self.n_residuals * math.log(2.0 * math.pi / self.tau)

    def half_sse(self, theta: FloatArray) -> float:
        """``S(w) = sum |f(x_n) - y_n|^2 / 2`` (float64)."""
        return float(self._kernels.half_sse(self._theta(theta), self._widths, self.kact,
                                            self.kx, self.ky, self.block, self._work))

    def likelihood_energy(self, theta: FloatArray) -> float:
        """``-ln p(D|w, tau)`` (nats), without the prior term."""
        return self.tau * self.half_sse(theta) + self.const

    def prior_sample(self, rng: np.random.Generator, hyper: FloatArray | None = None
                     ) -> FloatArray:
        """An exact draw of the weights from their Gaussian prior ``N(0, 1/prec)`` (at scale
        1), at the hyperparameters ``hyper`` (in the order of :meth:`hyper_model`; the caller
        draws them from their priors) or, without hyperparameters (``hierarchical = false``
        and a known ``noise_std``), at the fixed precisions: the prior rung of a ladder."""
        arch = self.arch
        if arch.scaled:
            raise ConfigError("a prior rung draws the weights from their prior, but with "
                              "parameterisation = 'scale' the precisions are parameters; use "
                              "parameterisation = 'direct' (same posterior) for a prior rung")
        h = np.zeros(0) if hyper is None else np.asarray(hyper, dtype=np.float64)
        if hyper is None and (arch.hierarchical or arch.noise_std is None):
            raise ConfigError(
                "a prior draw of this mlp-regression model's weights needs its "
                f"hyperparameters (hierarchical = {arch.hierarchical}, noise_std = "
                f"{arch.noise_std}); draw them first (HyperModel.sample) or set "
                "hierarchical = false and a noise_std")
        _, prec = arch.expand_hyper(h, 1.0)
        return np.asarray(rng.normal(0.0, 1.0 / np.sqrt(prec)))

    # -- the Potential contract -------------------------------------------------------------

    def _theta(self, theta: Any) -> np.ndarray:
        if (isinstance(theta, np.ndarray) and theta.dtype == np.float64 and theta.ndim == 1
                and theta.flags.c_contiguous and theta.shape[0] == self.n_params):
            return theta
        return as_theta(theta, self.n_params, finite=False)

    def _model(self) -> tuple[Any, ...]:
        # a plain tuple: Numba's dispatcher types it in C, a NamedTuple in Python (3 us more)
        return (self._widths, self.kact, self.kx, self.ky, self.block, self._work,
                self._partial, self.tau, self.prec, self.const)

    def energy(self, theta: FloatArray) -> float:
        return float(self._kernels.energy(self._theta(theta), self._model()))

    def energy_and_grad(self, theta: FloatArray, grad_out: FloatArray | None = None
                        ) -> tuple[float, FloatArray]:
        if grad_out is None:
            grad_out = np.empty(self.n_params)
        e, _ = self._kernels.gradient(self._theta(theta), grad_out, self._model())
        return float(e), grad_out

    def trajectory(self, theta: FloatArray, p: FloatArray, grad: FloatArray,
                   inv_mass: FloatArray, step: float, n_steps: int, wall: int,
                   half_width: FloatArray, runaway: float,
                   precision: str = "float64") -> tuple[float, int, int, int]:
        """The whole trajectory in one compiled call (float64; ``precision`` is ignored)."""
        e, _, n, status, n_ref = lf.for_wall(self._kernels.trajectory, wall)(
            theta, p, grad, (inv_mass, step, n_steps, half_width, runaway), self._model())
        return float(e), int(n), int(status), int(n_ref)

    def network_spec(self) -> NetworkSpec:
        """The network and its data as plain arrays; ``terms`` reads the current noise
        precision, weight precisions and normalising constant."""
        return NetworkSpec(
            tuple(int(w) for w in self._widths),
            "tanh" if self._act & k.HIDDEN_TANH else "logistic", "linear", "half_sse",
            self.x, self.y, lambda: (self.tau, self.prec, self.const))

    def hvp(self, theta: FloatArray, v_kp: FloatArray, *, threads: int | None = None
            ) -> FloatArray:
        """Exact ``(tau nabla nabla S + diag(prec)) v`` for the rows of ``v_kp``, any depth:
        the compiled R-operator (:mod:`thermonet.kernels.mlp_hessian`) on the squared error;
        bitwise the same for any ``threads`` (default 1)."""
        th = self._theta(theta)
        v = np.ascontiguousarray(np.atleast_2d(v_kp), dtype=np.float64)
        if v.shape[1] != self.n_params:
            raise ConfigError(f"directions have {v.shape[1]} components; expected "
                              f"{self.n_params}")
        net = (self._widths, self._act, self.x, self.y, self.block)
        out = krop.hvp(th, net, v, 1 if threads is None else threads)
        out *= self.tau
        out += self.prec * v
        return out if np.ndim(v_kp) == 2 else out[0]

    def hessian(self, theta: FloatArray, *, index: Any = None, column_block: int = 128,
                threads: int | None = None) -> FloatArray:
        """``tau nabla nabla S + diag(prec)``, exact (not symmetrised): the compiled closed
        form (:mod:`thermonet.kernels.mlp_regression_hessian`) for one hidden layer, the
        R-operator column by column (``column_block`` columns per call, ``threads`` threads,
        bitwise the same for any number) for deeper nets."""
        th = self._theta(theta)
        idx = None if index is None else np.asarray(index, dtype=np.int64)
        if self.hessian_method == "rop":
            if int(column_block) < 1:
                raise ConfigError(f"column_block = {column_block}; expected a positive integer")
            net = (self._widths, self._act, self.x, self.y, self.block)
            h = krop.hessian(th, net, idx, column_block, 1 if threads is None else threads)
            h *= self.tau
            h[np.diag_indices_from(h)] += self.prec if idx is None else self.prec[idx]
            return h
        out = np.empty((self.n_params, self.n_params))
        shape = (int(self._widths[0]), int(self._widths[1]), int(self._widths[2]),
                 bool(self._act & k.HIDDEN_TANH), False)
        krh.hessian(th, shape, self.x, self.y, self.tau, self.prec, out)
        if idx is None:
            return out
        return np.ascontiguousarray(out[np.ix_(idx, idx)])

    def copy(self) -> RegressionPotential:
        """A potential on the same data with its own scratch and hyperparameters."""
        out = RegressionPotential(self.arch, self.x, self.y, block=self.block)
        out.tau, out.const = self.tau, self.const
        out.prec[:] = self.prec
        return out

    def outputs(self, theta: FloatArray, x: Any = None) -> FloatArray:
        """Network outputs ``f(x, w)``, shape ``(n, n_outputs)``."""
        xx = self.x if x is None else np.ascontiguousarray(x, dtype=np.float64)
        out = np.empty((xx.shape[0], int(self._widths[-1])))
        k.predict_logits(self._theta(theta), self._widths, self._act, xx, self.block,
                         self._work, out)
        return out


__all__ = ["DEFAULT_BLOCK", "RegressionPotential"]
