"""Custom-call targets of older jax/jaxlib releases, and the custom-call catalog.

Before jaxlib moved its kernels to XLA's typed FFI (mid 2024 to mid 2025), a
kernel read its sizes and flags from an opaque descriptor -- the raw bytes of a
C struct in `backend_config` -- or, for the CPU LAPACK kernels, from leading
scalar operands. Each decoder here unpacks the struct of the jaxlib sources
that emitted it (the commit is cited beside it); a descriptor of another size
or with an unknown enum code is refused at load time, naming the target.

This module holds the shared glue (descriptor reading, registration with
metadata) and the pre-FFI CPU LAPACK forms not covered by
ops/custom_calls_linalg.py (geev, gees, gehrd, sytrd/hetrd). The GPU kernels
are in custom_calls_legacy_gpu.py, the sparse ones in
custom_calls_legacy_sparse.py, DUCC FFTs in custom_calls_legacy_fft.py and the
cuDNN RNN in custom_calls_legacy_rnn.py.

Every target registered here carries a `TargetInfo` (ops/custom_calls_catalog.py:
forms, the jax versions that emitted it, dtypes, the tests covering it), from
which `python -m shlo2jax.custom_call_table` prints the README's table.

Handler contract: a kernel is a pure function `kernel(params, *operands)` of
what its `prepare(op)` decoded (a frozen dataclass) and the operand arrays;
`legacy()` is the one place that adapts it to the registry.
"""

from __future__ import annotations

import dataclasses
import inspect
import struct
from typing import Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax.lax import linalg as L

from shlo2jax import registry
from shlo2jax.registry import Unsupported
from shlo2jax.types import TupleType
from shlo2jax.ops import custom_calls_linalg as linalg

from shlo2jax.ops.custom_calls_catalog import TargetInfo, describe


def legacy(targets, kernel: Callable, prepare: Callable, info: TargetInfo) -> None:
    """Registers `kernel(params, *operands)` for each (literal) target name.

    `prepare(op)` decodes the op once at load time; operands listed in
    `indices_of_shape_operands` (result shapes jax appended for dynamic shapes)
    are dropped before the kernel sees them.
    """
    def handler(ctx, op, params, *operands):
        shape_operands, params = params
        if shape_operands:
            operands = [x for i, x in enumerate(operands) if i not in shape_operands]
        return kernel(params, *operands)

    arity = _arity(kernel)

    def decode(op):
        try:
            shape_operands = _shape_operand_indices(op)
            count = len(op.operands) - len(shape_operands)
            if not arity[0] <= count <= arity[1]:
                expected = arity[0] if arity[0] == arity[1] else f"{arity[0]} or more"
                raise Unsupported(f"custom_call @{target_of(op)} with {count} operands; the "
                                  f"kernel takes {expected}")
            return shape_operands, prepare(op)
        except Unsupported:
            raise
        except (AttributeError, TypeError, ValueError, IndexError, KeyError, struct.error) as e:
            raise Unsupported(f"custom_call @{target_of(op)}: cannot decode it ({e})") from None

    for target in targets:
        registry.register_custom_call(target, handler, prepare=decode)
    describe(targets, info)


def _arity(kernel) -> tuple:
    """(least, most) operands `kernel(params, *operands)` takes."""
    positional = [p for p in inspect.signature(kernel).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    variadic = any(p.kind == p.VAR_POSITIONAL
                   for p in inspect.signature(kernel).parameters.values())
    least = len(positional) - 1
    return least, (1 << 30) if variadic else least


def _shape_operand_indices(op) -> frozenset:
    indices = op.attrs.get("indices_of_shape_operands")
    if indices is None:
        return frozenset()
    return frozenset(int(i) for i in np.asarray(indices).reshape(-1))


def target_of(op) -> str:
    return op.attrs.get("call_target_name", "?")


# ---------------------------------------------------------------- descriptors


def descriptor_bytes(op, key: str = "backend_config") -> bytes:
    """The raw bytes of a string attribute holding a packed C struct.

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


def enum_value(op, what: str, code: int, table: dict):
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


def result_types(op) -> tuple:
    """The op's result types, and whether they travel as one tuple (some producers
    of the pre-FFI era returned every output as a single tuple)."""
    types = op.result_types
    if len(types) == 1 and isinstance(types[0], TupleType):
        return tuple(types[0].elements), True
    return tuple(types), False


@dataclasses.dataclass(frozen=True)
class Outputs:
    """Result types (shape, dtype) in the kernel's order, and the tuple flag."""
    types: tuple
    as_tuple: bool

    @staticmethod
    def of(op) -> "Outputs":
        types, as_tuple = result_types(op)
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


# ---------------------------------------------------------------- pre-FFI LAPACK
# jaxlib/lapack.py of jax 0.4.1 (jaxlib-v0.4.1, b8ae8e3fa1) .. 0.4.38 emitted
# `lapack_?geev`, `lapack_?gees`, `lapack_?gehrd`, `lapack_?sytrd` with
# api_version 2: sizes and flags are leading scalar operands and the kernel
# (jaxlib/cpu/lapack_kernels.cc) writes workspaces as extra results.

_LAPACK_DTYPES = "f32, f64, c64, c128"


@dataclasses.dataclass(frozen=True)
class LapackOutputs:
    out: Outputs
    complex_input: bool


def _prepare_lapack(op):
    out = Outputs.of(op)
    if isinstance(op.attrs.get("mhlo.backend_config"), dict):
        raise Unsupported(f"custom_call @{target_of(op)} with a typed backend_config: "
                          "jaxlib's kernel of that name takes scalar operands")
    name = target_of(op)
    return LapackOutputs(out, name.startswith(("lapack_c", "lapack_z")))


def lapack_geev(params: LapackOutputs, b, n, jobvl, jobvr, a):
    """Results: workspaces (real: three n x n; complex: n x n and rwork[2n]), the
    eigenvalues (real: wr, wi; complex: w), vl, vr (complex, LAPACK's pairs
    unpacked as conj pairs), info. An eigenvector set not asked for is left
    unwritten by the kernel: zeros here."""
    left = known_int(jobvl, "jobvl") == ord("V")
    right = known_int(jobvr, "jobvr") == ord("V")
    w, vl, vr = L.eig(a, compute_left_eigenvectors=True, compute_right_eigenvectors=True)
    info = linalg._info(linalg._all_finite(w, a.ndim - 2))
    vl = vl if left else jnp.zeros_like(vl)
    vr = vr if right else jnp.zeros_like(vr)
    out = params.out
    if params.complex_input:
        return out.pack([out.zeros(0), out.zeros(1), w, vl, vr, info])
    real = a.dtype
    return out.pack([out.zeros(0), out.zeros(1), out.zeros(2), jnp.real(w).astype(real),
                     jnp.imag(w).astype(real), vl, vr, info])


def lapack_gees(params: LapackOutputs, b, n, jobvs, sort, a):
    """Results: real (T, wr, wi, vs, sdim, info); complex (T, rwork[n], w, vs,
    sdim, info). T overwrites the input."""
    if known_int(sort, "sort") != ord("N"):
        raise ValueError("gees with eigenvalue sorting: jaxlib's kernel has no select "
                         "function to sort by")
    t, vs = L.schur(a, compute_schur_vectors=True)
    if known_int(jobvs, "jobvs") != ord("V"):
        vs = jnp.zeros_like(vs)
    batch = a.shape[:-2]
    sdim = jnp.zeros(batch, np.int32)
    info = linalg._info(linalg._all_finite(t, len(batch)))
    out = params.out
    if params.complex_input:
        return out.pack([t, out.zeros(1), jnp.diagonal(t, axis1=-2, axis2=-1), vs, sdim, info])
    wr, wi = linalg._quasi_triangular_eigenvalues(t)
    return out.pack([t, wr, wi, vs, sdim, info])


def lapack_gehrd(params: LapackOutputs, n, ilo, ihi, lda, b, lwork, a):
    """Results: (H with the reflectors below the subdiagonal, tau, info, work)."""
    size = a.shape[-1]
    lo, hi = known_int(ilo, "ilo"), known_int(ihi, "ihi")
    if (lo, hi) != (1, size):
        raise ValueError(f"gehrd with ilo={lo}, ihi={hi}: only the full range 1..{size}")
    h, taus = L.hessenberg(a)
    return params.out.pack([h, taus, jnp.zeros(a.shape[:-2], np.int32)])


def lapack_sytrd(params: LapackOutputs, n, lower, lda, b, lwork, a):
    """Results: (A with the reflectors, d, e, tau, info, work)."""
    out = linalg.sytrd(None, None, bool(known_int(lower, "lower")), a)
    return params.out.pack(out)


legacy(["lapack_sgeev", "lapack_dgeev", "lapack_cgeev", "lapack_zgeev"],
       lapack_geev, _prepare_lapack,
       TargetInfo("LAPACK geev (eig), pre-FFI", forms=("operands",),
                  jax="0.4.1 .. 0.4.31; exports until 0.5.0 (FFI since 3c6103f2df)",
                  dtypes=_LAPACK_DTYPES,
                  test=("tests/test_legacy_custom_calls.py::test_lapack_geev",)))
legacy(["lapack_sgees", "lapack_dgees", "lapack_cgees", "lapack_zgees"],
       lapack_gees, _prepare_lapack,
       TargetInfo("LAPACK gees (Schur), pre-FFI", forms=("operands",),
                  jax="0.4.1 .. 0.4.37; exports until 0.5.0 (FFI since 9081e85d68)",
                  dtypes=_LAPACK_DTYPES,
                  test=("tests/test_legacy_custom_calls.py::test_lapack_gees",)))
legacy(["lapack_sgehrd", "lapack_dgehrd", "lapack_cgehrd", "lapack_zgehrd"],
       lapack_gehrd, _prepare_lapack,
       TargetInfo("LAPACK gehrd (Hessenberg), pre-FFI", forms=("operands",),
                  jax="0.4.1 .. 0.4.33; exports until 0.5.0 (FFI since 6e9a53690c)",
                  dtypes=_LAPACK_DTYPES,
                  test=("tests/test_legacy_custom_calls.py::test_lapack_gehrd",)))
legacy(["lapack_ssytrd", "lapack_dsytrd", "lapack_chetrd", "lapack_zhetrd"],
       lapack_sytrd, _prepare_lapack,
       TargetInfo("LAPACK sytrd/hetrd (tridiagonal), pre-FFI", forms=("operands",),
                  jax="0.4.1 .. 0.4.37; exports until 0.5.0 (FFI since d474feda9e)",
                  dtypes=_LAPACK_DTYPES,
                  test=("tests/test_legacy_custom_calls.py::test_lapack_sytrd",)))


# ---------------------------------------------------------------- markers and aliases

@dataclasses.dataclass(frozen=True)
class Passthrough:
    out: Outputs


def _prepare_layout_constraint(op):
    out = Outputs.of(op)
    if len(out.types) != 1:
        raise Unsupported(f"custom_call @{target_of(op)} with {len(out.types)} results")
    return Passthrough(out)


def layout_constraint(params: Passthrough, x):
    """`jax.experimental.layout.with_layout_constraint`: the layout (and tiling) only
    constrain physical storage."""
    return x


legacy(["LayoutConstraint"], layout_constraint, _prepare_layout_constraint,
       TargetInfo("Layout constraint marker (identity)", forms=("attributes",),
                  jax="0.4.31 ..", dtypes="any",
                  test=("tests/test_legacy_custom_calls.py::test_layout_constraint",)))


def oneapi_potrf(lower: bool, a):
    return linalg.potrf(None, None, lower, a)


legacy(["oneapisolver_potrf_ffi"], oneapi_potrf, linalg._prepare_potrf,
       TargetInfo("oneAPI (Intel GPU) potrf (Cholesky)", forms=("FFI",),
                  jax="main branch after 0.11.0 (platform `oneapi`)", dtypes=_LAPACK_DTYPES,
                  test=("tests/test_legacy_custom_calls.py::test_oneapi_potrf",)))


# ---------------------------------------------------------------- reported at load
# jax.nn.dot_product_attention(implementation="cudnn") lowers to XLA's cuDNN
# fused-attention calls (jax/_src/cudnn/fused_attention_stablehlo.py, jax 0.4.25 ..),
# configured by a JSON backend_config (layouts as dot dimension numbers, mask type,
# sliding window, segment offsets, paged KV cache, dropout seed). Not translated.

def _refuse_cudnn_attention(op):
    raise Unsupported(f"custom_call @{target_of(op)} is cuDNN fused attention, which runs only "
                      "on a CUDA GPU with cuDNN; it has no translation here (export with "
                      "jax.nn.dot_product_attention(implementation='xla') for a portable program)")


def _never_runs(params, *operands):
    raise AssertionError("refused at load")


legacy(["__cudnn$fmhaSoftmax", "__cudnn$fmhaSoftmaxBackward", "__cudnn$fmhaSoftmaxDropout",
        "__cudnn$fmhaSoftmaxDropoutBackward", "__cudnn$fmhaScaleBiasSoftmax",
        "__cudnn$fmhaScaleBiasSoftmaxBackward", "__cudnn$fmhaScaleBiasSoftmaxDropout",
        "__cudnn$fmhaScaleBiasSoftmaxDropoutBackward", "__cudnn$fmhaScaleMaskSoftmax",
        "__cudnn$fmhaScaleMaskSoftmaxBackward", "__cudnn$fmhaScaleMaskSoftmaxDropout",
        "__cudnn$fmhaScaleMaskSoftmaxDropoutBackward", "__cudnn$fmhaScaleBiasMaskSoftmax",
        "__cudnn$fmhaScaleBiasMaskSoftmaxBackward", "__cudnn$fmhaScaleBiasMaskSoftmaxDropout",
        "__cudnn$fmhaScaleBiasMaskSoftmaxDropoutBackward", "__cudnn$fmhaSoftmaxF8",
        "__cudnn$fmhaSoftmaxBackwardF8"],
       _never_runs, _refuse_cudnn_attention,
       TargetInfo("cuDNN fused attention (jax.nn.dot_product_attention, cudnn)",
                  forms=("attributes",),
                  jax="0.4.25 .. (Mask variants 0.4.25 .. 0.4.28; F8 0.4.38 ..)",
                  dtypes="reported at load (needs a CUDA GPU with cuDNN)",
                  test=("tests/test_legacy_custom_calls.py::test_cudnn_fused_attention_is_reported",)))
