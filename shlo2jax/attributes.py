"""MLIR attributes -> plain Python values, decoded once at load time.

Handlers never see an `ir.Attribute`: integers, floats, strings, tuples,
numpy arrays, and small records for the StableHLO structured attributes.
"""

from __future__ import annotations

import binascii
import io
import math
import mmap
import os
import re
from typing import Any, NamedTuple

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from shlo2jax import compat
from shlo2jax import value_types as T
from shlo2jax.errors import ElidedDataError, LoadError


class Opaque(NamedTuple):
    """An attribute with no decoder; kept as its MLIR text."""
    text: str


# Splat constants of more elements than this are decoded as a `Splat`, not an array; those of
# more than SPLAT_VIEW_ELEMENTS (and no more than SPLAT_RECORD_ELEMENTS) as an array that is a
# view of their one element.
SPLAT_RECORD_ELEMENTS = 1 << 16
SPLAT_VIEW_ELEMENTS = 256


class Splat:
    """A splat dense constant (one value repeated over its shape) as decoded: its value, shape
    and dtype, and `size`/`nbytes` as numpy would report them. The full array is built only when
    asked (`materialise()`, `np.asarray`): a 4 TiB-declared splat is a few bytes here, and the
    constant rule broadcasts its value."""
    __slots__ = ("value", "shape")

    def __init__(self, value, shape):
        self.value = np.asarray(value).reshape(())  # 0-d, of the element dtype
        self.shape = tuple(int(d) for d in shape)

    @property
    def dtype(self) -> np.dtype:
        return self.value.dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def itemsize(self) -> int:
        return self.value.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.size * self.itemsize

    def materialise(self) -> np.ndarray:
        return np.full(self.shape, self.value, dtype=self.dtype)

    def __array__(self, dtype=None, copy=None):
        array = self.materialise()
        return array if dtype is None else array.astype(dtype)

    def _key(self):
        return (self.dtype.str, self.dtype.name, self.shape, self.value.tobytes())

    def __eq__(self, other):
        return isinstance(other, Splat) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def __repr__(self):
        return f"Splat({self.value!r}, shape={self.shape})"


def _splat_or_full(value, ttype: T.TensorType, splats: bool, dtype=None):
    """Where `splats` (a module's constant): a `Splat` of `value` over `ttype`'s shape where the
    splat is large, else the splat's array, as a read-only view of its one element where it
    has more than SPLAT_VIEW_ELEMENTS elements (`splat_view`); else the full array. Elements
    of `dtype` (default: the type's)."""
    dtype = ttype.dtype if dtype is None else dtype
    if splats and ttype.quant is None:
        size = math.prod(ttype.shape)
        if size > SPLAT_RECORD_ELEMENTS:
            return Splat(np.asarray(value, dtype=dtype), ttype.shape)
        if size > SPLAT_VIEW_ELEMENTS:
            return splat_view(value, ttype.shape, dtype)
    return np.full(ttype.shape, value, dtype=dtype)


def splat_view(value, shape, dtype) -> np.ndarray:
    """The array of `value` at every index of `shape`, as numpy broadcasts it: one element, no
    fill (jax 0.12 writes an exact GELU's erfc as a composite whose decomposition holds 28
    splats of the activations' shape: filling the sampler's 7,193 of them took a third of
    its load). Read-only, as every constant of a program is; lax lowers it as the broadcast
    of its one element."""
    return np.broadcast_to(np.asarray(value, dtype=dtype), tuple(shape))


def is_splat_view(value) -> bool:
    """Whether the array `value` is one element seen at every index (`splat_view`)."""
    return value.size > 1 and not any(value.strides)


class ConstantSizeError(LoadError):
    """A constant whose data is not the size its type declares, or that cannot be allocated."""


def _check_data_size(present: int, ttype: T.TensorType) -> None:
    """Refuses data of `present` bytes for `ttype` before anything the declared size is
    allocated."""
    size = math.prod(ttype.shape)
    needed = size * ttype.dtype.itemsize
    if present not in (needed, ttype.dtype.itemsize):
        raise ConstantSizeError(f"its data is {present} bytes, {ttype} declares {size} elements "
                                f"({_human_bytes(needed)})")


def _human_bytes(n: int) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n} {unit}" if unit == "bytes" else f"{n:.3g} {unit}"
        n /= 1024


class GatherDims(NamedTuple):
    offset_dims: tuple
    collapsed_slice_dims: tuple
    operand_batching_dims: tuple
    start_indices_batching_dims: tuple
    start_index_map: tuple
    index_vector_dim: int


class ScatterDims(NamedTuple):
    update_window_dims: tuple
    inserted_window_dims: tuple
    input_batching_dims: tuple
    scatter_indices_batching_dims: tuple
    scatter_dims_to_operand_dims: tuple
    index_vector_dim: int


class DotDims(NamedTuple):
    lhs_batching_dimensions: tuple
    rhs_batching_dimensions: tuple
    lhs_contracting_dimensions: tuple
    rhs_contracting_dimensions: tuple


class ConvDims(NamedTuple):
    input_batch_dimension: int
    input_feature_dimension: int
    input_spatial_dimensions: tuple
    kernel_input_feature_dimension: int
    kernel_output_feature_dimension: int
    kernel_spatial_dimensions: tuple
    output_batch_dimension: int
    output_feature_dimension: int
    output_spatial_dimensions: tuple


class DotAlgorithm(NamedTuple):
    lhs_precision_type: Any
    rhs_precision_type: Any
    accumulation_type: Any
    lhs_component_count: int
    rhs_component_count: int
    num_primitive_operations: int
    allow_imprecise_accumulation: bool


class ResultAccuracy(NamedTuple):
    atol: float
    rtol: float
    ulps: int
    mode: str


class ChannelHandle(NamedTuple):
    handle: int
    type: int


class OutputOperandAlias(NamedTuple):
    output_tuple_indices: tuple
    operand_index: int
    operand_tuple_indices: tuple


# ---------------------------------------------------------------- dense data

_NUMPY_BUFFER_DTYPES = frozenset(np.dtype(d) for d in (
    np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
    np.uint32, np.uint64, np.float16, np.float32, np.float64))

_LITERAL_RE = re.compile(
    r"\(\s*([^,()]+?)\s*,\s*([^,()]+?)\s*\)|true|false|0x[0-9A-Fa-f]+|[-+]?(?:inf|nan)|"
    r"[-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?")


def _bits_dtype(dtype: np.dtype) -> np.dtype:
    return np.dtype({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[dtype.itemsize])


def _int_from_storage(raw: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Byte-per-element storage of a sub-byte integer -> values of `dtype`."""
    bits = T.bit_width(dtype)
    values = raw.astype(np.int64) & ((1 << bits) - 1)
    if not T.is_unsigned(dtype):
        values = np.where(values >= 1 << (bits - 1), values - (1 << bits), values)
    return values.astype(dtype)


def aligned_copy(array: np.ndarray) -> np.ndarray:
    """A C-contiguous copy of `array` in 64-byte aligned memory. `jax.device_put` on CPU wraps
    such an array without copying it, so a constant lifted into a parameter (shlo2jax.params)
    is held once. The copy owns its memory (the array it copies may be a view of memory an
    MLIR context owns, which the decoded program must not keep alive)."""
    array = np.asarray(array)
    if array.nbytes < 64:
        return np.array(array, copy=True, order="C")
    out = _aligned_empty(array.nbytes).view(array.dtype).reshape(array.shape)
    np.copyto(out, array, casting="no")
    return out


# Large copies go to memory mapped with its pages populated by the kernel at once: faulting
# fresh pages in one at a time was most of a large constant's copy (issue 32: 0.15 s of a
# 64 MB copy's 0.16 s on a VM; 0.03 s populated). Smaller ones are not worth a mapping.
_MAPPED_MIN_BYTES = 1 << 20
_MAP_POPULATE = getattr(mmap, "MAP_POPULATE", None)  # Linux only


def _aligned_empty(nbytes: int) -> np.ndarray:
    """`nbytes` of writable uint8 memory at a 64-byte aligned address, owned by the array (a
    mapping is unmapped when the last array on it goes)."""
    if nbytes >= _MAPPED_MIN_BYTES and _MAP_POPULATE is not None:
        try:
            mapped = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS
                               | _MAP_POPULATE)
        except (OSError, ValueError):  # no mapping to be had: the heap, as below
            pass
        else:
            return np.frombuffer(mapped, np.uint8)  # page-aligned
    storage = np.empty(nbytes + 64, np.uint8)
    start = (-storage.ctypes.data) % 64
    return storage[start:start + nbytes]


def _from_hex(hex_text, ttype: T.TensorType, splats: bool = False) -> np.ndarray:
    _check_data_size(len(hex_text) // 2, ttype)
    raw = binascii.unhexlify(hex_text)  # str, bytes or a memoryview of ASCII hex digits
    dtype = ttype.dtype
    if dtype in _NUMPY_BUFFER_DTYPES or T.is_complex(dtype) or dtype.itemsize * 8 == T.bit_width(dtype):
        flat = aligned_copy(np.frombuffer(
            raw, dtype=_bits_dtype(dtype) if not T.is_complex(dtype) else dtype))
        del raw
        if not T.is_complex(dtype):
            flat = flat.view(dtype)
    else:  # i1 and sub-byte types: one byte per element
        storage = np.frombuffer(raw, dtype=np.uint8)
        if dtype == np.bool_:
            flat = storage != 0
        elif T.is_integer(dtype):
            flat = _int_from_storage(storage, dtype)
        else:
            flat = (storage & ((1 << T.bit_width(dtype)) - 1)).view(dtype)
    return _shape(flat, ttype, splats)


def _shape(flat: np.ndarray, ttype: T.TensorType, splats: bool = False) -> np.ndarray:
    shape = ttype.shape
    size = math.prod(shape)
    if flat.size == 1 and size != 1:
        return _splat_or_full(flat.reshape(()), ttype, splats, flat.dtype)
    if flat.size != size:
        raise ValueError(f"dense data has {flat.size} elements, {ttype} needs {size}")
    return flat.reshape(shape)


def _scalar(token: str, dtype: np.dtype):
    """One printed element -> a 0-d array of `dtype`, bit-exact for hex floats."""
    if token in ("true", "false"):
        return np.array(token == "true", dtype=dtype)
    if T.is_float(dtype) or T.is_complex(dtype):
        component = np.dtype(np.float32 if dtype == np.complex64 else np.float64) \
            if T.is_complex(dtype) else dtype
        if token.startswith("0x"):
            bits = int(token, 16)
            if component in _NUMPY_BUFFER_DTYPES or component.itemsize * 8 == T.bit_width(component):
                return np.array(bits, dtype=_bits_dtype(component)).view(component)
            return np.array(bits, dtype=np.uint8).view(component)
        return np.array(float(token)).astype(component)
    value = int(token, 0)
    if T.is_integer(dtype) and not T.is_unsigned(dtype) and token.startswith("0x"):
        bits = T.bit_width(dtype)
        if value >= 1 << (bits - 1):
            value -= 1 << bits
    return np.array(value).astype(dtype)


def _from_literal(body: str, ttype: T.TensorType, splats: bool = False) -> np.ndarray:
    dtype = ttype.dtype
    values = []
    for m in _LITERAL_RE.finditer(body):
        if m.group(1) is not None:
            re_part, im_part = _scalar(m.group(1), dtype), _scalar(m.group(2), dtype)
            value = np.zeros((), dtype)  # not re + 1j*im: that turns an infinite part into NaN
            value.real, value.imag = re_part, im_part
            values.append(value)
        else:
            values.append(_scalar(m.group(0), dtype))
    flat = np.array(values, dtype=dtype) if values else np.zeros((0,), dtype)
    return _shape(flat, ttype, splats)


def dense_from_text(text: str, ttype: T.TensorType, splats: bool = False) -> np.ndarray:
    """`dense<...>` as MLIR prints it -> numpy array of the tensor's dtype (`splats`: a `Splat`
    for a splat of more than SPLAT_RECORD_ELEMENTS elements)."""
    start = text.index("dense<") + len("dense<")
    depth, end = 1, start
    while depth:
        ch = text[end]
        depth += ch == "<"
        depth -= ch == ">"
        end += 1
    body = text[start:end - 1].strip()
    if body.startswith('"0x'):
        return _from_hex(body[3:-1], ttype, splats)
    return _from_literal(body, ttype, splats)


def dense_elements(attr, ttype: T.TensorType) -> "np.ndarray | Splat":
    """A DenseElementsAttr -> numpy array, or a `Splat` for a splat of more than
    SPLAT_RECORD_ELEMENTS elements (never materialised here). Fast buffer path for plain
    dtypes."""
    if ttype.dtype in _NUMPY_BUFFER_DTYPES:
        if attr.is_splat:
            splat = attr.get_splat_value()
            value = compat.integer_value(splat) if isinstance(splat, ir.IntegerAttr) else \
                splat.value
            return _splat_or_full(np.array(value, dtype=ttype.dtype)
                                  if ttype.dtype != np.bool_ else bool(value), ttype, True)
        return aligned_copy(np.asarray(attr)).reshape(ttype.shape)
    return dense_from_text(str(attr), ttype, splats=True)


_RESOURCE_NAME_RE = re.compile(r'^dense_resource<(?:"((?:[^"\\]|\\.)*)"|([^>]*))>')


def dense_resource(text: str, ttype: T.TensorType, placeholder_rng=None,
                   blobs: "ResourceBlobs | None" = None) -> np.ndarray:
    """`dense_resource<name>`: the blob `name` of the module's `dialect_resources` (read through
    `blobs`), or placeholder data for `__elided__` when `placeholder_rng` is given."""
    match = _RESOURCE_NAME_RE.match(text)
    name = (match.group(1) if match.group(1) is not None else match.group(2)) if match else ""
    if blobs is not None:
        blobs.used.append(name)
    if name == "__elided__":
        if placeholder_rng is None:
            raise ElidedDataError(
                f"constant of type {ttype} is `dense_resource<__elided__>`: the file carries no "
                "data for it. Load with placeholder_data=True (CLI: --placeholder-data) to fill "
                "elided constants with seeded random data of the declared type.")
        return _placeholder(ttype, placeholder_rng)
    hex_text = blobs.hex(name) if blobs is not None else None
    if hex_text is None:
        raise T.UnsupportedTypeError(f"dense_resource blob {name!r} is not in the module's "
                                     f"dialect_resources: {text[:80]}")
    # A blob is its alignment (a little-endian uint32), then the elements' bytes.
    return _from_hex(hex_text[8:], ttype)


class ResourceBlobs:
    """The `builtin` `dialect_resources` blobs of a module (the data of its `dense_resource`
    constants, as torch-mlir and other importers write them), read on first use: the MLIR
    bindings give no access to a blob's bytes, so the module is printed once with its dense
    elements elided and its resources in full. `used`: the blob names decoded, in order."""

    def __init__(self, mlir_module):
        self._module = mlir_module
        self._text = None
        self._spans: dict = {}
        self.used: list = []

    def hex(self, name: str):
        """The blob's hex digits (a memoryview of the printed module), or None."""
        if self._text is None:
            self._text, self._spans = _resource_section(self._module)
        span = self._spans.get(name)
        return None if span is None else memoryview(self._text)[span[0]:span[1]]


_RESOURCE_ENTRY_RE = re.compile(
    rb'\s*(?:"((?:[^"\\]|\\.)*)"|([\w.$\-]+))\s*:\s*"0x([0-9A-Fa-f]*)"\s*,?')
_BUILTIN_RESOURCES_RE = re.compile(rb"\bbuiltin\s*:\s*\{")


def _resource_section(mlir_module) -> tuple:
    """(the printed module, {blob name: (start, end) of its hex digits})."""
    out = io.BytesIO()
    mlir_module.operation.print(large_elements_limit=1, large_resource_limit=(1 << 31) - 1,
                                binary=True, file=out)
    text = out.getvalue()
    del out
    start = text.find(b"{-#")
    builtin = _BUILTIN_RESOURCES_RE.search(text, start) if start >= 0 else None
    if builtin is None:
        return b"", {}
    spans, at = {}, builtin.end()
    while True:
        entry = _RESOURCE_ENTRY_RE.match(text, at)
        if entry is None:
            break
        key = entry.group(1) if entry.group(1) is not None else entry.group(2)
        spans[key.decode()] = entry.span(3)
        at = entry.end()
    return text, spans


def _placeholder(ttype: T.TensorType, rng) -> np.ndarray:
    """placeholder_array, refused (a ConstantSizeError) where its declared size cannot be
    allocated: more bytes than the machine has, or a MemoryError."""
    size = math.prod(ttype.shape)
    needed = size * ttype.dtype.itemsize
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        memory = None
    refusal = f"placeholder data for {ttype} ({size} elements, {_human_bytes(needed)}) "
    if memory is not None and needed > memory:
        raise ConstantSizeError(refusal + f"is more than this machine's memory "
                                f"({_human_bytes(memory)})")
    try:
        return placeholder_array(ttype, rng)
    except MemoryError as e:
        raise ConstantSizeError(refusal + f"cannot be allocated: {e}") from None


def placeholder_array(ttype: T.TensorType, rng: np.random.Generator) -> np.ndarray:
    """Seeded data of the declared type that keeps a deep model finite.

    Elided constants are weights. Rank <= 1 ones are mostly per-channel scales, biases,
    means and variances: uniform in [0.5, 1.5) (a negative variance would make a batch
    norm NaN). Higher-rank ones are kernels: zero-mean with variance 1/fan_in, fan_in
    being the product of all but the last dimension (HWIO / (in, out) layouts), so
    activations keep their scale through many layers. Integers are in [0, 3]: valid indices.
    """
    dtype, shape = ttype.dtype, ttype.shape
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if T.is_integer(dtype):
        return rng.integers(0, 4 if not T.is_unsigned(dtype) else 3, shape).astype(dtype)
    if len(shape) <= 1:
        real = lambda: rng.uniform(0.5, 1.5, shape)
    else:
        fan_in = max(1, int(np.prod(shape[:-1])))
        bound = np.sqrt(3.0 / fan_in)
        real = lambda: rng.uniform(-bound, bound, shape)
    if T.is_complex(dtype):
        return (real() + 1j * real()).astype(dtype)
    return real().astype(dtype)


# ---------------------------------------------------------------- attributes

def _ints(values) -> tuple:
    return tuple(int(v) for v in values)


def _element_type_name(t) -> Any:
    if t is None:
        return None
    return str(t)


_STRUCTURED = (
    (stablehlo.GatherDimensionNumbers, lambda a: GatherDims(
        _ints(a.offset_dims), _ints(a.collapsed_slice_dims), _ints(a.operand_batching_dims),
        _ints(a.start_indices_batching_dims), _ints(a.start_index_map), int(a.index_vector_dim))),
    (stablehlo.ScatterDimensionNumbers, lambda a: ScatterDims(
        _ints(a.update_window_dims), _ints(a.inserted_window_dims), _ints(a.input_batching_dims),
        _ints(a.scatter_indices_batching_dims), _ints(a.scattered_dims_to_operand_dims),
        int(a.index_vector_dim))),
    (stablehlo.DotDimensionNumbers, lambda a: DotDims(
        _ints(a.lhs_batching_dimensions), _ints(a.rhs_batching_dimensions),
        _ints(a.lhs_contracting_dimensions), _ints(a.rhs_contracting_dimensions))),
    (stablehlo.ConvDimensionNumbers, lambda a: ConvDims(
        int(a.input_batch_dimension), int(a.input_feature_dimension),
        _ints(a.input_spatial_dimensions), int(a.kernel_input_feature_dimension),
        int(a.kernel_output_feature_dimension), _ints(a.kernel_spatial_dimensions),
        int(a.output_batch_dimension), int(a.output_feature_dimension),
        _ints(a.output_spatial_dimensions))),
    (stablehlo.DotAlgorithm, lambda a: DotAlgorithm(
        _element_type_name(a.lhs_precision_type), _element_type_name(a.rhs_precision_type),
        _element_type_name(a.accumulation_type), int(a.lhs_component_count),
        int(a.rhs_component_count), int(a.num_primitive_operations),
        bool(a.allow_imprecise_accumulation))),
    (stablehlo.ChannelHandle, lambda a: ChannelHandle(int(a.handle), int(a.channel_type))),
    (stablehlo.OutputOperandAlias, lambda a: OutputOperandAlias(
        _ints(a.output_tuple_indices), int(a.operand_index), _ints(a.operand_tuple_indices))),
    (stablehlo.ComparisonDirectionAttr, lambda a: a.value),
    (stablehlo.ComparisonTypeAttr, lambda a: a.value),
    (stablehlo.PrecisionAttr, lambda a: a.value),
    (stablehlo.FftTypeAttr, lambda a: a.value),
    (stablehlo.RngAlgorithmAttr, lambda a: a.value),
    (stablehlo.RngDistributionAttr, lambda a: a.value),
    (stablehlo.TransposeAttr, lambda a: a.value),
    (stablehlo.ResultAccuracyAttr, lambda a: ResultAccuracy(
        float(a.atol), float(a.rtol), int(a.ulps), str(a.mode))),
)


_DIALECT_ENUM_RE = re.compile(r"^#(?:mhlo|stablehlo)<\w+ (\w+)>$")


def decode(attr, placeholder_rng=None, blobs: "ResourceBlobs | None" = None) -> Any:
    """Any attribute -> a plain Python value (recursively for arrays/dicts)."""
    if isinstance(attr, ir.BoolAttr):
        return bool(attr.value)
    if isinstance(attr, ir.IntegerAttr):
        return int(attr.value)
    if isinstance(attr, ir.FloatAttr):
        return float(attr.value)
    if isinstance(attr, ir.StringAttr):
        try:
            return attr.value
        except (UnicodeDecodeError, RuntimeError):  # a binary string, e.g. a kernel config
            return attr.value_bytes
    if isinstance(attr, (ir.DenseI64ArrayAttr, ir.DenseI32ArrayAttr)):
        return tuple(int(v) for v in attr)
    if isinstance(attr, ir.DenseBoolArrayAttr):
        return tuple(bool(v) for v in attr)
    if isinstance(attr, ir.DenseElementsAttr):
        if isinstance(ir.ShapedType(attr.type).element_type, ir.IndexType):
            return np.array(attr).astype(np.int64)  # e.g. custom_call operand_layouts
        return dense_elements(attr, T.parse_type(str(attr.type)))
    if isinstance(attr, ir.FlatSymbolRefAttr):
        return attr.value
    if isinstance(attr, ir.ArrayAttr):
        return tuple(decode(a, placeholder_rng, blobs) for a in attr)
    if isinstance(attr, ir.DictAttr):
        return _dictionary(attr, placeholder_rng, blobs)
    if isinstance(attr, ir.UnitAttr):
        return True
    if isinstance(attr, ir.TypeAttr):
        return str(attr.value)
    for cls, convert in _STRUCTURED:
        if cls.isinstance(attr):
            return convert(cls(attr))
    text = str(attr)
    enum = _DIALECT_ENUM_RE.match(text)
    if enum:  # e.g. `#mhlo<comparison_direction GT>`: the legacy dialect's enums, by name
        return enum.group(1)
    if text.startswith("dense_resource<"):  # the bindings never downcast these
        type_text = text[text.rindex(":") + 1:].strip()
        return dense_resource(text, T.parse_type(type_text), placeholder_rng, blobs)
    return Opaque(text)


def _dictionary(attr, placeholder_rng, blobs) -> dict:
    try:
        return {named.name: decode(named.attr, placeholder_rng, blobs) for named in attr}
    except RuntimeError as e:
        # An entry whose name is a null string (a damaged HLO proto's frontend attributes):
        # the bindings cannot make it a Python str.
        raise ValueError(f"a dictionary attribute's entry cannot be read ({e})") from None


def decode_op_attributes(operation, placeholder_rng=None,
                         blobs: "ResourceBlobs | None" = None,
                         cache: "dict | None" = None, items: "list | None" = None) -> dict:
    """All attributes of an operation; a complex-valued dense attribute that the
    bindings cannot downcast is recovered from the op's printed form.

    Attributes are fetched by name: indexed access aborts the process (not a
    Python exception) on an attribute the bindings cannot downcast.

    `cache` ({ir.Attribute: value}, one per module: MLIR uniques attributes in their
    context, so an equal attribute is the same one): the values that cannot change (numbers,
    strings, tuples and records of them) are decoded once per distinct attribute, not once per
    op (a 50k-op model holds ~28k attributes, ~200 of them distinct).

    `items`: `compat.attribute_items(operation)`, where the caller read them already.
    """
    result = {}
    for name, attr in compat.attribute_items(operation) if items is None else items:
        if attr is None:  # complex-valued dense data the bindings cannot read
            result[name] = decode_printed_attribute(operation, name)
            continue
        if cache is not None:
            value = cache.get(attr, _NOT_CACHED)
            if value is not _NOT_CACHED:
                result[name] = value
                continue
        value = decode(attr, placeholder_rng, blobs)
        if placeholder_rng is not None and isinstance(value, np.ndarray) and \
                str(attr).startswith("dense_resource<__elided__>"):
            # Write the placeholder into the module too, so the loaded program's MLIR
            # (run by XLA directly or by the interpreter) computes on the same data.
            operation.attributes[name] = dense_attribute(value, attr.type)
        elif cache is not None and _immutable(value):
            cache[attr] = value
        result[name] = value
    return result


_NOT_CACHED = object()
_SCALARS = frozenset({bool, int, float, str, bytes, type(None)})


def _immutable(value) -> bool:
    """Whether a decoded value can be shared by every op holding its attribute: arrays and
    dictionaries (which a rule could change) are decoded for each op."""
    if type(value) in _SCALARS:
        return True
    return isinstance(value, tuple) and all(_immutable(v) for v in value)


def writes_back(dtype: np.dtype) -> bool:
    """Whether `dense_attribute` writes arrays of `dtype` (their bits, exactly)."""
    if dtype in _NUMPY_BUFFER_DTYPES:
        return dtype != np.bool_
    return dtype.itemsize * 8 == T.bit_width(dtype) and not T.is_complex(dtype)


def dense_attribute(array: np.ndarray, mlir_type) -> "ir.DenseElementsAttr":
    """numpy array -> DenseElementsAttr of `mlir_type` (raw bits for types numpy lacks)."""
    if array.dtype in _NUMPY_BUFFER_DTYPES and array.dtype != np.bool_:
        return ir.DenseElementsAttr.get(np.ascontiguousarray(array), type=mlir_type.element_type,
                                        shape=list(array.shape))
    if writes_back(array.dtype):
        bits = np.ascontiguousarray(array).view(_bits_dtype(array.dtype))
        return ir.DenseElementsAttr.get(bits, type=mlir_type.element_type, shape=list(array.shape))
    raise T.UnsupportedTypeError(f"writing a {array.dtype} placeholder into the module")


def _angle_bracket_end(text: str) -> int:
    """Index just past the `>` that closes the first `<` of `text`."""
    end = compat.angle_bracket_end(text)
    if not end:
        raise ValueError(f"unbalanced <...> in {text[:80]!r}")
    return end


def decode_printed_attribute(operation, name: str):
    """`operation`'s attribute `name` read from the op's printed (generic) form: for the
    attributes the bindings cannot read (complex-valued dense elements, ...). A dense literal
    is decoded into an array; anything else is an `Opaque` of its text."""
    text = operation.get_asm(print_generic_op_form=True)
    at = text.index(f"{name} = ") + len(name) + 3
    if not text.startswith("dense<", at):
        return Opaque(text[at:at + 200])
    # The type follows the literal: `dense<...> : tensor<...>`.
    tail = text[at:]
    literal_end = _angle_bracket_end(tail)
    type_text = tail[literal_end:].lstrip()
    assert type_text.startswith(":")
    type_text = type_text[1:].lstrip()
    return dense_from_text(tail[:literal_end],
                           T.parse_type(type_text[:_angle_bracket_end(type_text)]), splats=True)
