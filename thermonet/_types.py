"""Old path of :mod:`thermonet.types`."""

from thermonet.types import Float32Array, FloatArray, IntArray, Seed

__all__ = ["Float32Array", "FloatArray", "IntArray", "Seed"]
