"""thermonet's own matrix products (float64 and float32) for the MLP kernels' narrow layers.

The products of an MLP block are narrow: (128 x 256)(256 x 40), (128 x 40)(40 x 40),
(40 x 128)(128 x 256), ... A BLAS library packs its operands into buffers for large matrices
and runs its micro-kernel over them; at these sizes the packing and the call cost much of the
time, and OpenBLAS 0.3.30 runs AVX2 code on AMD Zen 5, whose AVX-512 units then stay half idle
(docs/performance.md, "thermonet's own products"). Here every product is register-blocked
directly on the operands: a tile of ``MR`` rows of ``C`` by ``NG`` groups of eight columns is
held in :data:`thermonet.kernels.matmul.simd.f64x8` registers (sixteen columns per group of
:data:`thermonet.kernels.matmul.simd.f32x16` for float32), and for each ``k`` one load of each
group of ``B``'s row ``k`` feeds ``MR`` fused multiply-adds. ``B`` is read row by row, so it
must not be transposed; ``A`` may be (its element is broadcast to all lanes).

Every element ``C[i, j]`` is the chain ``fma(A[i, k], B[k, j], .)`` over ``k = 0, 1, ...`` from
0, one rounding per term (in the operands' precision), whatever the tile, the CPU or the vector
width: the tile shape is
chosen for the machine (:data:`MR`, :data:`NG`; AVX-512 has 32 vector registers, AVX2 16), and
the results are the same bits on every machine (tests/kernels/test_gemm.py compiles for
AVX-512, AVX2 and plain x86-64 and compares). The last ``n mod lanes`` columns go through a
zero-padded copy of ``B``'s columns, the last ``m mod MR`` rows through strips of at most four
rows: the same chain for each element.

:func:`product` is ``c = op(a) @ op(b)`` and :func:`product_acc` is ``c += alpha * (op(a) @
op(b))`` (the product rounded first, then ``c + alpha * p`` element by element, as the
``np.dot`` backend does), for C-contiguous operands, all float64 or all float32. A transposed
``b`` (``tb``) is accepted and gives the same bits, but through scalar chains: the kernels
transpose their weights into scratch instead (:mod:`thermonet.kernels.mlp`).

The kernels do not call these functions directly: :func:`c_product_address` compiles the same
code once as a C-callable function, and :mod:`~thermonet.kernels.matmul.blas` registers it as a
symbol the kernels call (Numba would otherwise link and optimise the products' code again inside
every kernel that calls them: 11.5 s instead of 7 s for the first call of M(3)'s gradient).
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic, overload

from thermonet.kernels.elementwise import fma
from thermonet.kernels.environment import compiled_for_avx512
from thermonet.kernels.jit import cfunction, kernel
from thermonet.kernels.matmul import simd

_WIDE = compiled_for_avx512()
#: rows of ``C`` per register tile
MR = 4 if _WIDE else 6
#: groups of columns (eight float64 or sixteen float32 lanes) per register tile: 4 x 5
#: accumulators fill 20 of AVX-512's 32 registers; with AVX2 a group takes two of 16, and
#: 6 x 1 was the fastest of 4 x 1, 6 x 1, 8 x 1, 4 x 2 and 4 x 3 (docs/performance.md)
NG = 5 if _WIDE else 1
#: rows of the strips that cover the edges of the tiles
_STRIP = 4


# The micro-kernels take their operands grouped (plain tuples, which Numba passes as their
# fields, so the calls still inline to the same code): ``a = (ap, sai, sak)``, the pointer and
# A's steps between rows and along k; ``b = (bp, ldb)`` and ``c = (cp, ldc)``, a pointer and
# its row stride; ``out = (alpha, accumulate)``, how the result is written.
@kernel
def _tile(k, a, b, c, out):
    """``C[0:MR, 0:lanes NG]`` from ``A(i, kk) = ap[i sai + kk sak]`` and ``B[kk, :] =
    bp[kk ldb:]``; stored, or with ``accumulate`` added as ``c + alpha p``."""
    (ap, sai, sak), (bp, ldb), (cp, ldc) = a, b, c
    w = simd.width(bp)
    z = simd.zero(bp)
    c00 = z
    c01 = z
    c02 = z
    c03 = z
    c04 = z
    c10 = z
    c11 = z
    c12 = z
    c13 = z
    c14 = z
    c20 = z
    c21 = z
    c22 = z
    c23 = z
    c24 = z
    c30 = z
    c31 = z
    c32 = z
    c33 = z
    c34 = z
    c40 = z
    c50 = z
    for kk in range(k):
        bo = kk * ldb
        ao = kk * sak
        a0 = simd.splat(ap[ao])
        a1 = simd.splat(ap[ao + sai])
        a2 = simd.splat(ap[ao + 2 * sai])
        a3 = simd.splat(ap[ao + 3 * sai])
        bv = simd.load(bp, bo)
        c00 = simd.fma(a0, bv, c00)
        c10 = simd.fma(a1, bv, c10)
        c20 = simd.fma(a2, bv, c20)
        c30 = simd.fma(a3, bv, c30)
        if MR > 4:   # the 6 x 1 tile of AVX2 (NG = 1 there)
            c40 = simd.fma(simd.splat(ap[ao + 4 * sai]), bv, c40)
            c50 = simd.fma(simd.splat(ap[ao + 5 * sai]), bv, c50)
        if NG > 1:
            bv = simd.load(bp, bo + w)
            c01 = simd.fma(a0, bv, c01)
            c11 = simd.fma(a1, bv, c11)
            c21 = simd.fma(a2, bv, c21)
            c31 = simd.fma(a3, bv, c31)
        if NG > 2:
            bv = simd.load(bp, bo + 2 * w)
            c02 = simd.fma(a0, bv, c02)
            c12 = simd.fma(a1, bv, c12)
            c22 = simd.fma(a2, bv, c22)
            c32 = simd.fma(a3, bv, c32)
        if NG > 3:
            bv = simd.load(bp, bo + 3 * w)
            c03 = simd.fma(a0, bv, c03)
            c13 = simd.fma(a1, bv, c13)
            c23 = simd.fma(a2, bv, c23)
            c33 = simd.fma(a3, bv, c33)
        if NG > 4:
            bv = simd.load(bp, bo + 4 * w)
            c04 = simd.fma(a0, bv, c04)
            c14 = simd.fma(a1, bv, c14)
            c24 = simd.fma(a2, bv, c24)
            c34 = simd.fma(a3, bv, c34)
    # offsets through pointers, not literal integers, which would compile a _put4 for each
    _put4(c, c00, c10, c20, c30, _STRIP, out)
    if MR > 4:
        _put(simd.offset(cp, 4 * ldc), c40, out)
        _put(simd.offset(cp, 5 * ldc), c50, out)
    if NG > 1:
        _put4((simd.offset(cp, w), ldc), c01, c11, c21, c31, _STRIP, out)
    if NG > 2:
        _put4((simd.offset(cp, 2 * w), ldc), c02, c12, c22, c32, _STRIP, out)
    if NG > 3:
        _put4((simd.offset(cp, 3 * w), ldc), c03, c13, c23, c33, _STRIP, out)
    if NG > 4:
        _put4((simd.offset(cp, 4 * w), ldc), c04, c14, c24, c34, _STRIP, out)


@kernel
def _strip(mr, k, a, b, c, out):
    """``C[0:mr, 0:lanes]`` (``mr`` <= 4): the edges that :func:`_tile` does not cover."""
    ap, sai, sak = a
    bp, ldb = b
    z = simd.zero(bp)
    c0 = z
    c1 = z
    c2 = z
    c3 = z
    for kk in range(k):
        ao = kk * sak
        bv = simd.load(bp, kk * ldb)
        c0 = simd.fma(simd.splat(ap[ao]), bv, c0)
        if mr > 1:
            c1 = simd.fma(simd.splat(ap[ao + sai]), bv, c1)
        if mr > 2:
            c2 = simd.fma(simd.splat(ap[ao + 2 * sai]), bv, c2)
        if mr > 3:
            c3 = simd.fma(simd.splat(ap[ao + 3 * sai]), bv, c3)
    _put4(c, c0, c1, c2, c3, mr, out)


@kernel
def _put4(c, v0, v1, v2, v3, mr, out):
    """Rows ``0 .. mr - 1`` of a column group at ``cp``, ``ldc`` apart."""
    cp, ldc = c
    _put(cp, v0, out)
    if mr > 1:
        _put(simd.offset(cp, ldc), v1, out)
    if mr > 2:
        _put(simd.offset(cp, 2 * ldc), v2, out)
    if mr > 3:
        _put(simd.offset(cp, 3 * ldc), v3, out)


@kernel
def _put(p, v, out):
    """``p[0:lanes] = v``, or with ``accumulate`` ``p[0:lanes] + alpha v``."""
    alpha, accumulate = out
    if accumulate:
        simd.store(p, 0, simd.add(simd.load(p, 0), simd.mul(simd.splat(alpha), v)))
    else:
        simd.store(p, 0, v)


@kernel
def _panel(m, ng, k, a, b, c, out):
    """``C[0:m, 0:lanes ng]``: :data:`NG` groups and :data:`MR` rows at a time, the rest of the
    rows and groups a strip (up to four rows, one group) at a time."""
    ap, sai, sak = a
    bp, ldb = b
    cp, ldc = c
    w = simd.width(bp)
    m_full = m // MR * MR
    for g0 in range(0, ng, NG):
        if ng - g0 >= NG:
            for i in range(0, m_full, MR):
                _tile(k, (simd.offset(ap, i * sai), sai, sak), (simd.offset(bp, g0 * w), ldb),
                      (simd.offset(cp, i * ldc + g0 * w), ldc), out)
            rows = m_full
            groups = NG
        else:
            rows = 0
            groups = ng - g0
        for g in range(g0, g0 + groups):
            for i in range(rows, m, _STRIP):
                _strip(min(_STRIP, m - i), k, (simd.offset(ap, i * sai), sai, sak),
                       (simd.offset(bp, g * w), ldb), (simd.offset(cp, i * ldc + g * w), ldc),
                       out)


def _buffer(p, n):
    """A zeroed array of ``n`` elements of the pointer ``p``'s type (resolved at compile time)."""


@overload(_buffer)
def _buffer_typed(p, n):
    dtype = np.float32 if p == simd.f32_ptr else np.float64
    return lambda p, n: np.zeros(n, dtype)


@kernel
def _raw(ta, tb, size, a, b, c, out):
    """``C = op(A) @ op(B)`` (or ``C += alpha op(A) @ op(B)``), ``size = (m, n, k)``, on
    row-major operands ``a = (ap, lda)``, ``b = (bp, ldb)``, ``c = (cp, ldc)`` (pointers and
    row strides of ``a``, ``b``, ``c`` as stored), all float64 or all float32 (then ``alpha``
    of ``out = (alpha, accumulate)`` is rounded to float32)."""
    m, n, k = size
    ap, lda = a
    bp, ldb = b
    cp, ldc = c
    alpha, accumulate = out
    sai = 1 if ta else lda
    sak = lda if ta else 1
    alpha = simd.scalar(cp, alpha)
    if m == 0 or n == 0:
        return
    if tb:
        # op(a) @ b.T element by element, in the same chain as the tiles
        for i in range(m):
            for j in range(n):
                s = simd.scalar(cp, 0.0)
                for kk in range(k):
                    s = fma(ap[i * sai + kk * sak], bp[j * ldb + kk], s)
                o = i * ldc + j
                cp[o] = cp[o] + alpha * s if accumulate else s
        return
    w = simd.width(bp)
    n_full = n // w * w
    if n_full > 0:
        _panel(m, n_full // w, k, (ap, sai, sak), b, c, (alpha, accumulate))
    if n_full == n:
        return
    # the last n mod lanes columns: B's columns zero-padded to a group, C's rows through a
    # buffer
    bt = _buffer(bp, max(k, 1) * w)
    for kk in range(k):
        for j in range(n_full, n):
            bt[kk * w + j - n_full] = bp[kk * ldb + j]
    ct = _buffer(cp, _STRIP * w)
    for i in range(0, m, _STRIP):
        mr = min(_STRIP, m - i)
        _strip(mr, k, (simd.offset(ap, i * sai), sai, sak), (simd.address(bt), w),
               (simd.address(ct), w), (alpha, np.bool_(False)))
        for r in range(mr):
            for j in range(n_full, n):
                t = ct[r * w + j - n_full]
                o = (i + r) * ldc + j
                cp[o] = cp[o] + alpha * t if accumulate else t


@kernel
def _products(ta, tb, a, b, c, alpha, accumulate):
    _raw(ta, tb, (c.shape[0], c.shape[1], a.shape[0] if ta else a.shape[1]),
         (simd.address(a), a.shape[1]), (simd.address(b), b.shape[1]),
         (simd.address(c), c.shape[1]), (alpha, accumulate))


@kernel
def product(ta, tb, a, b, c):
    """``c = op(a) @ op(b)``, ``op(x) = x.T if t else x`` (C-contiguous operands, all float64
    or all float32)."""
    _products(ta, tb, a, b, c, 1.0, np.bool_(False))


@kernel
def product_acc(ta, tb, a, b, c, alpha):
    """``c += alpha * (op(a) @ op(b))``, the product rounded first."""
    _products(ta, tb, a, b, c, alpha, np.bool_(True))


#: signature of the C-callable product (:func:`c_product_address`): ``(args, alpha)``, ``args``
#: a pointer to twelve int64 (:func:`argument_block`): ``ta, tb, accumulate`` (0 or 1), ``m, n,
#: k``, then the address and row stride (in elements) of ``a``, of ``b`` and of ``c``
C_SIGNATURE = types.void(types.CPointer(types.int64), types.float64)


def _c_product(args, alpha):
    _raw(args[0] != 0, args[1] != 0, (args[3], args[4], args[5]),
         (simd.pointer(args[6]), args[7]), (simd.pointer(args[8]), args[9]),
         (simd.pointer(args[10]), args[11]), (alpha, args[2] != 0))


#: the same for float32 operands (``alpha`` float32)
C_SIGNATURE32 = types.void(types.CPointer(types.int64), types.float32)


def _c_product32(args, alpha):
    _raw(args[0] != 0, args[1] != 0, (args[3], args[4], args[5]),
         (simd.pointer32(args[6]), args[7]), (simd.pointer32(args[8]), args[9]),
         (simd.pointer32(args[10]), args[11]), (alpha, args[2] != 0))


@intrinsic
def argument_block(typingctx, values):
    """A pointer to the int64 tuple ``values`` copied into the calling function's stack frame
    (valid until it returns): the ``args`` of :data:`C_SIGNATURE`, without a heap
    allocation per product."""
    if not (isinstance(values, types.UniTuple) and values.dtype == types.int64):
        return None
    n = values.count

    def codegen(context, builder, sig, args):
        block = cgutils.alloca_once(builder, ir.IntType(64), size=n)
        for i in range(n):
            builder.store(builder.extract_value(args[0], i),
                          builder.gep(block, [ir.Constant(ir.IntType(32), i)]))
        return block

    return types.CPointer(types.int64)(values), codegen


_compiled: dict = {}


def c_product_address(dtype: str = "float64") -> int:
    """Address of :data:`C_SIGNATURE`'s function (``dtype="float32"``: of
    :data:`C_SIGNATURE32`'s), compiled (or loaded from the cache) on the first call. The
    kernels call the products through it (:mod:`~thermonet.kernels.matmul.blas`), so that their
    code is compiled and optimised once, not again inside every kernel that calls it (Numba links a
    callee's code into each caller)."""
    if dtype not in _compiled:
        if dtype == "float32":
            _compiled[dtype] = cfunction(C_SIGNATURE32)(_c_product32)
        else:
            _compiled[dtype] = cfunction(C_SIGNATURE)(_c_product)
    return int(_compiled[dtype].address)
