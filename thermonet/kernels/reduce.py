"""Sums and dot products of float64 vectors in a fixed order that LLVM can vectorise.

Without reassociation (fastmath off, thermonet's default) LLVM must add a loop's terms in
the order written, one at a time: a dot product of 200 terms is then a chain of 200 scalar
FMAs. :func:`vdot` and :func:`vsum` fix a different order instead, written out in the IR:
eight lanes, lane ``l`` accumulating the terms ``c = l (mod 8)`` by fused multiply-adds, the
lanes added pairwise ``((0+1)+(2+3))+((4+5)+(6+7))``, then the last ``n mod 8`` terms in
order. The order does not depend on the CPU: LLVM lowers the 8-wide vector to one AVX-512
register or two AVX2 registers, so the result is the same bits on either (and on a CPU
without FMA instructions, where ``llvm.fma`` is a correctly rounded library call). Accuracy:
the usual bound of a blocked sum, ``|error| <= (n/8 + 3) eps sum |a_c b_c|``
(tests/test_kernel_numerics.py checks it and the order). Speed: docs/performance.md.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

#: accumulator lanes (the order above); 8 doubles = one AVX-512 or two AVX2 registers
LANES = 8


def _is_vector(t: types.Type) -> bool:
    return (isinstance(t, types.Array) and t.ndim == 1 and t.layout == "C"
            and t.dtype == types.float64)


def _reduce(context, builder, arrays, sig_args):
    """IR of ``sum_c prod_k arrays[k][c]`` (one or two factors) in the fixed order."""
    f64 = ir.DoubleType()
    i64 = ir.IntType(64)
    vt = ir.VectorType(f64, LANES)
    structs = [context.make_array(t)(context, builder, a)
               for t, a in zip(sig_args, arrays, strict=True)]
    n = builder.extract_value(structs[0].shape, 0)
    ptrs = [builder.bitcast(s.data, f64.as_pointer()) for s in structs]
    fma_v = cgutils.get_or_insert_function(
        builder.module, ir.FunctionType(vt, [vt, vt, vt]), f"llvm.fma.v{LANES}f64")
    fma_s = cgutils.get_or_insert_function(
        builder.module, ir.FunctionType(f64, [f64, f64, f64]), "llvm.fma.f64")
    n_vec = builder.udiv(n, ir.Constant(i64, LANES))
    head = builder.mul(n_vec, ir.Constant(i64, LANES))
    acc = cgutils.alloca_once_value(builder, ir.Constant(vt, [0.0] * LANES))
    with cgutils.for_range(builder, n_vec) as loop:
        off = builder.mul(loop.index, ir.Constant(i64, LANES))
        vals = [builder.load(builder.bitcast(builder.gep(p, [off]), vt.as_pointer()), align=8)
                for p in ptrs]
        if len(vals) == 2:
            builder.store(builder.call(fma_v, [vals[0], vals[1], builder.load(acc)]), acc)
        else:
            builder.store(builder.fadd(builder.load(acc), vals[0]), acc)
    v = builder.load(acc)
    lane = [builder.extract_element(v, ir.Constant(ir.IntType(32), j)) for j in range(LANES)]
    pairs = [builder.fadd(lane[j], lane[j + 1]) for j in range(0, LANES, 2)]
    quads = [builder.fadd(pairs[j], pairs[j + 1]) for j in range(0, len(pairs), 2)]
    total = cgutils.alloca_once_value(builder, builder.fadd(quads[0], quads[1]))
    with cgutils.for_range_slice(builder, head, n, ir.Constant(i64, 1), inc=True) as (c, _):
        vals = [builder.load(builder.gep(p, [c])) for p in ptrs]
        if len(vals) == 2:
            builder.store(builder.call(fma_s, [vals[0], vals[1], builder.load(total)]), total)
        else:
            builder.store(builder.fadd(builder.load(total), vals[0]), total)
    return builder.load(total)


@intrinsic
def vdot(typingctx, a, b):
    """``sum_c a[c] b[c]`` of two C-contiguous float64 vectors of equal length, in the order
    above (the caller guarantees the lengths: ``b`` is read for ``len(a)`` terms)."""
    if not (_is_vector(a) and _is_vector(b)):
        return None

    def codegen(context, builder, signature, args):
        return _reduce(context, builder, args, signature.args)

    return types.float64(a, b), codegen


@intrinsic
def vsum(typingctx, a):
    """``sum_c a[c]`` of a C-contiguous float64 vector, in the order above."""
    if not _is_vector(a):
        return None

    def codegen(context, builder, signature, args):
        return _reduce(context, builder, args, signature.args)

    return types.float64(a), codegen
