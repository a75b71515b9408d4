"""Momentum draws for HMC: ``p = z * scale`` with standard normals ``z`` from a NumPy
Generator, and the kinetic energy ``sum p_i^2 / (2 m_i)`` summed in index order (as
:func:`thermonet.kernels.leapfrog.kinetic` sums it).

:func:`momenta` is the entry point; :func:`draw_momenta` and :func:`scale_momenta` are its two
routes, which give the same bits and leave the generator in the same state.
"""

from __future__ import annotations

import numpy as np

from thermonet.kernels.jit import kernel


@kernel
def draw_momenta(rng, scale, inv_mass, p):
    """``p_i = z_i * scale_i`` with ``z = rng.standard_normal(n)``; returns ``kinetic(p)``.

    Numba's Generator methods use NumPy's algorithms on the same bit generator, so ``p`` and
    the state ``rng`` is left in are exactly those of the NumPy expression (tested), at about
    half its cost for thousands of parameters.
    """
    k = 0.0
    for i in range(p.shape[0]):
        v = rng.standard_normal() * scale[i]
        p[i] = v
        k += 0.5 * inv_mass[i] * v * v
    return k


@kernel
def scale_momenta(p, scale, inv_mass):
    """``p_i <- p_i * scale_i`` for standard normals ``p``; returns ``kinetic(p)``, summed as
    :func:`draw_momenta` sums it."""
    k = 0.0
    for i in range(p.shape[0]):
        v = p[i] * scale[i]
        p[i] = v
        k += 0.5 * inv_mass[i] * v * v
    return k


#: up to this many momenta :func:`momenta` draws the normals in NumPy: Numba types a
#: Generator argument in Python (about 10 us a call) while NumPy's draw costs ~16 ns a normal
#: against the compiled loop's ~9 ns, so the two break even between 1,000 and 3,000
#: (benchmarks/bench_momenta.py prints both on the machine at hand)
NUMPY_DRAW_MAX = 512


def momenta(rng: np.random.Generator, scale: np.ndarray, inv_mass: np.ndarray,
            p: np.ndarray) -> float:
    """:func:`draw_momenta` into the float64 array ``p``, by the cheaper route for its size:
    the same bits and generator state either way."""
    if p.shape[0] > NUMPY_DRAW_MAX:
        return float(draw_momenta(rng, scale, inv_mass, p))
    rng.standard_normal(out=p)
    return float(scale_momenta(p, scale, inv_mass))
