"""The built-in fully connected networks: M(1), M(3), M(3*) of Baldock & Marzari (2019) and
a generic MLP with configurable widths, depth, input size and output activation.

References
----------
R. J. N. Baldock and N. Marzari, "Bayesian neural networks at finite temperature",
arXiv:1904.04154 (2019), Secs. 3.1 and 4.1.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Sequence
from typing import Any, ClassVar, NamedTuple

import numpy as np

from thermonet.api import NetworkSpec, Potential, as_theta
from thermonet.api.architecture import (
    FullyConnected,
    bound_data,
)
from thermonet.errors import ConfigError, DataError
from thermonet.kernels import configure
from thermonet.kernels import mlp as k
from thermonet.kernels import mlp_layers as layers
from thermonet.kernels import mlp_parallel as kp
from thermonet.kernels import threads as kt
from thermonet.kernels.leapfrog import Dynamics
from thermonet.kernels.matmul import blas
from thermonet.types import FloatArray, IntArray

OUTPUT_ACTIVATIONS = {"linear": k.LINEAR, "logistic": k.LOGISTIC, "sigmoid": k.LOGISTIC}
HIDDEN_ACTIVATIONS = {"logistic": 0, "tanh": k.HIDDEN_TANH}

# With NumPy's BLAS (np.dot -> OpenBLAS) the kernels' products must run single-threaded inside
# thermonet's own parallelism (docs/performance.md); with thermonet's own products a strided
# operand still falls back to np.dot, so the same cap applies. MKL runs in its sequential layer
# (thermonet/kernels/matmul/blas.py), so no cap is needed and the context is skipped. Read when
# a network is evaluated, not at import: choosing the backend may measure it.
def _capped() -> bool:
    return str(blas.BACKEND) in ("numpy", "own")


def _blas_cap() -> Any:
    return kt.blas_single() if _capped() else contextlib.nullcontext()


def _par_blas_threads() -> int | None:
    return 1 if _capped() else None


#: rows per block of the energy/gradient kernels (part of the numerical recipe: results do not
#: depend on the number of threads, but they do on the block size, in the last bits). 128 rows
#: keep a block's activations, deltas and its share of the data in L2 (the measurements that
#: chose it are in docs/performance.md).
DEFAULT_BLOCK = 128


class MLPModel(NamedTuple):
    """What the compiled kernels need to know of a network bound to data (read-only)."""

    widths: IntArray       #: layer widths, inputs first
    out_act: int           #: activation code (:data:`OUTPUT_ACTIVATIONS` | hidden bit)
    x: FloatArray          #: (n_data, n_inputs) inputs, in the potential's dtype
    y: IntArray            #: (n_data,) labels
    block: int             #: rows per block
    xt: FloatArray         #: the inputs transposed block by block, or empty (kernels.mlp.Net)


class MLPPotential(Potential):
    """Summed cross-entropy ``E(D|w)`` of an MLP on a fixed data set, and its gradient.

    Parameters
    ----------
    arch : MLP
    x : ndarray, shape (n_data, n_inputs)
    y : ndarray of int, shape (n_data,), labels in ``[0, n_outputs)``
    dtype : numpy dtype, float64 (default) or float32
        Precision of the forward and backward passes. Energies are always accumulated in
        float64; a float32 potential is meant for leapfrog gradients only (see
        docs/performance.md for its measured errors), never for accept/reject decisions.
    threads : int
        1 (default): one thread. >1: the data blocks are spread over Numba's threads. The
        result is bitwise identical either way.
    block : int
        Rows per block.
    """

    # float32 theta/grad buffers, set on the float32 twin only (see _float32_twin)
    _theta_buf: np.ndarray
    _grad_buf: np.ndarray

    def __init__(self, arch: MLP, x: Any, y: Any, *, dtype: Any = np.float64,
                 threads: int = 1, block: int = DEFAULT_BLOCK) -> None:
        self.arch = arch
        self.dtype = np.dtype(dtype)
        if self.dtype not in (np.dtype(np.float64), np.dtype(np.float32)):
            raise ConfigError(f"dtype {self.dtype} is not supported; expected float64 or float32")
        x = np.asarray(x)
        y = np.asarray(y)
        if x.ndim != 2 or x.shape[1] != arch.widths[0]:
            raise DataError(f"inputs have shape {x.shape}; expected (n_data, {arch.widths[0]}) "
                            f"for {arch.name}")
        if y.shape != (x.shape[0],):
            raise DataError(f"labels have shape {y.shape}; expected ({x.shape[0]},)")
        if not (np.issubdtype(x.dtype, np.floating) or np.issubdtype(x.dtype, np.integer)):
            raise DataError(f"inputs have dtype {x.dtype}; expected real numbers")
        bad = ~np.isfinite(x).all(axis=1) if np.issubdtype(x.dtype, np.floating) else None
        if bad is not None and bad.any():
            rows = np.flatnonzero(bad)
            shown = ", ".join(str(r) for r in rows[:5]) + (", ..." if rows.size > 5 else "")
            raise DataError(f"inputs hold NaN or inf in {rows.size} of {x.shape[0]} rows "
                            f"(rows {shown}); expected finite numbers: drop or impute those "
                            "rows before building the potential")
        n_out = int(arch.widths[-1])
        if y.size and (y.min() < 0 or y.max() >= n_out or not np.issubdtype(y.dtype, np.integer)):
            raise DataError(f"labels must be integers in [0, {n_out}); got range "
                            f"[{y.min()}, {y.max()}] of dtype {y.dtype}")
        if int(block) < 1:
            raise ConfigError(f"block = {block}; expected a positive number of rows")
        if int(threads) < 1:
            raise ConfigError(f"threads = {threads}; expected at least 1")
        self.x = np.ascontiguousarray(x, dtype=self.dtype)
        self.y = np.ascontiguousarray(y, dtype=np.int64)
        self.block = int(block)
        self.threads = int(threads)
        if self.threads > 1:
            configure()    # OpenMP spinning, before the first parallel kernel starts its pool
        self.n_params = arch.n_params
        self.n_data = self.x.shape[0]
        self._widths = arch.widths
        # typed by its hidden activation: the kernels compile that one only
        self._out = k.activation_code(arch.out_act)
        self._nb = int(k.n_blocks(self.n_data, self.block))
        ws = int(k.work_size(self._widths, self.block))
        self._work = np.empty(ws, dtype=self.dtype)
        self._partial = np.empty(self.n_params, dtype=self.dtype)
        if self.threads > 1 and self._nb > 1:
            # one activation scratch per thread (slot), one partial gradient per block
            self._work_b = np.empty((min(self.threads, self._nb), ws), dtype=self.dtype)
            self._partial_b = np.empty((self._nb, self.n_params), dtype=self.dtype)

    @property
    def model(self) -> MLPModel:
        """The network and data as the kernels see them (benchmarks and tools read this)."""
        return MLPModel(self._widths, self._out, self.x, self.y, self.block, self._rows_t())

    def scratch_arrays(self) -> tuple[np.ndarray, ...]:
        """The scratch arrays this potential owns (benchmarks count them as its memory)."""
        return tuple(a for a in (self._work, self._partial, getattr(self, "_work_b", None),
                                 getattr(self, "_partial_b", None)) if a is not None)

    # -- capabilities of the Potential contract ----------------------------------------------

    @property
    def hessian_method(self) -> str | None:  # type: ignore[override]
        """``"rop"``: exact Hessian products by the compiled R-operator (float64, logistic
        hidden units; tanh classifiers keep the generic scheme)."""
        logistic_hidden = not self._out & k.HIDDEN_TANH
        return "rop" if self.dtype == np.dtype(np.float64) and logistic_hidden else None

    def hvp(self, theta: FloatArray, v_kp: FloatArray, *, threads: int | None = None
            ) -> FloatArray:
        """Exact ``H @ v`` for the rows of ``v_kp`` (float64; bitwise the same for any
        ``threads``, default this potential's)."""
        if self.hessian_method is None:
            return super().hvp(theta, v_kp, threads=threads)
        from thermonet.kernels import mlp_hessian

        th = as_theta(theta, self.n_params, what="theta0")
        return mlp_hessian.hvp(th, self._net(), v_kp, self.threads if threads is None else threads)

    def hessian(self, theta: FloatArray, *, index: Any = None, column_block: int = 128,
                threads: int | None = None) -> FloatArray:
        """The exact Hessian (not symmetrised) as ``H e_j`` for every requested column, in
        blocks of ``column_block`` columns; only the rows and columns ``index`` if given."""
        if self.hessian_method is None:
            return super().hessian(theta, index=index, column_block=column_block,
                                   threads=threads)
        from thermonet.kernels import mlp_hessian

        if int(column_block) < 1:
            raise ConfigError(f"column_block = {column_block}; expected a positive integer")
        th = as_theta(theta, self.n_params, what="theta0")
        return mlp_hessian.hessian(th, self._net(), index, column_block,
                                   self.threads if threads is None else threads)

    def flat_coordinates(self) -> tuple[Any, Any]:
        """Coordinates along which the energy is flat by construction.

        * constant inputs: the first-layer weights ``w_oi`` of every input ``i`` with
          ``x_ni = c_i`` for all n (E depends on them only through ``b_o + sum_i c_i w_oi``);
        * softmax shift (linear output layer only): the last class's weights and bias (adding
          the same number to every class's leaves the softmax unchanged).
        """
        d = self.n_params
        const = np.zeros(d, dtype=bool)
        shift = np.zeros(d, dtype=bool)
        widths = self._widths
        n_in, n_h = int(widths[0]), int(widths[1])
        if self.n_data > 0:
            const[:n_in * n_h] = np.tile(np.all(self.x == self.x[0], axis=0), n_h)
        if (self._out & k.OUTPUT_MASK) == k.LINEAR:
            n_c, n_last = int(widths[-1]), int(widths[-2])
            start = d - (n_last + 1) * n_c
            shift[start + (n_c - 1) * n_last:start + n_c * n_last] = True
            shift[d - 1] = True
        return const, shift

    def network_spec(self) -> NetworkSpec:
        """The network and its training data as plain arrays (the summed cross-entropy)."""
        zero = np.zeros(self.n_params)
        return NetworkSpec(
            tuple(int(w) for w in self._widths),
            "tanh" if self._out & k.HIDDEN_TANH else "logistic",
            "logistic" if (self._out & k.OUTPUT_MASK) == k.LOGISTIC else "linear",
            "cross_entropy", self.x.astype(np.float64), self.y, lambda: (1.0, zero, 0.0))

    def bridge_trajectory(self, theta: FloatArray, p: FloatArray, grad: FloatArray,
                          inv_mass: FloatArray, step: float, n_steps: int, wall: int,
                          half_width: FloatArray, runaway: float, lam: float,
                          w0: FloatArray, k_ref: FloatArray, e0: float, scratch: FloatArray
                          ) -> tuple[float, float, int, int, int] | None:
        """The TI bridge trajectory in one compiled call (float64, one thread or one block);
        None otherwise (see the base class)."""
        if (self.dtype != np.dtype(np.float64) or (self.threads > 1 and self._nb > 1)
                or self._out & k.HIDDEN_TANH):
            return None
        from thermonet.kernels import bridge as kb

        with kt.blas_single():
            j, e, n, status, n_ref = kb.mlp_bridge_trajectory(
                theta, p, grad, Dynamics(inv_mass, step, n_steps, half_width, runaway), wall,
                kb.BridgeModel(lam, w0, k_ref, e0, self._widths, self._out, self.x, self.y,
                               self.block, self._work, self._partial, scratch))
        return float(j), float(e), int(n), int(status), int(n_ref)

    def copy(self) -> MLPPotential:
        """A potential on the same data with its own scratch arrays (one per thread)."""
        return MLPPotential(self.arch, self.x, self.y, dtype=self.dtype, threads=self.threads,
                            block=self.block)

    def _theta(self, theta: Any) -> np.ndarray:
        if (isinstance(theta, np.ndarray) and theta.dtype == self.dtype and theta.ndim == 1
                and theta.flags.c_contiguous and theta.shape[0] == self.n_params):
            return theta
        return as_theta(theta, self.n_params, dtype=self.dtype, finite=False)

    def _net(self) -> tuple[Any, ...]:
        # a plain tuple: Numba's dispatcher types it in C, a NamedTuple in Python (3 us more)
        return (self._widths, self._out, self.x, self.y, self.block)

    def _net_t(self) -> tuple[Any, ...]:
        """:meth:`_net` with the inputs transposed (empty unless they help: first evaluated,
        not at construction, as choosing the backend may measure it)."""
        return (self._widths, self._out, self.x, self.y, self.block, self._rows_t())

    def _rows_t(self) -> np.ndarray:
        xt = getattr(self, "_xt", None)
        if xt is None:
            xt = (layers.transposed_blocks(self.x, self.block)
                  if layers.transposes_data(self._widths, self.dtype)
                  else np.empty(0, dtype=self.dtype))
            self._xt = xt
        return xt

    def energy(self, theta: FloatArray) -> float:
        """``E(D|w)`` in nats (float64). NaN or inf if the forward pass overflowed."""
        th = self._theta(theta)
        with _blas_cap():
            return float(k.loss(th, self._net_t(), self._work))

    def energy_and_grad(self, theta: FloatArray,
                        grad_out: FloatArray | None = None) -> tuple[float, FloatArray]:
        """``(E(D|w), dE/dw)``; the gradient has this potential's dtype."""
        th = self._theta(theta)
        if grad_out is None:
            grad_out = np.empty(self.n_params, dtype=self.dtype)
        if self.threads > 1 and self._nb > 1:
            with kt.limit(self.threads, blas_threads=_par_blas_threads()):
                e = kp.loss_and_grad_parallel(th, self._net_t(), self._work_b.shape[0],
                                              self._work_b, self._partial_b, grad_out)
        else:
            with _blas_cap():
                e = k.loss_and_grad(th, self._net_t(), self._work, self._partial, grad_out)
        return float(e), grad_out

    def energy_batch(self, theta_kp: FloatArray) -> FloatArray:
        """Energies of the rows of ``theta_kp``, shape ``(K,)``."""
        th = np.ascontiguousarray(theta_kp, dtype=self.dtype)
        e_k = np.empty(th.shape[0])
        with _blas_cap():
            kp.loss_batch(th, self._net_t(), self._work, e_k)
        return e_k

    def energy_and_grad_batch(self, theta_kp: FloatArray, grad_kp: FloatArray | None = None
                              ) -> tuple[FloatArray, FloatArray]:
        """Energies ``(K,)`` and gradients ``(K, n_params)``; with ``threads > 1`` the replicas
        are spread over threads (bitwise the same result)."""
        th = np.ascontiguousarray(theta_kp, dtype=self.dtype)
        n_k = th.shape[0]
        if grad_kp is None:
            grad_kp = np.empty((n_k, self.n_params), dtype=self.dtype)
        e_k = np.empty(n_k)
        if self.threads > 1 and n_k > 1:
            work_k = np.empty((n_k, self._work.shape[0]), dtype=self.dtype)
            partial_k = np.empty((n_k, self.n_params), dtype=self.dtype)
            with kt.limit(self.threads, blas_threads=_par_blas_threads()):
                kp.loss_and_grad_batch_parallel(th, self._net_t(), work_k, partial_k, grad_kp,
                                                e_k)
        else:
            with _blas_cap():
                kp.loss_and_grad_batch(th, self._net_t(), self._work, self._partial, grad_kp, e_k)
        return e_k, grad_kp

    def trajectory(self, theta: FloatArray, p: FloatArray, grad: FloatArray,
                   inv_mass: FloatArray, step: float, n_steps: int, wall: int,
                   half_width: FloatArray, runaway: float,
                   precision: str = "float64") -> tuple[float, int, int, int]:
        """The whole trajectory in one compiled call (see the base class).

        ``precision="float32"`` evaluates the gradients that drive the dynamics in float32
        (mixed precision); the returned energy is then the float32 one, and the caller must
        recompute the end-point energy in float64 before an accept/reject decision.
        """
        from thermonet.kernels import leapfrog as lf

        with _blas_cap():
            return self._trajectory(lf, theta, p, grad, inv_mass, step, n_steps, wall,
                                    half_width, runaway, precision)

    def _trajectory(self, lf: Any, theta: FloatArray, p: FloatArray, grad: FloatArray,
                    inv_mass: FloatArray, step: float, n_steps: int, wall: int,
                    half_width: FloatArray, runaway: float, precision: str
                    ) -> tuple[float, int, int, int]:
        dyn = Dynamics(inv_mass, step, n_steps, half_width, runaway)
        if precision == "float32" and self.dtype == np.float64:
            twin = self._float32_twin()
            model = lf.MLPModel(self._widths, self._out, twin.x, self.y, self.block,
                                twin._rows_t(), twin._work, twin._partial, twin._theta_buf,
                                twin._grad_buf, True)
        else:
            model = lf.MLPModel(self._widths, self._out, self.x, self.y, self.block,
                                self._rows_t(), self._work, self._partial, theta, grad, False)
        e, n, status, n_ref = lf.mlp_trajectory(theta, p, grad, dyn, wall, model)
        return float(e), int(n), int(status), int(n_ref)

    def _float32_twin(self) -> MLPPotential:
        twin = getattr(self, "_twin", None)
        if twin is None:
            twin = MLPPotential(self.arch, self.x, self.y, dtype=np.float32, block=self.block)
            twin._theta_buf = np.empty(self.n_params, dtype=np.float32)
            twin._grad_buf = np.empty(self.n_params, dtype=np.float32)
            self._twin = twin
        return twin

    def logits(self, theta: FloatArray, x: Any = None) -> FloatArray:
        """Values entering the softmax, shape ``(n_data, n_outputs)`` (float64)."""
        xx = self.x if x is None else np.ascontiguousarray(x, dtype=self.dtype)
        out = np.empty((xx.shape[0], int(self._widths[-1])), dtype=self.dtype)
        th = self._theta(theta)
        with _blas_cap():
            k.predict_logits(th, self._widths, self._out, xx, self.block, self._work, out)
        return out.astype(np.float64)


class MLP(FullyConnected):
    """Fully connected network: logistic hidden units, linear or logistic outputs, softmax.

    Parameters
    ----------
    n_inputs : int
        Input size (256 for the paper's 16x16 MNIST).
    hidden : sequence of int
        Widths of the hidden layers (empty for a softmax regression).
    n_outputs : int
        Number of classes.
    output_activation : {"linear", "logistic"}
        "logistic" gives the paper's capacity-limited M(3*).
    hidden_activation : {"logistic", "tanh"}
        Hidden units (logistic: the paper's).
    prior_scale : float, optional
        ``c`` of the box prior ``sigma_i = c/sqrt(k_i)``; defaults to 100 for a linear output
        and 2000 for a logistic one (the paper's choices).
    """

    name: ClassVar[str] = "mlp"

    def __init__(self, n_inputs: int = 256, hidden: Sequence[int] = (40, 40, 40),
                 n_outputs: int = 10, output_activation: str = "linear",
                 prior_scale: float | None = None, hidden_activation: str = "logistic"
                 ) -> None:
        hidden = [hidden] if isinstance(hidden, int) else list(hidden)
        widths = [n_inputs, *hidden, n_outputs]
        if any((not isinstance(w, (int, np.integer))) or w < 1 for w in widths):
            raise ConfigError(f"layer widths {widths} must be positive integers")
        if n_outputs < 2:
            raise ConfigError(f"n_outputs = {n_outputs}; a classifier needs at least 2 classes")
        if output_activation not in OUTPUT_ACTIVATIONS:
            raise ConfigError(f"output_activation = {output_activation!r}; expected one of "
                              f"{sorted(set(OUTPUT_ACTIVATIONS) - {'sigmoid'})}")
        self.widths: IntArray = np.array(widths, dtype=np.int64)
        self.output_activation = "logistic" if output_activation == "sigmoid" else \
            output_activation
        if hidden_activation not in HIDDEN_ACTIVATIONS:
            raise ConfigError(f"hidden_activation = {hidden_activation!r}; expected one of "
                              f"{sorted(HIDDEN_ACTIVATIONS)}")
        self.hidden_activation = hidden_activation
        self.out_act = OUTPUT_ACTIVATIONS[output_activation] | HIDDEN_ACTIVATIONS[
            hidden_activation]
        if prior_scale is None:
            prior_scale = 2000.0 if (self.out_act & k.OUTPUT_MASK) == k.LOGISTIC else 100.0
        if (isinstance(prior_scale, bool) or not isinstance(prior_scale, (int, float))
                or not (math.isfinite(prior_scale) and prior_scale > 0)):
            raise ConfigError(f"architecture.prior_scale = {prior_scale!r}; expected a finite "
                              "positive number c (box half-widths c/(2 sqrt(k_i))), e.g. "
                              "prior_scale = 100, or leave it unset for the architecture's own")
        self.prior_scale = float(prior_scale)
        self._n_params = int(k.n_params(self.widths))

    @property
    def default_prior_scale(self) -> float:  # type: ignore[override]
        return self.prior_scale

    @property
    def n_params(self) -> int:
        return self._n_params

    def fan_in(self) -> IntArray:
        out = np.empty(self._n_params, dtype=np.int64)
        k.fan_in(self.widths, out)
        return out

    def describe(self) -> dict[str, Any]:
        out = {"name": self.name, "n_params": self.n_params,
               "widths": [int(w) for w in self.widths],
               "output_activation": self.output_activation, "prior_scale": self.prior_scale}
        if self.hidden_activation != "logistic":
            out["hidden_activation"] = self.hidden_activation
        return out

    def potential(self, data: Any = None, **options: Any) -> MLPPotential:
        """Bind to a data set with ``.x`` and ``.y`` (or pass ``x=``, ``y=``)."""
        x, y = bound_data(self.name, data, options)
        return MLPPotential(self, x, y, **options)

    def predict_proba(self, theta: FloatArray, x: FloatArray) -> FloatArray:
        z = self.potential(x=x, y=np.zeros(len(x), dtype=np.int64)).logits(theta)
        z -= z.max(axis=1, keepdims=True)
        p = np.exp(z)
        p /= p.sum(axis=1, keepdims=True)
        return p


class M1(MLP):
    """M(1): 256-40-10, linear output, 10,690 parameters (paper Sec. 4.1)."""

    name: ClassVar[str] = "M1"

    def __init__(self, prior_scale: float | None = None) -> None:
        super().__init__(256, (40,), 10, "linear", prior_scale)


class M3(MLP):
    """M(3): 256-40-40-40-10, linear output, 13,970 parameters (paper Sec. 3.1)."""

    name: ClassVar[str] = "M3"

    def __init__(self, prior_scale: float | None = None) -> None:
        super().__init__(256, (40, 40, 40), 10, "linear", prior_scale)


class M3Star(MLP):
    """M(3*): M(3) with a logistic output layer (capacity-limited; paper Sec. 3.1).

    Its smallest mean training energy is ``-log(e/(e+9)) ~ 1.4612`` per data point.
    """

    name: ClassVar[str] = "M3*"

    def __init__(self, prior_scale: float | None = None) -> None:
        super().__init__(256, (40, 40, 40), 10, "logistic", prior_scale)
