"""Sums and dot products of float64 vectors in a fixed order that LLVM can vectorise.

Without reassociation (fastmath off, thermonet's default) LLVM must add a loop's terms in
the order written, one at a time: a dot product of 200 terms is then a chain of 200 scalar
FMAs. The functions here fix a different order instead: eight lanes, lane ``l`` accumulating
the terms ``c = l (mod 8)`` by fused multiply-adds (one :data:`thermonet.kernels.matmul.simd.f64x8`
accumulator), the lanes added pairwise ``((0+1)+(2+3))+((4+5)+(6+7))``, then the last
``n mod 8`` terms in order. The order does not depend on the CPU: LLVM lowers the 8-lane
vector to one AVX-512 register or two AVX2 registers, so the result is the same bits on either
(and on a CPU without FMA instructions, where ``llvm.fma`` is a correctly rounded library
call). Accuracy: the usual bound of a blocked sum, ``|error| <= (n/8 + 3) eps sum |a_c b_c|``
(tests/kernels/test_kernel_numerics.py checks it and the order). Speed: docs/performance.md.

:func:`dots` and :func:`sums` take several rows at once, four at a time: one load of the
shared vector then feeds four independent chains of fused multiply-adds instead of one chain
whose every step waits for the last (each row's result has the same bits as :func:`dot` of
it alone). They work on pointers (:func:`thermonet.kernels.matmul.simd.address`); :func:`vdot` and
:func:`vsum` are the same for C-contiguous arrays.
"""

from __future__ import annotations

from thermonet.kernels.elementwise import fma
from thermonet.kernels.jit import kernel
from thermonet.kernels.matmul import simd

#: accumulator lanes (the order above)
LANES = simd.LANES


@kernel
def finish(acc, pa, pb, head, m, product):
    """The total of a dot product (``product``) or a sum of ``pb``'s terms whose first
    ``head`` terms are in the lanes of ``acc``: the lanes added pairwise, then the terms
    ``head .. m - 1`` one by one, each with one rounding."""
    s = simd.pairwise_sum(acc)
    for c in range(head, m):
        if product:
            s = fma(pa[c], pb[c], s)
        else:
            s = s + pb[c]
    return s


@kernel
def dot(pa, pb, m):
    """``sum_c a[c] b[c]`` over ``m`` terms, in the order above."""
    head = m // LANES * LANES
    acc = simd.splat(0.0)
    for c in range(0, head, LANES):
        acc = simd.fma(simd.load(pa, c), simd.load(pb, c), acc)
    return finish(acc, pa, pb, head, m, True)


@kernel
def total(pb, m):
    """``sum_c b[c]`` over ``m`` terms, in the order above."""
    head = m // LANES * LANES
    acc = simd.splat(0.0)
    for c in range(0, head, LANES):
        acc = simd.add(acc, simd.load(pb, c))
    return finish(acc, pb, pb, head, m, False)


@kernel
def _rows(pa, rows, m, dest, product):
    """``out[o0 + t ostride] +=`` :func:`dot` of ``a`` and row ``t`` of ``pb`` (``product``)
    or :func:`total` of row ``t``, for the ``nb`` rows (``ldb`` apart), four at a time;
    ``rows = (pb, ldb, nb)``, ``dest = (out, o0, ostride)``."""
    pb, ldb, nb = rows
    out, o0, ostride = dest
    head = m // LANES * LANES
    t = 0
    while t + 4 <= nb:
        b0 = simd.offset(pb, t * ldb)
        b1 = simd.offset(b0, ldb)
        b2 = simd.offset(b1, ldb)
        b3 = simd.offset(b2, ldb)
        a0 = simd.splat(0.0)
        a1 = a0
        a2 = a0
        a3 = a0
        if product:
            for c in range(0, head, LANES):
                av = simd.load(pa, c)
                a0 = simd.fma(av, simd.load(b0, c), a0)
                a1 = simd.fma(av, simd.load(b1, c), a1)
                a2 = simd.fma(av, simd.load(b2, c), a2)
                a3 = simd.fma(av, simd.load(b3, c), a3)
        else:
            for c in range(0, head, LANES):
                a0 = simd.add(a0, simd.load(b0, c))
                a1 = simd.add(a1, simd.load(b1, c))
                a2 = simd.add(a2, simd.load(b2, c))
                a3 = simd.add(a3, simd.load(b3, c))
        out[o0 + t * ostride] += finish(a0, pa, b0, head, m, product)
        out[o0 + (t + 1) * ostride] += finish(a1, pa, b1, head, m, product)
        out[o0 + (t + 2) * ostride] += finish(a2, pa, b2, head, m, product)
        out[o0 + (t + 3) * ostride] += finish(a3, pa, b3, head, m, product)
        t += 4
    while t < nb:
        bt = simd.offset(pb, t * ldb)
        out[o0 + t * ostride] += dot(pa, bt, m) if product else total(bt, m)
        t += 1


@kernel
def dots(pa, pb, ldb, nb, m, out, o0, ostride):
    """``out[o0 + t ostride] += dot(a, b_t)`` for the ``nb`` rows ``b_t`` of ``pb`` (``ldb``
    elements apart), ``m`` terms each; ``out`` a pointer."""
    _rows(pa, (pb, ldb, nb), m, (out, o0, ostride), True)


@kernel
def sums(pb, ldb, nb, m, out, o0):
    """``out[o0 + t] += total(b_t)`` for the ``nb`` rows of ``pb`` (``ldb`` apart)."""
    _rows(pb, (pb, ldb, nb), m, (out, o0, 1), False)


@kernel
def vdot(a, b):
    """``sum_c a[c] b[c]`` of two C-contiguous float64 vectors, ``len(a)`` terms (the caller
    guarantees ``b`` has as many), in the order above."""
    return dot(simd.address(a), simd.address(b), a.shape[0])


@kernel
def vsum(a):
    """``sum_c a[c]`` of a C-contiguous float64 vector, in the order above."""
    return total(simd.address(a), a.shape[0])
