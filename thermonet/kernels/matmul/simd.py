"""Eight float64 (or sixteen float32) lanes as one Numba value, for kernels that keep whole
vectors in registers.

LLVM vectorises a loop over an array, but every loop of a kernel then reads its inputs from
memory and writes its result back, and a loop over a few hundred elements spends a good part
of its time in its own set-up (the checks that its arrays do not overlap, the remainder
iterations). A kernel that works on eight cases at a time through many steps (a hidden unit's
pre-activation, its tanh, the output it feeds, the gradient terms it makes) can instead hold
each step's result in a register: :data:`f64x8` is the LLVM vector ``<8 x double>`` as a Numba
type, and the functions here are its loads, stores and arithmetic, each one LLVM instruction
or intrinsic. LLVM lowers a ``<8 x double>`` to one AVX-512 register or two AVX2 registers,
so a kernel written with them computes the same bits on both (every lane is the scalar IEEE
operation; nothing is reassociated).

:func:`load` and :func:`store` work on a pointer from :func:`address`, not on an array: a
kernel's helper that takes an array updates its reference count at every call (an atomic
operation; in an inner loop that took most of the time), one that takes a pointer does not,
and LLVM inlines it. The caller guarantees that the eight elements from ``i`` on exist (no
bounds check, like the kernels' other inner loops).

:data:`f32x16` is the float32 counterpart (``<16 x float>``, the same 64 bytes): :func:`load`
from a float32 pointer and :func:`splat` of a float32 give it, and :func:`add`, :func:`sub`,
:func:`mul`, :func:`div` and :func:`fma` take either type (both operands the same); the other
functions are float64 only.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic, models, register_model

#: lanes of :data:`f64x8`
LANES = 8

_F64 = ir.DoubleType()
_I64 = ir.IntType(64)
_VT = ir.VectorType(_F64, LANES)
_IVT = ir.VectorType(_I64, LANES)


class F64x8(types.Type):
    """The Numba type of eight float64 lanes (an LLVM ``<8 x double>`` value)."""

    def __init__(self) -> None:
        super().__init__(name="f64x8")


#: the type of the values this module's functions take and return
f64x8 = F64x8()


@register_model(F64x8)
class _F64x8Model(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, _VT)


#: the pointer type :func:`address` returns for float64 arrays
f64_ptr = types.CPointer(types.float64)

#: lanes of :data:`f32x16`
LANES32 = 16
_F32 = ir.FloatType()
_VT32 = ir.VectorType(_F32, LANES32)


class F32x16(types.Type):
    """The Numba type of sixteen float32 lanes (an LLVM ``<16 x float>`` value): the float32
    counterpart of :data:`f64x8`, one 512-bit register or two 256-bit ones."""

    def __init__(self) -> None:
        super().__init__(name="f32x16")


#: the float32 vector type (:func:`load` from an :data:`f32_ptr`, :func:`splat` of a float32)
f32x16 = F32x16()


@register_model(F32x16)
class _F32x16Model(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, _VT32)


#: the pointer type :func:`address` returns for float32 arrays
f32_ptr = types.CPointer(types.float32)

# pointer type -> (vector type, LLVM element type, LLVM vector type, lanes, alignment)
_BY_PTR = {f64_ptr: (f64x8, _F64, _VT, LANES, 8), f32_ptr: (f32x16, _F32, _VT32, LANES32, 4)}
# vector type -> (LLVM vector type, LLVM intrinsic suffix)
_BY_VEC = {f64x8: (_VT, f"v{LANES}f64"), f32x16: (_VT32, f"v{LANES32}f32")}


@intrinsic
def address(typingctx, arr):
    """Pointer to the first element of a C-contiguous float64 (or float32) array (no reference
    is taken: the array must outlive the pointer's use)."""
    if not (isinstance(arr, types.Array) and arr.layout == "C"
            and arr.dtype in (types.float64, types.float32)):
        return None
    ptr = f64_ptr if arr.dtype == types.float64 else f32_ptr
    elem = _BY_PTR[ptr][1]

    def codegen(context, builder, sig, args):
        a = context.make_array(sig.args[0])(context, builder, args[0])
        return builder.bitcast(a.data, elem.as_pointer())

    return ptr(arr), codegen


@intrinsic
def pointer(typingctx, addr):
    """The float64 pointer at the address ``addr`` (an integer, as a C caller passes it)."""
    if not isinstance(addr, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        return builder.inttoptr(args[0], _F64.as_pointer())

    return f64_ptr(addr), codegen


@intrinsic
def pointer32(typingctx, addr):
    """The float32 pointer at the address ``addr``."""
    if not isinstance(addr, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        return builder.inttoptr(args[0], _F32.as_pointer())

    return f32_ptr(addr), codegen


@intrinsic
def offset(typingctx, p, i):
    """``p + i`` (a pointer ``i`` elements on)."""
    if not (p in _BY_PTR and isinstance(i, types.Integer)):
        return None

    def codegen(context, builder, sig, args):
        return builder.gep(args[0], [context.cast(builder, args[1], sig.args[1], types.intp)])

    return p(p, i), codegen


def _lanes_at(context, builder, sig, args):
    i = context.cast(builder, args[1], sig.args[1], types.intp)
    return builder.bitcast(builder.gep(args[0], [i]), _BY_PTR[sig.args[0]][2].as_pointer())


@intrinsic
def load(typingctx, p, i):
    """``p[i:i + lanes]`` as one vector (``p`` from :func:`address`): an :data:`f64x8` from
    a float64 pointer, an :data:`f32x16` from a float32 one."""
    if not (p in _BY_PTR and isinstance(i, types.Integer)):
        return None
    align = _BY_PTR[p][4]

    def codegen(context, builder, sig, args):
        return builder.load(_lanes_at(context, builder, sig, args), align=align)

    return _BY_PTR[p][0](p, i), codegen


@intrinsic
def store(typingctx, p, i, v):
    """``p[i:i + lanes] = v``."""
    if not (p in _BY_PTR and isinstance(i, types.Integer) and v == _BY_PTR[p][0]):
        return None
    align = _BY_PTR[p][4]

    def codegen(context, builder, sig, args):
        builder.store(args[2], _lanes_at(context, builder, sig, args), align=align)
        return context.get_dummy_value()

    return types.none(p, i, v), codegen


def _splat_of(builder, scalar, vt):
    lanes = vt.count
    v = builder.insert_element(ir.Constant(vt, ir.Undefined), scalar, ir.Constant(_I64, 0))
    return builder.shuffle_vector(v, ir.Constant(vt, ir.Undefined),
                                  ir.Constant(ir.VectorType(ir.IntType(32), lanes), [0] * lanes))


@intrinsic
def splat(typingctx, x):
    """Every lane ``x``: an :data:`f32x16` for a float32 ``x``, else an :data:`f64x8`."""
    if not isinstance(x, types.Float):
        return None
    wide = x != types.float32

    def codegen(context, builder, sig, args):
        if not wide:
            return _splat_of(builder, args[0], _VT32)
        s = context.cast(builder, args[0], sig.args[0], types.float64)
        return _splat_of(builder, s, _VT)

    return (f64x8 if wide else f32x16)(x), codegen


@intrinsic
def zero(typingctx, p):
    """A vector of zeros of the type :func:`load` gives for the pointer ``p``."""
    if p not in _BY_PTR:
        return None
    vt = _BY_PTR[p][2]

    def codegen(context, builder, sig, args):
        return ir.Constant(vt, [0.0] * vt.count)

    return _BY_PTR[p][0](p), codegen


@intrinsic
def width(typingctx, p):
    """The lanes of the vectors :func:`load` gives for the pointer ``p`` (8 or 16), a constant."""
    if p not in _BY_PTR:
        return None
    lanes = _BY_PTR[p][3]

    def codegen(context, builder, sig, args):
        return ir.Constant(_I64, lanes)

    return types.int64(p), codegen


@intrinsic
def scalar(typingctx, p, x):
    """``x`` converted to the element type of the pointer ``p``."""
    if not (p in _BY_PTR and isinstance(x, (types.Float, types.Integer))):
        return None
    to = p.dtype

    def codegen(context, builder, sig, args):
        return context.cast(builder, args[1], sig.args[1], to)

    return to(p, x), codegen


def _binary(op: str):
    @intrinsic
    def f(typingctx, a, b):
        if not (a in _BY_VEC and b == a):
            return None

        def codegen(context, builder, sig, args):
            return getattr(builder, op)(args[0], args[1])

        return a(a, b), codegen
    return f


add = _binary("fadd")
add.__doc__ = "``a + b`` lane by lane."
sub = _binary("fsub")
sub.__doc__ = "``a - b`` lane by lane."
mul = _binary("fmul")
mul.__doc__ = "``a * b`` lane by lane."
div = _binary("fdiv")
div.__doc__ = "``a / b`` lane by lane."


@intrinsic
def fma(typingctx, a, b, c):
    """``a * b + c`` with one rounding, lane by lane (``llvm.fma``)."""
    if not (a in _BY_VEC and b == a and c == a):
        return None
    vt, suffix = _BY_VEC[a]

    def codegen(context, builder, sig, args):
        fn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(vt, [vt, vt, vt]), f"llvm.fma.{suffix}")
        return builder.call(fn, args)

    return a(a, b, c), codegen


@intrinsic
def fms(typingctx, a, b, c):
    """``a * b - c`` with one rounding, lane by lane."""
    if not (a == f64x8 and b == f64x8 and c == f64x8):
        return None

    def codegen(context, builder, sig, args):
        fn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(_VT, [_VT, _VT, _VT]), f"llvm.fma.v{LANES}f64")
        return builder.call(fn, [args[0], args[1], builder.fneg(args[2])])

    return f64x8(a, b, c), codegen


@intrinsic
def floor(typingctx, a):
    """``floor(a)`` lane by lane."""
    if a != f64x8:
        return None

    def codegen(context, builder, sig, args):
        fn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(_VT, [_VT]), f"llvm.floor.v{LANES}f64")
        return builder.call(fn, args)

    return f64x8(a), codegen


@intrinsic
def where(typingctx, op, a, b, x, y):
    """``x if a op b else y`` lane by lane; ``op`` a literal ``"<"``, ``">"`` or ``"=="``, an
    ordered comparison (false if either side is NaN), as Python's on floats."""
    if not (isinstance(op, types.StringLiteral) and op.literal_value in ("<", ">", "==")
            and a == b == x == y == f64x8):
        return None
    cmp = op.literal_value

    def codegen(context, builder, sig, args):
        mask = builder.fcmp_ordered(cmp, args[1], args[2])
        return builder.select(mask, args[3], args[4])

    return f64x8(op, a, b, x, y), codegen


#: 2^52 + 1023: adding it to an integer k in [-1023, 2^52 - 1024] leaves k + 1023 in the low
#: bits of the sum's significand
_EXP2_MAGIC = 4503599627371519.0


@intrinsic
def exp2i(typingctx, k):
    """``2^k`` for lanes holding integers ``k`` in [-1022, 1023], built from exponent bits:
    ``(k + 1023) << 52``, with ``k + 1023`` read from the bits of ``k + 2^52 + 1023`` (a
    conversion from double to 64-bit integer has no AVX2 instruction, and LLVM would do it
    one lane at a time; the same bits either way)."""
    if k != f64x8:
        return None

    def codegen(context, builder, sig, args):
        shifted = builder.fadd(args[0], ir.Constant(_VT, [_EXP2_MAGIC] * LANES))
        bits = builder.shl(builder.bitcast(shifted, _IVT), ir.Constant(_IVT, [52] * LANES))
        return builder.bitcast(bits, _VT)

    return f64x8(k), codegen


@intrinsic
def pairwise_sum(typingctx, v):
    """``((v0 + v1) + (v2 + v3)) + ((v4 + v5) + (v6 + v7))``: the lane order of
    :mod:`thermonet.kernels.matmul.reduce`."""
    if v != f64x8:
        return None

    def codegen(context, builder, sig, args):
        lanes = [builder.extract_element(args[0], ir.Constant(ir.IntType(32), j))
                 for j in range(LANES)]
        while len(lanes) > 1:
            lanes = [builder.fadd(lanes[j], lanes[j + 1]) for j in range(0, len(lanes), 2)]
        return lanes[0]

    return types.float64(v), codegen
