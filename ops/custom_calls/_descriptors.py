"""Reading the calls of jaxlib's kernels before the typed FFI: what the legacy custom-call
families (ops/custom_calls/legacy*.py) share.

Before jaxlib moved its kernels to XLA's typed FFI (mid 2024 to mid 2025), a kernel read its
sizes and flags from an opaque descriptor -- the raw bytes of a C struct in `backend_config`
-- or from leading scalar operands, and wrote its workspaces as extra results. A `Struct` is
one such C struct; `unpack` decodes a descriptor with it, and a descriptor of another size or
with an unknown enum code is refused at load time, naming the target.

A legacy kernel's `prepare` is `kernel_prepare(decode, operands=...)`: the count of operands
the kernel reads is checked at load, and a descriptor that cannot be decoded is reported
there, not raised while tracing. Its handler receives the call's operands as they are: the
result shapes jax appended for dynamic shapes (`indices_of_shape_operands`, always last)
follow the kernel's own operands, so handlers end with `*result_shapes`.
"""

from __future__ import annotations

import dataclasses
import struct
from typing import Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np

from shlo2jax.errors import Unsupported
from shlo2jax.value_types import TupleType


def target_of(op) -> str:
    return op.attrs.get("call_target_name", "?")


# ---------------------------------------------------------------- the operand count

def shape_operand_indices(op) -> frozenset:
    indices = op.attrs.get("indices_of_shape_operands")
    if indices is None:
        return frozenset()
    return frozenset(int(i) for i in np.asarray(indices).reshape(-1))


def kernel_prepare(decode: Callable, operands) -> Callable:
    """The `prepare` of a kernel that reads `operands` operands (a count, or (least, most)
    with most None for any number) and whose call `decode(op)` turns into its params.

    The count excludes jax's trailing result-shape operands. A wrong count, shape operands
    anywhere but last, or a call `decode` cannot read (a struct too short, a missing
    attribute, ...) raise `Unsupported` naming the target.
    """
    least, most = (operands, operands) if isinstance(operands, int) else operands

    def prepare(op):
        try:
            shapes = shape_operand_indices(op)
            count = len(op.operands) - len(shapes)
            if shapes != frozenset(range(count, len(op.operands))):
                raise Unsupported(f"custom_call @{target_of(op)}: the shape operands "
                                  f"{sorted(shapes)} are not the last ones")
            if count < least or (most is not None and count > most):
                expected = least if least == most else f"{least} or more" if most is None \
                    else f"{least} to {most}"
                raise Unsupported(f"custom_call @{target_of(op)} with {count} operands; the "
                                  f"kernel takes {expected}")
            return decode(op)
        except Unsupported:
            raise
        except (AttributeError, TypeError, ValueError, IndexError, KeyError, struct.error) as e:
            raise Unsupported(f"custom_call @{target_of(op)}: cannot decode it ({e})") from None

    prepare.operands = (least, most)  # read by the test matching it to the handler
    return prepare


# ---------------------------------------------------------------- descriptors

def descriptor_bytes(op, key: str = "backend_config") -> bytes:
    """The raw bytes of a string attribute holding a packed C struct (`key` other than
    backend_config: an FFI attribute, e.g. `opaque`, of `mhlo.backend_config`).

    Attribute decoding gives a str when the bytes happen to be valid UTF-8 and
    bytes otherwise; encoding the str as UTF-8 gives back the original bytes.
    """
    raw = op.attrs.get(key, b"")
    if key != "backend_config" and raw == b"":
        cfg = op.attrs.get("mhlo.backend_config")
        raw = cfg.get(key, b"") if isinstance(cfg, dict) else b""
    if isinstance(raw, str):
        return raw.encode("utf-8")
    if isinstance(raw, (bytes, bytearray)):
        return bytes(raw)
    raise Unsupported(f"custom_call @{target_of(op)}: {key} is not a string ({type(raw).__name__})")


@dataclasses.dataclass(frozen=True)
class Struct:
    """One jaxlib C struct: `fmt` is its little-endian x86-64 layout with the
    compiler's padding written out as `x`, `fields` names the members."""
    name: str
    fmt: str
    fields: tuple
    source: str  # "<file> @ <commit>" of the jaxlib sources that define it

    @property
    def size(self) -> int:
        return struct.calcsize(self.fmt)


def unpack(op, *layouts: Struct, raw: Optional[bytes] = None) -> tuple[Struct, dict]:
    """Decodes the op's descriptor with the layout of its size (several jaxlib
    versions may have emitted structs of different sizes for one target)."""
    raw = descriptor_bytes(op) if raw is None else raw
    for layout in layouts:
        if len(raw) == layout.size:
            return layout, dict(zip(layout.fields, struct.unpack(layout.fmt, raw)))
    sizes = " or ".join(f"{layout.size} ({layout.name}, {layout.source})" for layout in layouts)
    raise Unsupported(f"custom_call @{target_of(op)}: opaque descriptor of {len(raw)} bytes; "
                      f"jaxlib's descriptor is {sizes} bytes")


def enum_member(op, what: str, code: int, table: dict):
    """`table[code]`: the member of a C enum the descriptor names."""
    if code not in table:
        known = ", ".join(f"{k}={v}" for k, v in table.items())
        raise Unsupported(f"custom_call @{target_of(op)}: unknown {what} code {code} in the "
                          f"opaque descriptor (known: {known})")
    return table[code]


def check_dtype(op, dtype, expected) -> None:
    """The descriptor's element type must be the one the op's types say."""
    if np.dtype(dtype) != np.dtype(expected):
        raise Unsupported(f"custom_call @{target_of(op)}: the descriptor says "
                          f"{np.dtype(dtype).name} but the array is {np.dtype(expected).name}")


# ---------------------------------------------------------------- results

@dataclasses.dataclass(frozen=True)
class Outputs:
    """Result types (shape, dtype) in the kernel's order, and whether they travel as one
    tuple (some producers of the pre-FFI era returned every output as a single tuple)."""
    types: tuple
    as_tuple: bool

    @staticmethod
    def of(op) -> "Outputs":
        types = op.result_types
        as_tuple = len(types) == 1 and isinstance(types[0], TupleType)
        if as_tuple:
            types = types[0].elements
        return Outputs(tuple((tuple(t.shape), np.dtype(t.dtype)) for t in types), as_tuple)

    def pack(self, values):
        """The computed leading results, then zeros for the kernel's workspaces."""
        values = list(values)
        values += [jnp.zeros(shape, dtype) for shape, dtype in self.types[len(values):]]
        if self.as_tuple or len(values) > 1:
            return tuple(values)
        return values[0]

    def zeros(self, i):
        shape, dtype = self.types[i]
        return jnp.zeros(shape, dtype)


def known_int(value, what: str) -> int:
    """A scalar operand that the kernel reads as a flag or size: it must be a
    constant of the program (known while tracing)."""
    if isinstance(value, jax.core.Tracer):
        raise ValueError(f"{what} is computed from traced values: the kernel reads it as a "
                         "constant")
    return int(np.asarray(value).reshape(-1)[0])
