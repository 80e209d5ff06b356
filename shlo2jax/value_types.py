"""StableHLO types as plain Python values, and the one element-type table.

Every spec element type maps to exactly one numpy / ml_dtypes dtype and back.
Types are decoded from their MLIR spelling once and cached: a module with
tens of thousands of ops repeats the same few dozen types.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Optional, Union

import ml_dtypes
import numpy as np

from shlo2jax.errors import UnsupportedTypeError

# MLIR spelling -> dtype. Signless integers (`i32`) are signed, as in the spec.
ELEMENT_DTYPES: dict[str, np.dtype] = {
    "i1": np.dtype(np.bool_),
    "i2": np.dtype(ml_dtypes.int2),
    "si2": np.dtype(ml_dtypes.int2),
    "i4": np.dtype(ml_dtypes.int4),
    "si4": np.dtype(ml_dtypes.int4),
    "i8": np.dtype(np.int8),
    "si8": np.dtype(np.int8),
    "i16": np.dtype(np.int16),
    "si16": np.dtype(np.int16),
    "i32": np.dtype(np.int32),
    "si32": np.dtype(np.int32),
    "i64": np.dtype(np.int64),
    "si64": np.dtype(np.int64),
    "ui2": np.dtype(ml_dtypes.uint2),
    "ui4": np.dtype(ml_dtypes.uint4),
    "ui8": np.dtype(np.uint8),
    "ui16": np.dtype(np.uint16),
    "ui32": np.dtype(np.uint32),
    "ui64": np.dtype(np.uint64),
    "f4E2M1FN": np.dtype(ml_dtypes.float4_e2m1fn),
    "f6E2M3FN": np.dtype(ml_dtypes.float6_e2m3fn),
    "f6E3M2FN": np.dtype(ml_dtypes.float6_e3m2fn),
    "f8E3M4": np.dtype(ml_dtypes.float8_e3m4),
    "f8E4M3": np.dtype(ml_dtypes.float8_e4m3),
    "f8E4M3FN": np.dtype(ml_dtypes.float8_e4m3fn),
    "f8E4M3FNUZ": np.dtype(ml_dtypes.float8_e4m3fnuz),
    "f8E4M3B11FNUZ": np.dtype(ml_dtypes.float8_e4m3b11fnuz),
    "f8E5M2": np.dtype(ml_dtypes.float8_e5m2),
    "f8E5M2FNUZ": np.dtype(ml_dtypes.float8_e5m2fnuz),
    "f8E8M0FNU": np.dtype(ml_dtypes.float8_e8m0fnu),
    "bf16": np.dtype(ml_dtypes.bfloat16),
    "f16": np.dtype(np.float16),
    "f32": np.dtype(np.float32),
    "f64": np.dtype(np.float64),
    "complex<f32>": np.dtype(np.complex64),
    "complex<f64>": np.dtype(np.complex128),
    # MLIR's target-width integer, which StableHLO's dynamic ops take for shapes (the
    # release artifacts' `tensor<2xindex>`): 64 bits, as XLA lowers it
    "index": np.dtype(np.int64),
}

# dtype -> canonical MLIR spelling (signless for signed integers, as MLIR prints them).
DTYPE_NAMES: dict[np.dtype, str] = {}
for _name, _dtype in ELEMENT_DTYPES.items():
    if not _name.startswith("si"):
        DTYPE_NAMES.setdefault(_dtype, _name)

# XLA has no primitive for these; values of these types can be held and
# converted but arithmetic on them needs a custom lowering.
XLA_UNSUPPORTED_DTYPES = frozenset(
    {np.dtype(ml_dtypes.float6_e2m3fn), np.dtype(ml_dtypes.float6_e3m2fn)})


@dataclasses.dataclass(frozen=True)
class Float6Type:
    """How an f6 element type travels: XLA has no f6 primitive, so values are carried as
    their bit patterns in uint8 (`storage_dtype`) inside a `shlo2jax.quant.F6Array`, and
    computed on exactly in f32 (`expressed_dtype`). Set as `TensorType.quant` of f6 tensors
    (like a `!quant.uniform` type, the tensor is not a plain XLA array)."""
    element: str
    dtype: np.dtype          # the ml_dtypes type (what users see)
    exponent_bits: int
    mantissa_bits: int
    bias: int
    storage_dtype: np.dtype = np.dtype(np.uint8)
    expressed_dtype: np.dtype = np.dtype(np.float32)

    @property
    def min_exponent(self) -> int:  # of the smallest normal
        return 1 - self.bias

    @property
    def max_value(self) -> float:
        top = (1 << self.exponent_bits) - 1 - self.bias
        return float(2.0 ** top * (2.0 - 2.0 ** -self.mantissa_bits))

    def __str__(self):
        return self.element


FLOAT6_TYPES: dict = {
    np.dtype(ml_dtypes.float6_e2m3fn): Float6Type("f6E2M3FN", np.dtype(ml_dtypes.float6_e2m3fn),
                                                  2, 3, 1),
    np.dtype(ml_dtypes.float6_e3m2fn): Float6Type("f6E3M2FN", np.dtype(ml_dtypes.float6_e3m2fn),
                                                  3, 2, 3),
}


def dtype_name(dtype) -> str:
    return DTYPE_NAMES[np.dtype(dtype)]


def bit_width(dtype) -> int:
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return 1
    if dtype in (ELEMENT_DTYPES["i2"], ELEMENT_DTYPES["ui2"]):
        return 2
    if dtype in (ELEMENT_DTYPES["i4"], ELEMENT_DTYPES["ui4"], ELEMENT_DTYPES["f4E2M1FN"]):
        return 4
    if dtype in XLA_UNSUPPORTED_DTYPES:
        return 6
    return dtype.itemsize * 8


def is_float(dtype) -> bool:
    dtype = np.dtype(dtype)
    return dtype.kind == "f" or (dtype.kind == "V" and dtype.name.startswith(("float", "bfloat")))


def is_complex(dtype) -> bool:
    return np.dtype(dtype).kind == "c"


# (ml_dtypes' types are of kind "V"; a dtype's `name` costs ~2 us, its `kind` nothing: these
# run for every op the translation plans)
def is_integer(dtype) -> bool:
    dtype = np.dtype(dtype)
    kind = dtype.kind
    return kind in "iu" or (kind == "V" and dtype.name in ("int2", "int4", "uint2", "uint4"))


def is_unsigned(dtype) -> bool:
    dtype = np.dtype(dtype)
    kind = dtype.kind
    return kind == "u" or (kind == "V" and dtype.name in ("uint2", "uint4"))


@dataclasses.dataclass(frozen=True)
class TensorType:
    """`tensor<...>`: shape (None for `?`), element dtype, and the MLIR spelling."""
    shape: tuple
    dtype: np.dtype
    element: str
    # How a value not held as a plain XLA array travels: a QuantizedType for
    # `!quant.uniform` elements, a Float6Type for f6 elements, else None.
    quant: Optional[object] = None
    bounds: Optional[tuple] = None  # `#stablehlo.bounds<...>` per dimension, or None

    @property
    def is_static(self) -> bool:
        return all(d is not None for d in self.shape)

    def __str__(self):
        dims = "".join(("?" if d is None else str(d)) + "x" for d in self.shape)
        return f"tensor<{dims}{self.element}>"


@dataclasses.dataclass(frozen=True)
class TokenType:
    def __str__(self):
        return "!stablehlo.token"


@dataclasses.dataclass(frozen=True)
class TupleType:
    elements: tuple

    def __str__(self):
        return "tuple<" + ", ".join(map(str, self.elements)) + ">"


Type = Union[TensorType, TokenType, TupleType]


# ---------------------------------------------------------------- quantized element types

# Storage types the spec's IntegerType allows (C1 then limits them per expressed type).
_STORAGE = {f"i{n}": f"i{n}" for n in (2, 4, 8, 16, 32)}
_STORAGE.update({f"u{n}": f"ui{n}" for n in (2, 4, 8, 16, 32)})

_ELEMENT_RE = re.compile(
    r"^!quant\.uniform<\s*([iu]\d+)\s*(?:<\s*(-?\d+)\s*:\s*(-?\d+)\s*>)?\s*:\s*([\w]+)"
    r"\s*(?::\s*(-?\d+)\s*)?,\s*(.*)>$", re.S)
_PARAM_RE = re.compile(r"^\s*([-+0-9.eEinfaINFA]+)\s*(?::\s*(-?\d+))?\s*$")


@dataclasses.dataclass(frozen=True)
class QuantizedType:
    """A `!quant.uniform` element type; hashable, so usable as static pytree data."""
    storage_dtype: np.dtype
    storage_min: int
    storage_max: int
    expressed_dtype: np.dtype
    scales: tuple  # Python floats, already rounded to the expressed type (spec C5)
    zero_points: tuple
    quantization_dimension: Optional[int] = None
    spelling: str = dataclasses.field(default="", compare=False)

    @property
    def per_axis(self) -> bool:
        return self.quantization_dimension is not None

    def __str__(self):
        return self.spelling or _spell(self)

    def params(self, ndim: int):
        """(scales, zero points) as numpy arrays broadcastable against a rank-`ndim` tensor."""
        shape = [1] * ndim
        if self.per_axis:
            shape[self.quantization_dimension] = len(self.scales)
        scales = np.asarray(self.scales, self.expressed_dtype).reshape(shape)
        zps = np.asarray(self.zero_points, np.int64).reshape(shape)
        return scales, zps


def _spell(q: QuantizedType) -> str:
    name = dtype_name(q.storage_dtype).replace("ui", "u")
    rng = "" if (q.storage_min, q.storage_max) == _full_range(q.storage_dtype) else \
        f"<{q.storage_min}:{q.storage_max}>"
    dim = "" if q.quantization_dimension is None else f":{q.quantization_dimension}"
    pairs = [f"{s!r}:{z}" for s, z in zip(q.scales, q.zero_points)]
    params = pairs[0] if not q.per_axis else "{" + ",".join(pairs) + "}"
    return f"!quant.uniform<{name}{rng}:{dtype_name(q.expressed_dtype)}{dim}, {params}>"


def _full_range(dtype) -> tuple:
    bits = bit_width(dtype)
    if is_unsigned(dtype):
        return 0, (1 << bits) - 1
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


def parse_quantized_element(spelling: str) -> QuantizedType:
    """`!quant.uniform<...>` -> QuantizedType, checking the spec's constraints C1-C12."""
    text = spelling.strip()
    m = _ELEMENT_RE.match(text)
    if not m:
        raise UnsupportedTypeError(f"quantized element type {spelling} (only per-tensor and "
                                   "per-axis !quant.uniform types are supported)")
    storage, smin, smax, expressed, qdim, params_text = m.groups()
    if storage not in _STORAGE:
        raise UnsupportedTypeError(f"{spelling}: storage type {storage} (the spec allows "
                                   "i2/i4/i8/i16/i32 and u2/u4/u8/u16/u32)")
    storage_dtype = ELEMENT_DTYPES[_STORAGE[storage]]
    expressed_dtype = ELEMENT_DTYPES.get(expressed)
    if expressed_dtype is None or not is_float(expressed_dtype):
        raise UnsupportedTypeError(f"{spelling}: expressed type {expressed} is not a float type")
    if expressed_dtype in XLA_UNSUPPORTED_DTYPES:
        raise UnsupportedTypeError(f"{spelling}: expressed type {expressed} has no XLA support")

    def bad(constraint, why):
        return UnsupportedTypeError(f"{spelling}: violates {constraint}: {why}")

    # C1 says num_bits(storage) < num_bits(expressed); MLIR's verifier, the reference
    # interpreter and real exporters accept equal widths (i32:f32 biases/accumulators).
    if bit_width(storage_dtype) > bit_width(expressed_dtype):
        raise bad("C1", f"num_bits({storage}) must not exceed num_bits({expressed})")
    lo, hi = _full_range(storage_dtype)
    storage_min = lo if smin is None else int(smin)
    storage_max = hi if smax is None else int(smax)
    if not lo <= storage_min < storage_max <= hi:  # C2-C4
        raise bad("C2-C4", f"need {lo} <= storage_min {storage_min} < "
                           f"storage_max {storage_max} <= {hi}")
    body = params_text.strip()
    braced = body.startswith("{")
    if braced:
        if not body.endswith("}"):
            raise UnsupportedTypeError(f"quantized element type {spelling}")
        body = body[1:-1]
        if body.lstrip().startswith("{"):
            raise UnsupportedTypeError(f"{spelling}: sub-channel (blockwise) quantization")
    scales, zero_points = [], []
    for part in body.split(","):
        pm = _PARAM_RE.match(part)
        if not pm:
            raise UnsupportedTypeError(f"{spelling}: cannot read quantization parameter {part!r}")
        scales.append(pm.group(1))
        zero_points.append(int(pm.group(2) or 0))
    with np.errstate(over="ignore", under="ignore"):
        converted = [float(np.asarray(float(s)).astype(expressed_dtype)) for s in scales]  # C5
    for s, c in zip(scales, converted):
        if not np.isfinite(c):
            raise bad("C7", f"scale {s} is not finite in {expressed}")
        if not c > 0:
            raise bad("C6", f"scale {s} is not > 0 in {expressed}")
    for z in zero_points:  # C8 (C9 follows from C4)
        if not storage_min <= z <= storage_max:
            raise bad("C8", f"zero point {z} outside [{storage_min}, {storage_max}]")
    dim = None if qdim is None else int(qdim)
    if dim is None and (len(scales) != 1 or braced):
        raise bad("C11", "per-tensor quantization takes exactly one scale")
    if dim is not None and dim < 0:
        raise bad("C12", f"quantization dimension {dim} < 0")
    return QuantizedType(storage_dtype, storage_min, storage_max, expressed_dtype,
                         tuple(converted), tuple(zero_points), dim, text)


def check_tensor_type(shape, qtype: QuantizedType, where: str = "") -> None:
    """The tensor-level constraints (spec C12/C13 of quantized tensor types)."""
    if not qtype.per_axis:
        return
    d = qtype.quantization_dimension
    if d >= len(shape):
        raise UnsupportedTypeError(
            f"{where}{qtype}: quantization dimension {d} >= rank {len(shape)}")
    if shape[d] is not None and shape[d] != len(qtype.scales):
        raise UnsupportedTypeError(f"{where}{qtype}: dimension {d} has size {shape[d]} but "
                                   f"{len(qtype.scales)} scales")


_TENSOR_RE = re.compile(r"^tensor<((?:[0-9?]+x)*)(.+?)(?:,\s*(#.*))?>$")
_TYPE_CACHE: dict[str, Type] = {}


def split_top_level(text: str) -> list[str]:
    """`text` split at the commas outside any bracket."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "<([{":
            depth += 1
        elif ch in ">)]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    if text[start:].strip():
        parts.append(text[start:].strip())
    return parts


def _parse_bounds(encoding: Optional[str]):
    if not encoding:
        return None
    m = re.match(r"#stablehlo\.bounds<(.*)>$", encoding.strip())
    if not m:
        raise UnsupportedTypeError(f"tensor encoding {encoding}")
    return tuple(None if b.strip() == "?" else int(b) for b in m.group(1).split(","))


def parse_type(spelling: str) -> Type:
    """Decodes a type from its MLIR spelling (as `str(ir.Type)` prints it)."""
    cached = _TYPE_CACHE.get(spelling)
    if cached is not None:
        return cached
    text = spelling.strip()
    if text in ("!stablehlo.token", "!mhlo.token"):
        result = TokenType()
    elif text.startswith("tuple<"):
        result = TupleType(tuple(parse_type(t) for t in split_top_level(text[6:-1])))
    else:
        m = _TENSOR_RE.match(text)
        if not m:
            if text in ELEMENT_DTYPES:  # a bare element type is not a value type
                raise UnsupportedTypeError(f"{text} (scalars must be rank-0 tensors)")
            raise UnsupportedTypeError(text)
        dims = tuple(None if d == "?" else int(d) for d in m.group(1).split("x")[:-1])
        element = m.group(2)
        bounds = _parse_bounds(m.group(3))
        if element.startswith("!quant."):
            qtype = parse_quantized_element(element)
            check_tensor_type(dims, qtype, f"{text}: ")
            result = TensorType(dims, qtype.storage_dtype, element, qtype, bounds)
        else:
            dtype = ELEMENT_DTYPES.get(element)
            if dtype is None:
                raise UnsupportedTypeError(f"element type {element} in {text}")
            result = TensorType(dims, dtype, element, FLOAT6_TYPES.get(dtype), bounds)
    _TYPE_CACHE[spelling] = result
    return result


def tensor_type(shape, dtype) -> TensorType:
    dtype = np.dtype(dtype)
    return TensorType(tuple(shape), dtype, dtype_name(dtype), FLOAT6_TYPES.get(dtype))
