"""The hidden units' non-linearity and its derivative, and the activation code that says which.

The activation code (:mod:`thermonet.kernels.mlp`): 0 for a linear output layer, 1 for a
logistic one, plus :data:`HIDDEN_TANH` for tanh hidden units instead of logistic ones. A plain
int makes the kernels test the hidden activation at run time, so both compile;
:func:`activation_code` gives the code in an integer type that names the hidden activation, and
:func:`hidden_units`/:func:`hidden_delta` then compile only that one (a run uses one).
"""

from __future__ import annotations

import numpy as np
from numba import types
from numba.extending import overload

from thermonet.kernels.elementwise import ONE_F, sigmoid_inplace, tanh_inplace
from thermonet.kernels.jit import kernel

LINEAR = 0
LOGISTIC = 1
#: bit of the activation code: the output activation (LINEAR or LOGISTIC)
OUTPUT_MASK = 1
#: bit of the activation code: tanh hidden units (otherwise logistic)
HIDDEN_TANH = 2

# The integer types that carry the hidden activation in their type (activation_code); any other
# integer type is tested at run time
_LOGISTIC_CODE = np.uint8
_TANH_CODE = np.uint16


def activation_code(code):
    """``code`` (the activation code of the module docstring) as a NumPy integer whose type
    says which hidden activation it holds: the kernels it reaches compile that one only."""
    code = int(code)
    return _TANH_CODE(code) if code & HIDDEN_TANH else _LOGISTIC_CODE(code)


def hidden_kind(out_act):
    """``"logistic"`` or ``"tanh"`` where the type of ``out_act`` (a Numba integer type) says
    which (:func:`activation_code`), ``None`` where the code must be tested at run time."""
    if out_act == types.uint8:
        return "logistic"
    if out_act == types.uint16:
        return "tanh"
    return None


def hidden_units(z, b, out_act):
    """The hidden non-linearity of ``z + b``, in place: the one the type of ``out_act`` names
    (:func:`activation_code`), or the one its value names, compiling both."""


@overload(hidden_units)
def _hidden_units_typed(z, b, out_act):
    kind = hidden_kind(out_act)
    if kind == "logistic":
        return lambda z, b, out_act: sigmoid_inplace(z, b)
    if kind == "tanh":
        return lambda z, b, out_act: tanh_inplace(z, b)

    def either(z, b, out_act):
        if out_act & HIDDEN_TANH:
            tanh_inplace(z, b)
        else:
            sigmoid_inplace(z, b)
    return either


@kernel
def tanh_hidden_delta(a_prev, da, gb):
    """``da`` times tanh's derivative ``1 - a^2`` at ``a_prev``, in place; ``gb`` = its
    column sums (the layer's bias gradient). ONE_F, not 1.0: a float64 literal would promote
    the float32 kernels' loop to float64 (half the vector lanes); float64 arrays promote ONE_F
    exactly."""
    rows, n_in = da.shape
    for c in range(n_in):
        gb[c] = 0.0
    for r in range(rows):
        for c in range(n_in):
            a = a_prev[r, c]
            v = da[r, c] * (ONE_F - a * a)
            da[r, c] = v
            gb[c] += v


@kernel
def logistic_hidden_delta(a_prev, da, gb):
    """As :func:`tanh_hidden_delta` for logistic units, derivative ``a (1 - a)``."""
    rows, n_in = da.shape
    for c in range(n_in):
        gb[c] = 0.0
    for r in range(rows):
        for c in range(n_in):
            a = a_prev[r, c]
            v = da[r, c] * (a * (ONE_F - a))
            da[r, c] = v
            gb[c] += v


def hidden_delta(a_prev, da, gb, out_act):
    """``da`` times the hidden non-linearity's derivative at ``a_prev``, in place; ``gb`` =
    its column sums. The non-linearity is chosen as in :func:`hidden_units`."""


@overload(hidden_delta)
def _hidden_delta_typed(a_prev, da, gb, out_act):
    kind = hidden_kind(out_act)
    if kind == "logistic":
        return lambda a_prev, da, gb, out_act: logistic_hidden_delta(a_prev, da, gb)
    if kind == "tanh":
        return lambda a_prev, da, gb, out_act: tanh_hidden_delta(a_prev, da, gb)

    def either(a_prev, da, gb, out_act):
        if out_act & HIDDEN_TANH:
            tanh_hidden_delta(a_prev, da, gb)
        else:
            logistic_hidden_delta(a_prev, da, gb)
    return either
