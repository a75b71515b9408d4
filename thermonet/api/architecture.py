"""Architectures: the contract of the ``thermonet.architectures`` group.

An :class:`Architecture` is the factory registered under a name (``M1``, ``M3``, ``mlp``, or a
third party's ``mypkg.name``): it knows how many parameters there are, the fan-in ``k_i`` of the
neuron each one feeds into (which sets the paper's box prior and initial draws), and how to bind
itself to a data set (a :class:`~thermonet.api.potential.Potential`, re-exported here for the
old import path).
"""

from __future__ import annotations

import abc
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from thermonet.api.potential import Potential, as_theta
from thermonet.errors import DataError, ThermonetError
from thermonet.types import FloatArray, IntArray


@dataclass(frozen=True)
class UnitSymmetry:
    """One layer of interchangeable hidden units, as parameter indices.

    Permuting the units of the layer (moving every unit's ``incoming`` and ``outgoing``
    parameters together) leaves the network's outputs unchanged; with ``sign_flip`` (an odd
    activation such as tanh) so does negating one unit's ``incoming`` and ``outgoing``
    parameters. An architecture describes only maps that also leave its prior unchanged.
    """

    #: (n_units, k) indices of each unit's incoming weights and bias
    incoming: IntArray
    #: (n_units, m) indices of the weights that carry each unit's output to the next layer
    outgoing: IntArray
    #: True when negating a unit (incoming and outgoing) is also exact
    sign_flip: bool

    @property
    def n_units(self) -> int:
        return int(self.incoming.shape[0])


def mlp_unit_symmetries(widths: Sequence[int] | IntArray, sign_flip: bool
                        ) -> tuple[UnitSymmetry, ...]:
    """The hidden-unit symmetries of a fully connected network in thermonet's layout.

    ``widths`` are the layer widths, inputs first; the parameters are, layer after layer, the
    weight matrix (row-major, shape ``(n_out, n_in)``) then the biases. Every hidden layer
    gives one :class:`UnitSymmetry`; the output units are never interchangeable (they are the
    labels).
    """
    widths = [int(w) for w in widths]
    offsets = [0]
    for n_in, n_out in itertools.pairwise(widths):
        offsets.append(offsets[-1] + (n_in + 1) * n_out)
    out = []
    for layer in range(1, len(widths) - 1):
        n_in, n_h, n_next = widths[layer - 1], widths[layer], widths[layer + 1]
        p = offsets[layer - 1]
        w = np.arange(p, p + n_h * n_in).reshape(n_h, n_in)
        b = np.arange(p + n_h * n_in, p + n_h * n_in + n_h).reshape(n_h, 1)
        q = offsets[layer]
        w_next = np.arange(q, q + n_next * n_h).reshape(n_next, n_h)
        out.append(UnitSymmetry(np.hstack([w, b]), np.ascontiguousarray(w_next.T),
                                bool(sign_flip)))
    return tuple(out)


def bound_data(name: str, data: Any, options: dict[str, Any]) -> tuple[Any, Any]:
    """The inputs and targets a network's ``potential(data, **options)`` binds: ``data.x``
    and ``data.y``, else ``x=`` and ``y=`` taken out of ``options``."""
    if data is not None:
        return data.x, data.y
    try:
        return options.pop("x"), options.pop("y")
    except KeyError:
        raise DataError(f"{name} needs a data set: potential(dataset) or "
                        "potential(x=..., y=...)") from None


def mlp_param_groups(widths: Sequence[int] | IntArray) -> dict[str, slice]:
    """``layer{l}.weight`` and ``layer{l}.bias`` (l = 1..n_layers, 1 = first hidden) of a fully
    connected network in the layout of :func:`mlp_unit_symmetries`."""
    groups: dict[str, slice] = {}
    pos = 0
    for layer, (n_in, n_out) in enumerate(itertools.pairwise(int(w) for w in widths), 1):
        groups[f"layer{layer}.weight"] = slice(pos, pos + n_in * n_out)
        pos += n_in * n_out
        groups[f"layer{layer}.bias"] = slice(pos, pos + n_out)
        pos += n_out
    return groups


class Architecture(abc.ABC):
    """Base class of architecture plugins (entry-point group ``thermonet.architectures``).

    Class attributes
    ----------------
    name : str
        Registry name.
    api_version : int
        Version of this contract the plugin was written for (currently 1).
    default_prior_scale : float
        ``c`` in the box prior ``sigma_i = c / sqrt(k_i)`` (paper eq. 11): 100 for M(1)/M(3),
        2000 for M(3*).
    uses_data : bool
        True (default) if :meth:`potential` binds a data set; False for data-free targets,
        for which a configuration naming data is refused.
    example_data : str
        The data set (a :func:`thermonet.data.load_data` name) that the plugin checker
        (``thermonet plugins --check``) binds :meth:`potential` to: "D50" (default) for
        classifiers of MNIST digits, e.g. "robot-arm" for a regression model of two inputs.
    """

    name: ClassVar[str] = ""
    api_version: ClassVar[int] = 1
    default_prior_scale: ClassVar[float] = 100.0
    #: False for data-free targets (analytic potentials): a run with data is refused
    uses_data: ClassVar[bool] = True
    #: the data set the plugin checker binds potential() to
    example_data: ClassVar[str] = "D50"

    @property
    @abc.abstractmethod
    def n_params(self) -> int:
        """Number of parameters."""

    @abc.abstractmethod
    def fan_in(self) -> IntArray:
        """Fan-in ``k_i``, including the bias, of the neuron each parameter feeds into."""

    @abc.abstractmethod
    def potential(self, data: Any = None, **options: Any) -> Potential:
        """Bind to a data set (anything with ``.x`` and ``.y``, or None for data-free targets)."""

    def describe(self) -> dict[str, Any]:
        """A JSON-serialisable description (name and structural settings)."""
        return {"name": self.name, "n_params": self.n_params}

    def initial_draw(self, rng: np.random.Generator) -> FloatArray:
        """Standard initialisation: ``w_i ~ U(-1/sqrt(k_i), +1/sqrt(k_i))`` (paper Sec. 3.3.2)."""
        half = 1.0 / np.sqrt(self.fan_in().astype(np.float64))
        return rng.uniform(-half, half)

    def prior_widths(self) -> FloatArray:
        """Full widths ``sigma_i`` of the box prior ``|w_i| < sigma_i/2``, one per parameter.

        Default: the paper's ``sigma_i = c / sqrt(k_i)`` (eq. 11) with ``c`` =
        :attr:`default_prior_scale` and ``k_i`` = :meth:`fan_in`. Override it to give any
        per-parameter widths; thermonet builds every box prior from this method.
        """
        return float(self.default_prior_scale) / np.sqrt(self.fan_in().astype(np.float64))

    def masses(self) -> FloatArray:
        """Per-parameter masses for ``[sampler] mass = "architecture"`` (default: the fan-in
        ``k_i``, as ``mass = "fan_in"``). Override it to give any positive masses."""
        return self.fan_in().astype(np.float64)

    def param_groups(self) -> dict[str, slice]:
        """Named contiguous groups of parameters (for per-group prior widths)."""
        return {"all": slice(0, self.n_params)}

    def unit_symmetries(self) -> tuple[UnitSymmetry, ...] | None:
        """The exact symmetries of the network and its prior: layers of interchangeable
        hidden units (see :class:`UnitSymmetry`), or None (the default) when none are known.

        The evidence workflow counts the copies of a basin these maps produce
        (``thermonet.evidence.basins.symmetry``). Return only maps that leave both the outputs and
        the prior unchanged.
        """
        return None

    def predict_proba(self, theta: FloatArray, x: FloatArray) -> FloatArray:
        """Class probabilities ``prob(q | x, theta)``, shape ``(n_data, n_classes)``."""
        raise ThermonetError(f"architecture {self.name!r} is not a classifier: it has no "
                             "predict_proba()")


class FullyConnected(Architecture):
    """An :class:`Architecture` of a fully connected network of layer ``widths`` (inputs
    first) whose hidden units are ``hidden_activation`` (``"tanh"`` or ``"logistic"``): its
    unit symmetries and parameter groups follow from them."""

    widths: IntArray
    hidden_activation: str

    def unit_symmetries(self) -> tuple[UnitSymmetry, ...]:
        """Permutations of every hidden layer; sign flips too for tanh units (an even prior
        is assumed). A logistic unit's flip (sigma(-x) = 1 - sigma(x)) needs the next layer's
        biases to shift, which can leave a box, so it is not counted."""
        return mlp_unit_symmetries(self.widths, self.hidden_activation == "tanh")

    def param_groups(self) -> dict[str, slice]:
        """``layer{l}.weight`` and ``layer{l}.bias`` for l = 1..n_layers (1 = first hidden)."""
        return mlp_param_groups(self.widths)


__all__ = ["Architecture", "FullyConnected", "Potential", "UnitSymmetry", "as_theta",
           "mlp_unit_symmetries"]
