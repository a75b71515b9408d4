"""Regression networks as Neal (1993) and Rasmussen (1996) used them: real-valued outputs with
Gaussian noise, linear output units, tanh (or logistic) hidden units, and Gaussian weight
priors whose precisions are hyperparameters per group (MacKay 1992's three categories:
input-to-hidden weights, hidden biases, hidden-to-output weights; optionally one group per
input unit, ARD), with Gamma hyperpriors, and an unknown noise precision with a Gamma prior.

The potential's energy is ``E(w) = -ln p(D|w, tau) + T sum_i prec_i w_i^2 / 2`` (see
:mod:`thermonet.kernels.mlp_regression`), so ``exp(-E/T) = p(D|w,tau)^(1/T) p(w|prec)`` up to a
constant: the temperature tempers the likelihood only. The hyperparameters themselves are
updated by a sampler that understands :meth:`RegressionPotential.hyper_model` (``hmc-gibbs``);
with plain ``hmc`` they stay at their initial values (a fixed Gaussian prior and noise level).

References
----------
R. M. Neal, "Bayesian learning via stochastic dynamics", NIPS 5 (1993), Secs. 1.1, 3;
C. E. Rasmussen, "A practical Monte Carlo implementation of Bayesian learning", NIPS 8 (1996),
Sec. 2.1; D. J. C. MacKay, Neural Computation 4, 448 (1992).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, ClassVar

import numpy as np

from thermonet.api.architecture import (
    FullyConnected,
    bound_data,
)
from thermonet.api.hyper import GammaPrior, HyperGroup, HyperModel, TopLevel
from thermonet.architectures.regression_potential import RegressionPotential
from thermonet.architectures.scale_factors import ScaleFactorPotential, scale_factors
from thermonet.errors import ConfigError
from thermonet.kernels import mlp as k
from thermonet.types import FloatArray

HIDDEN_ACTIVATIONS = {"tanh": k.HIDDEN_TANH, "logistic": 0}
PARAMETERISATIONS = ("direct", "scale")
#: the compiled network kernels a regression potential can use (RegressionPotential)
KERNELS = ("auto", "blocked", "shallow")

#: box half-widths of these models: none (the prior is the Gaussian in the energy)
NO_BOX = 1e8


def _positive(name: str, v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not (
            math.isfinite(v) and v > 0):
        raise ConfigError(f"architecture.{name} = {v!r}; expected a finite positive number")
    return float(v)


class RegressionMLP(FullyConnected):
    """One or more hidden layers of tanh (or logistic) units, linear outputs, Gaussian noise.

    Parameters
    ----------
    n_inputs : int
        Input units (the robot arm: 2).
    hidden : list of int
        Hidden units per layer (the robot arm: [16]).
    n_outputs : int
        Linear output units (the robot arm: 2).
    hidden_activation : {"tanh", "logistic"}
        The hidden units' activation (tanh: Neal's and Rasmussen's).
    noise_std : float or None
        The noise level sigma if known; None (default): unknown, its precision has the Gamma
        prior ``noise_width``/``noise_shape`` and is sampled.
    hierarchical : bool
        True (default): one prior precision per group with a Gamma hyperprior of width
        ``hyper_width`` and shape ``hyper_shape`` (Neal's and Rasmussen's vague 0.05 and 0.5).
        False: fixed Gaussian widths, ``weight_std`` for every group or one precision per
        group from ``group_precisions``.
    hyper_width : float
        Width s of the groups' Gamma hyperprior (the precision's prior mean is 1/s^2).
    hyper_shape : float
        Neal's shape alpha of that hyperprior (ordinary Gamma shape alpha/2).
    noise_width : float
        Width of the noise precision's Gamma prior (unknown noise).
    noise_shape : float
        Neal's shape of the noise precision's Gamma prior.
    ard : bool
        One precision per input unit for the first layer's weights (Automatic Relevance
        Determination).
    ard_levels : {2, 3}
        With ``ard``: 2 (default), each input's precision has the hyperprior
        ``hyper_width``/``hyper_shape``; 3, Rasmussen (1996)'s three-level prior: each
        input's precision is Gamma with shape ``ard_shape`` and a common mean, itself a
        hyperparameter with the Gamma prior ``hyper_width``/``ard_top_shape``.
    ard_shape : float
        Neal's shape of the per-input precisions under the three-level prior (0.5).
    ard_top_shape : float
        Neal's shape of the top-level mean's Gamma prior (1, Rasmussen 1996).
    parameterisation : {"direct", "scale"}
        "direct" (default): the parameters are the weights, the group precisions are
        hyperparameters (Gibbs-sampled by ``hmc-gibbs``). "scale": Neal (1993)'s scale
        factors: the parameters are unit-variance weights then one log precision per group,
        all moved by HMC (:mod:`thermonet.architectures.scale_factors`); same posterior.
        Needs ``hierarchical``; with ``ard_levels`` = 3 the top level's mean stays a
        hyperparameter.
    weight_std : float
        Initial (or, without hierarchy, fixed) prior width of every group (1: Rasmussen's
        initial phase, Sec. 2.3).
    output_bias_std : float
        Fixed prior width of the output biases (100; effectively unconstrained).
    group_precisions : list of float, optional
        With ``hierarchical = false``: one fixed precision per group, in the order of the
        groups of the hierarchical model (:meth:`group_names`; the output weights' precision
        is multiplied by the fan-in as there), e.g. the weight decays ``alpha_c`` that
        MacKay's framework re-estimated, so that a run samples the same posterior that
        framework approximates (docs/evidence.md). Default: ``1/weight_std^2`` for every
        group.
    kernel : {"auto", "blocked", "shallow"}
        The compiled network code: ``"shallow"`` (one hidden layer only) takes the cases
        eight at a time in registers, the data stored feature by feature, ``"blocked"`` is the
        matrix-product kernel of the classifiers; ``"auto"`` picks ``"shallow"`` where it was
        measured to be faster
        (:func:`thermonet.architectures.regression_potential.choose_kernel`). The two agree
        to rounding, not bit for bit.
    """

    name: ClassVar[str] = "mlp-regression"
    example_data: ClassVar[str] = "robot-arm"

    def __init__(self, n_inputs: int = 2, hidden: Sequence[int] = (16,), n_outputs: int = 2,
                 hidden_activation: str = "tanh", noise_std: float | None = None,
                 noise_width: float = 0.05, noise_shape: float = 0.5,
                 hierarchical: bool = True, hyper_width: float = 0.05,
                 hyper_shape: float = 0.5, ard: bool = False, weight_std: float = 1.0,
                 output_bias_std: float = 100.0, ard_levels: int = 2, ard_shape: float = 0.5,
                 ard_top_shape: float = 1.0, parameterisation: str = "direct",
                 group_precisions: Sequence[float] | None = None,
                 kernel: str = "auto") -> None:
        settings = dict(locals())
        settings.pop("self")
        settings.pop("__class__", None)
        hidden = [hidden] if isinstance(hidden, int) else list(hidden)
        widths = [n_inputs, *hidden, n_outputs]
        if any((not isinstance(w, (int, np.integer))) or w < 1 for w in widths) or not hidden:
            raise ConfigError(f"layer widths {widths} must be positive integers, with at "
                              "least one hidden layer")
        if hidden_activation not in HIDDEN_ACTIVATIONS:
            raise ConfigError(f"hidden_activation = {hidden_activation!r}; expected one of "
                              f"{sorted(HIDDEN_ACTIVATIONS)}")
        self.widths = np.array(widths, dtype=np.int64)
        self.hidden_activation = hidden_activation
        self.act = k.LINEAR | HIDDEN_ACTIVATIONS[hidden_activation]
        self.noise_std = None if noise_std is None else _positive("noise_std", noise_std)
        self.noise_prior = None if noise_std is not None else GammaPrior(noise_width,
                                                                           noise_shape)
        self.hierarchical = bool(hierarchical)
        self.hyperprior = GammaPrior(hyper_width, hyper_shape)
        self.ard = bool(ard)
        if ard_levels not in (2, 3) or isinstance(ard_levels, bool):
            raise ConfigError(f"architecture.ard_levels = {ard_levels!r}; expected 2 (a Gamma "
                              "hyperprior per input) or 3 (Rasmussen's common top level)")
        if ard_levels == 3 and not (self.ard and self.hierarchical):
            raise ConfigError("architecture.ard_levels = 3 needs ard = true and hierarchical "
                              "= true (it puts a common prior over the per-input precisions)")
        self.ard_levels = int(ard_levels)
        self.top = (TopLevel("layer1.weight.ard", tuple(range(n_inputs)),
                             GammaPrior(hyper_width, ard_top_shape),
                             GammaPrior(hyper_width, ard_shape).shape)
                    if self.ard_levels == 3 else None)
        self.weight_std = _positive("weight_std", weight_std)
        self.output_bias_std = _positive("output_bias_std", output_bias_std)
        self._n_params = int(k.n_params(self.widths))
        self._groups = self._make_groups()
        self.group_precisions = self._fixed_precisions(group_precisions)
        if parameterisation not in PARAMETERISATIONS:
            raise ConfigError(f"architecture.parameterisation = {parameterisation!r}; expected "
                              f"one of {PARAMETERISATIONS}")
        if parameterisation == "scale" and not self.hierarchical:
            raise ConfigError("architecture.parameterisation = 'scale' with hierarchical = "
                              "false; expected hierarchical = true (the scale factors are "
                              "the groups' precisions): set hierarchical = true or "
                              "parameterisation = 'direct'")
        self.parameterisation = parameterisation
        if kernel not in KERNELS:
            raise ConfigError(f"architecture.kernel = {kernel!r}; expected one of {KERNELS}")
        if kernel == "shallow" and len(widths) != 3:
            raise ConfigError(f"architecture.kernel = 'shallow' with hidden = {hidden}; "
                              "expected one hidden layer: use 'blocked' or 'auto'")
        self.kernel = kernel
        self.scaled = parameterisation == "scale"
        #: the same network in the direct parameterisation (the scaled one evaluates it)
        self.direct = self if not self.scaled else RegressionMLP(
            **{**settings, "parameterisation": "direct"})

    def _fixed_precisions(self, values: Any) -> np.ndarray | None:
        """The checked ``group_precisions`` (None when not given)."""
        if values is None:
            return None
        names = self.group_names()
        if self.hierarchical:
            raise ConfigError("architecture.group_precisions fixes each group's prior "
                              "precision, but hierarchical = true samples them; set "
                              "hierarchical = false (or drop group_precisions)")
        ok = (isinstance(values, (list, tuple, np.ndarray)) and len(values) == len(names)
              and all(not isinstance(v, bool) and isinstance(v, (int, float, np.floating))
                      and math.isfinite(v) and v > 0 for v in values))
        if not ok:
            raise ConfigError(f"architecture.group_precisions = {values!r}; expected "
                              f"{len(names)} finite positive precisions, one per group "
                              f"({', '.join(names)})")
        return np.array([float(v) for v in values])

    def group_names(self) -> list[str]:
        """The names of the weight groups, in the order of their precisions."""
        return [name for name, _, _ in self._groups]

    def _make_groups(self) -> list[tuple[str, np.ndarray, float]]:
        """(name, parameter indices, precision scale) of every hyperparameter group."""
        out: list[tuple[str, np.ndarray, float]] = []
        pos = 0
        n_layers = len(self.widths) - 1
        for layer in range(n_layers):
            n_in, n_out = int(self.widths[layer]), int(self.widths[layer + 1])
            w_idx = np.arange(pos, pos + n_in * n_out).reshape(n_out, n_in)
            pos += n_in * n_out
            b_idx = np.arange(pos, pos + n_out)
            pos += n_out
            last = layer == n_layers - 1
            # hidden-to-output: precision times the fan-in, so the output's prior variance
            # does not grow with the number of hidden units (Rasmussen 1996, Sec. 2.1)
            scale = float(n_in) if last else 1.0
            if layer == 0 and self.ard:
                out.extend((f"layer1.weight.in{i}", w_idx[:, i].copy(), 1.0)
                           for i in range(n_in))
            else:
                out.append((f"layer{layer + 1}.weight", w_idx.ravel(), scale))
            if not last:
                out.append((f"layer{layer + 1}.bias", b_idx, 1.0))
        return out

    @property
    def output_bias_index(self) -> np.ndarray:
        n_out = int(self.widths[-1])
        return np.arange(self._n_params - n_out, self._n_params)

    def scale_groups(self) -> list[tuple[str, np.ndarray, float]]:
        """(name, weight indices, precision scale) of every group with a hyperprior."""
        return list(self._groups) if self.hierarchical else []

    def hyper_model(self, n_residuals: int) -> HyperModel:
        groups = tuple(HyperGroup(name, idx, self.hyperprior, scale)
                       for name, idx, scale in self._groups) if (
            self.hierarchical and not self.scaled) else ()
        tops: tuple[TopLevel, ...] = ()
        if self.top is not None:
            # scaled: the members' log precisions are the coordinates after the weights
            tops = (replace(self.top, log_index=tuple(
                self._n_params + g for g in self.top.members)) if self.scaled else self.top,)
        return HyperModel(groups, self.noise_prior, int(n_residuals), tops)

    def initial_hyper(self) -> FloatArray:
        """Initial precisions: ``1/weight_std^2`` per group, and 1 for an unknown noise
        precision (Rasmussen's initial phase has every variance at 1)."""
        n = (len(self._groups) if self.hierarchical and not self.scaled else 0) + (
            self.noise_prior is not None)
        return np.full(n + (self.top is not None), 1.0 / self.weight_std ** 2)

    def expand_hyper(self, hyper: FloatArray, scale: float) -> tuple[float, FloatArray]:
        """``(tau, prec)`` from the hyperparameter vector; ``prec`` already times ``scale``."""
        n_g = len(self._groups) if self.hierarchical else 0
        want = n_g + (self.noise_prior is not None) + (self.top is not None)
        if hyper.shape != (want,) or not np.all(np.isfinite(hyper)) or np.any(hyper <= 0):
            raise ConfigError(f"hyperparameters {hyper!r}; expected {want} positive finite "
                              "precisions")
        prec = np.empty(self._n_params)
        fixed = (self.group_precisions if self.group_precisions is not None else
                 np.full(len(self._groups), 1.0 / self.weight_std ** 2))
        for g, (_, idx, s) in enumerate(self._groups):
            prec[idx] = scale * s * (hyper[g] if self.hierarchical else fixed[g])
        prec[self.output_bias_index] = scale / self.output_bias_std ** 2
        tau = float(hyper[n_g]) if self.noise_std is None else 1.0 / self.noise_std ** 2
        return tau, prec

    # -- the Architecture contract ----------------------------------------------------------

    @property
    def n_params(self) -> int:
        """The weights, then (``parameterisation = "scale"``) one log precision per group."""
        return self._n_params + (len(self._groups) if self.scaled else 0)

    def fan_in(self) -> np.ndarray:
        out = np.ones(self.n_params, dtype=np.int64)
        k.fan_in(self.widths, out[:self._n_params])
        return out

    def initial_draw(self, rng: np.random.Generator) -> FloatArray:
        """The standard draw; with scale factors, the log precisions start at
        ``ln(1/weight_std^2)`` (Rasmussen's initial phase: every variance at 1)."""
        theta = super().initial_draw(rng)
        if self.scaled:
            theta[self._n_params:] = math.log(1.0 / self.weight_std ** 2)
        return theta

    def weights(self, theta: FloatArray) -> FloatArray:
        """The network's weights (the parameters themselves, or unit-variance weights times
        their scale factors)."""
        if not self.scaled:
            return theta
        groups = self._groups
        return theta[:self._n_params] * scale_factors(
            [idx for _, idx, _ in groups], np.array([s for _, _, s in groups]),
            self._n_params, theta[self._n_params:])

    def prior_widths(self) -> FloatArray:
        """No box: the prior is the Gaussian term of the energy (:data:`NO_BOX`)."""
        return np.full(self.n_params, 2.0 * NO_BOX)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "n_params": self.n_params,
                "widths": [int(w) for w in self.widths],
                "hidden_activation": self.hidden_activation, "noise_std": self.noise_std,
                "hierarchical": self.hierarchical, "ard": self.ard,
                "ard_levels": self.ard_levels, "parameterisation": self.parameterisation,
                "group_precisions": (None if self.group_precisions is None
                                     else self.group_precisions.tolist())}

    def potential(self, data: Any = None, **options: Any) -> Any:
        """Bind to a data set with ``.x`` and real-valued ``.y`` (or ``x=``, ``y=``)."""
        x, y = bound_data(self.name, data, options)
        if self.scaled:
            return ScaleFactorPotential(self, RegressionPotential(self.direct, x, y, **options))
        return RegressionPotential(self, x, y, **options)

    def predict(self, theta: FloatArray, x: FloatArray) -> FloatArray:
        """Network outputs at inputs ``x``, shape ``(n, n_outputs)``."""
        n_out = int(self.widths[-1])
        pot = RegressionPotential(self.direct, np.asarray(x), np.zeros((len(x), n_out)))
        return pot.outputs(self.weights(np.asarray(theta, dtype=np.float64)))
