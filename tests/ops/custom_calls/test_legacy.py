"""Custom-call forms of older jax/jaxlib releases: packed descriptors, leading scalar
operands, the first FFI spellings.

Each module is synthesized as jaxlib's Python wrappers of that era built it: the
descriptor is `struct.pack`ed exactly as the kernel's C struct (the layouts are
written out here, independently of the decoders), the operand and result lists
are those of jaxlib's lowering. Results are checked through the defining
properties of each decomposition (reconstruction, orthogonality, triangularity),
as jax's export back-compat tests do, against numpy; workspaces must be zeros.
"""

from __future__ import annotations

import re
import struct

import numpy as np
import pytest

import shlo2jax
from shlo2jax.errors import UnsupportedError

from ._programs import (ALL, DTYPES, LAPACK_PREFIX, REAL, _adj, _assert_zeros, _check_tridiagonal,
    _herm, _householder, _i32, _program, _random, _run, _tensor, _tol, mlir_bytes)


def _u8(value):
    return ("const", "tensor<ui8>", f"dense<{value}>")


# ---------------------------------------------------------------- pre-FFI LAPACK (operands)
# jaxlib/lapack.py of jax 0.4.1 (c4d590b1b6) .. 0.4.38: geev_mhlo/geev_hlo,
# gees_hlo, gehrd_hlo, sytrd_hlo with api_version 2 and leading scalar operands.


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("jobvl,jobvr", [("V", "V"), ("N", "V"), ("V", "N")])
def test_lapack_geev(dtype, jobvl, jobvr):
    b, n = 2, 4
    element, _ = DTYPES[dtype]
    real = REAL[dtype]
    cplx = f"complex<{real}>"
    a = _random((b, n, n), dtype)
    if np.issubdtype(dtype, np.complexfloating):
        # workspaces: A (n x n) and rwork[2n]; then w, vl, vr, info
        results = [_tensor((n, n), element), _tensor((2 * n,), real), _tensor((b, n), element)]
    else:
        # workspaces: A, vl, vr (n x n, real); then wr, wi, vl, vr, info
        results = [_tensor((n, n), element)] * 3 + [_tensor((b, n), element)] * 2
    results += [_tensor((b, n, n), cplx)] * 2 + [_tensor((b,), "i32")]
    prog = _program(f"lapack_{LAPACK_PREFIX[dtype]}geev",
                    [_i32(b), _i32(n), _u8(ord(jobvl)), _u8(ord(jobvr)),
                     ("arg", _tensor((b, n, n), element))],
                    results, "api_version = 2 : i32")
    outs = _run(prog, a)
    if np.issubdtype(dtype, np.complexfloating):
        _assert_zeros(outs[0], outs[1])
        w = outs[2]
    else:
        _assert_zeros(*outs[:3])
        w = outs[3] + 1j * outs[4]
    vl, vr, info = outs[-3:]
    np.testing.assert_array_equal(info, 0)
    tol = 10 * _tol(dtype) * np.abs(a).max() * n
    for i in range(b):
        np.testing.assert_allclose(np.sort_complex(w[i]), np.sort_complex(np.linalg.eigvals(a[i])),
                                   atol=tol)
        if jobvr == "V":
            np.testing.assert_allclose(a[i] @ vr[i], vr[i] * w[i], atol=tol)
            np.testing.assert_allclose(np.linalg.norm(vr[i], axis=0), 1, atol=tol)
        else:
            _assert_zeros(vr[i])
        if jobvl == "V":  # vl^H A = w vl^H
            np.testing.assert_allclose(_adj(vl[i]) @ a[i], w[i][:, None] * _adj(vl[i]), atol=tol)
        else:
            _assert_zeros(vl[i])


def test_lapack_geev_real_pairs_are_conjugate():
    a = np.array([[0.0, -2.0, 0.0], [2.0, 0.0, 0.0], [0.0, 0.0, 3.0]])
    results = [_tensor((3, 3), "f64")] * 3 + [_tensor((3,), "f64")] * 2 + \
        [_tensor((3, 3), "complex<f64>")] * 2 + ["tensor<i32>"]
    prog = _program("lapack_dgeev", [_i32(1), _i32(3), _u8(86), _u8(86),
                                     ("arg", _tensor((3, 3), "f64"))], results)
    outs = _run(prog, a)
    wr, wi, vr = outs[3], outs[4], outs[6]
    pair = np.flatnonzero(wi != 0)
    assert len(pair) == 2 and pair[1] == pair[0] + 1 and wi[pair[0]] == -wi[pair[1]]
    assert wr[pair[0]] == wr[pair[1]]
    np.testing.assert_allclose(vr[:, pair[1]], np.conj(vr[:, pair[0]]), atol=1e-12)


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("jobvs", ["V", "N"])
def test_lapack_gees(dtype, jobvs):
    b, n = 2, 4
    element, _ = DTYPES[dtype]
    a = _random((b, n, n), dtype)
    complex_input = np.issubdtype(dtype, np.complexfloating)
    mat = _tensor((b, n, n), element)
    if complex_input:  # (T, rwork[n], w, vs, sdim, info)
        results = [mat, _tensor((n,), REAL[dtype]), _tensor((b, n), element)]
    else:  # (T, wr, wi, vs, sdim, info)
        results = [mat, _tensor((b, n), element), _tensor((b, n), element)]
    results += [mat, _tensor((b,), "i32"), _tensor((b,), "i32")]
    prog = _program(f"lapack_{LAPACK_PREFIX[dtype]}gees",
                    [_i32(b), _i32(n), _u8(ord(jobvs)), _u8(ord("N")), ("arg", mat)],
                    results, "api_version = 2 : i32")
    outs = _run(prog, a)
    t, vs, sdim, info = outs[0], outs[3], outs[4], outs[5]
    np.testing.assert_array_equal(info, 0)
    np.testing.assert_array_equal(sdim, 0)
    tol = 10 * _tol(dtype) * np.abs(a).max() * n
    if complex_input:
        _assert_zeros(outs[1])
        w = outs[2]
        assert np.all(np.tril(t, -1) == 0)
    else:
        w = outs[1] + 1j * outs[2]
        assert np.all(np.tril(t, -2) == 0)
    for i in range(b):
        np.testing.assert_allclose(np.sort_complex(w[i]),
                                   np.sort_complex(np.linalg.eigvals(a[i])), atol=tol)
        if jobvs == "V":
            np.testing.assert_allclose(vs[i] @ t[i] @ _adj(vs[i]), a[i], atol=tol)
            np.testing.assert_allclose(_adj(vs[i]) @ vs[i], np.eye(n), atol=tol)
        else:
            _assert_zeros(vs[i])


def test_lapack_gees_sort_is_refused_at_trace_time():
    mat = _tensor((3, 3), "f32")
    prog = _program("lapack_sgees", [_i32(1), _i32(3), _u8(86), _u8(ord("S")), ("arg", mat)],
                    [mat, "tensor<3xf32>", "tensor<3xf32>", mat, "tensor<i32>", "tensor<i32>"])
    with pytest.raises(Exception, match="sort"):
        prog(np.eye(3, dtype=np.float32))


@pytest.mark.parametrize("dtype", ALL)
def test_lapack_gehrd(dtype):
    b, n = 2, 5
    element, _ = DTYPES[dtype]
    a = _random((b, n, n), dtype)
    mat = _tensor((b, n, n), element)
    lwork = 7  # whatever jaxlib's workspace query said: only its type matters
    prog = _program(f"lapack_{LAPACK_PREFIX[dtype]}gehrd",
                    [_i32(n), _i32(1), _i32(n), _i32(n), _i32(b), _i32(lwork), ("arg", mat)],
                    [mat, _tensor((b, n - 1), element), _tensor((b,), "i32"),
                     _tensor((lwork,), element)], "api_version = 2 : i32")
    h, taus, info, work = _run(prog, a)
    np.testing.assert_array_equal(info, 0)
    _assert_zeros(work)
    for i in range(b):
        q = _householder(n, n - 1, h[i], taus[i], lambda j: j + 1)
        np.testing.assert_allclose(_adj(q) @ a[i] @ q, np.triu(h[i], -1),
                                   atol=10 * _tol(dtype) * n)


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("lower", [True, False])
def test_lapack_sytrd(dtype, lower):
    b, n = 2, 4
    element, _ = DTYPES[dtype]
    real = REAL[dtype]
    a = _herm((b, n, n), dtype)
    # Garbage in the triangle LAPACK does not read.
    garbage = np.triu(np.full((n, n), 9.0), 1) if lower else np.tril(np.full((n, n), 9.0), -1)
    mat = _tensor((b, n, n), element)
    name = {np.float32: "ssytrd", np.float64: "dsytrd", np.complex64: "chetrd",
            np.complex128: "zhetrd"}[dtype]
    prog = _program(f"lapack_{name}", [_i32(n), _i32(int(lower)), _i32(n), _i32(b), _i32(9),
                                       ("arg", mat)],
                    [mat, _tensor((b, n), real), _tensor((b, n - 1), real),
                     _tensor((b, n - 1), element), _tensor((b,), "i32"), _tensor((9,), element)],
                    "api_version = 2 : i32")
    out, d, e, taus, info, work = _run(prog, (a + garbage).astype(dtype))
    np.testing.assert_array_equal(info, 0)
    _assert_zeros(work)
    for i in range(b):
        _check_tridiagonal(a[i], out[i], d[i], e[i], taus[i], lower, dtype)


# ---------------------------------------------------------------- markers and aliases


def test_layout_constraint():
    text = """
func.func @main(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %r = stablehlo.custom_call @LayoutConstraint(%x) {api_version = 1 : i32,
      operand_layouts = [dense<[0, 1]> : tensor<2xindex>], result_layouts = [dense<[1, 0]> : tensor<2xindex>]}
      : (tensor<2x3xf32>) -> tensor<2x3xf32>
  func.return %r : tensor<2x3xf32>
}"""
    x = _random((2, 3), np.float32)
    np.testing.assert_array_equal(np.asarray(shlo2jax.load(text)(x)), x)


@pytest.mark.parametrize("lower", [True, False])
def test_oneapi_potrf(lower):
    m = _random((2, 3, 3), np.float64)
    a = m @ _adj(m) + 3 * np.eye(3)
    t = _tensor((2, 3, 3), "f64")
    prog = _program("oneapisolver_potrf_ffi", [("arg", t)], [t, _tensor((2,), "i32")],
                    f"api_version = 4 : i32, mhlo.backend_config = {{lower = {str(lower).lower()}}}")
    factor, info = _run(prog, a)
    np.testing.assert_array_equal(info, 0)
    rebuilt = factor @ _adj(factor) if lower else _adj(factor) @ factor
    np.testing.assert_allclose(rebuilt, a, atol=1e-10)


# ---------------------------------------------------------------- malformed descriptors


BAD_DESCRIPTORS = [
    # (target, descriptor, operand types, result types, message)
    ("cusolver_syevd", struct.pack("<4i", 0, 0, 1, 3),
     ["tensor<3x3xf32>"], ["tensor<3x3xf32>", "tensor<3xf32>", "tensor<i32>", "tensor<4xf32>"],
     r"cusolver_syevd: opaque descriptor of 16 bytes; jaxlib's descriptor is 20"),
    ("cusolver_syevj", struct.pack("<6i", 0, 0, 1, 3, 4, 0),
     ["tensor<3x3xf32>"], ["tensor<3x3xf32>", "tensor<3xf32>", "tensor<i32>", "tensor<4xf32>"],
     r"cusolver_syevj: opaque descriptor of 24 bytes"),
    ("cusolver_getrf", struct.pack("<5i", 9, 1, 3, 3, 4),
     ["tensor<3x3xf32>"], ["tensor<3x3xf32>", "tensor<3xi32>", "tensor<i32>", "tensor<4xf32>"],
     r"cusolver_getrf: unknown element type code 9"),
    ("hipsolver_syevd", struct.pack("<5i", 0, 0, 1, 3, 4),  # 0 is CUDA's lower, not hipSOLVER's
     ["tensor<3x3xf32>"], ["tensor<3x3xf32>", "tensor<3xf32>", "tensor<i32>", "tensor<4xf32>"],
     r"hipsolver_syevd: unknown fill mode \(uplo\) code 0"),
    ("cusolver_geqrf", struct.pack("<5i", 1, 1, 3, 3, 4),  # says f64, the array is f32
     ["tensor<3x3xf32>"], ["tensor<3x3xf32>", "tensor<3xf32>", "tensor<i32>", "tensor<4xf32>"],
     r"cusolver_geqrf: the descriptor says float64 but the array is float32"),
    ("cublas_getrf_batched", struct.pack("<3i", 0, 5, 3),
     ["tensor<2x3x3xf32>"],
     ["tensor<2x3x3xf32>", "tensor<2x3xi32>", "tensor<2xi32>", "tensor<8xi8>"],
     r"cublas_getrf_batched: descriptor batch 5 does not match the array's batch 2"),
    ("cusolver_gesvd", struct.pack("<5i2b2x", 0, 1, 3, 3, 4, ord("Q"), ord("Q")),
     ["tensor<3x3xf32>"], ["tensor<3x3xf32>", "tensor<3xf32>", "tensor<3x3xf32>",
                           "tensor<3x3xf32>", "tensor<i32>", "tensor<4xf32>"],
     r"cusolver_gesvd: unknown jobu code 81"),
    ("cu_threefry2x32", struct.pack("<i", 4),
     ["tensor<4xui32>"] * 4, ["tensor<4xui32>"] * 2,
     r"cu_threefry2x32: opaque descriptor of 4 bytes; jaxlib's descriptor is 8"),
    ("cusparse_csr_todense", struct.pack("<7i", 77, 2, 2, 2, 1, 1, 0),
     ["tensor<1xf32>", "tensor<1xi32>", "tensor<3xi32>"], ["tensor<2x2xf32>", "tensor<4xi8>"],
     r"cusparse_csr_todense: unknown value type code 77"),
    ("cusparse_gtsv2_f32", struct.pack("<2i", 3, 1),
     ["tensor<3xf32>"] * 3 + ["tensor<3x1xf32>"], ["tensor<3x1xf32>", "tensor<4xi8>"],
     r"cusparse_gtsv2_f32: opaque descriptor of 8 bytes; jaxlib's descriptor is 12 .* or 16"),
]


BAD_DESCRIPTORS += [
    ("cusolver_geqrf", struct.pack("<5i", 0, 1, 3, 3, 4),  # one operand too many
     ["tensor<3x3xf32>", "tensor<3x3xf32>"],
     ["tensor<3x3xf32>", "tensor<3xf32>", "tensor<i32>", "tensor<4xf32>"],
     r"cusolver_geqrf with 2 operands; the kernel takes 1"),
    ("lapack_sgehrd", b"",  # a result that is a token: cannot be decoded
     ["tensor<3x3xf32>"], ["!stablehlo.token"], r"lapack_sgehrd with 1 operands; the kernel takes 7"),
    ("cu_threefry2x32", struct.pack("<q", 4),  # token results: nothing to decode them as
     ["tensor<4xui32>"] * 4, ["!stablehlo.token"] * 2, r"cu_threefry2x32: cannot decode it"),
]


@pytest.mark.parametrize("target,desc,operands,results,message", BAD_DESCRIPTORS,
                         ids=[c[0] + str(i) for i, c in enumerate(BAD_DESCRIPTORS)])
def test_bad_descriptors(target, desc, operands, results, message):
    with pytest.raises(UnsupportedError, match=message):
        _program(target, [("arg", t) for t in operands], results,
                 f"backend_config = {mlir_bytes(desc)}")


# ---------------------------------------------------------------- older producer forms

# jax 0.4.1 printed MHLO (generic `"mhlo.custom_call"` with `api_version = 2 : i32`),
# and early native serialization wrote that module as plain MLIR bytecode.

MHLO_EIGH = """
module @jit_eigh attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<2x3x3xf32>) -> (tensor<2x3x3xf32>, tensor<2x3xf32>) {
    %0 = mhlo.constant dense<1> : tensor<i32>
    %1 = mhlo.constant dense<2> : tensor<i32>
    %2 = mhlo.constant dense<3> : tensor<i32>
    %3:5 = "mhlo.custom_call"(%0, %1, %2, %arg0) {api_version = 2 : i32, backend_config = "", call_target_name = "lapack_ssyevd", has_side_effect = false, operand_layouts = [dense<> : tensor<0xindex>, dense<> : tensor<0xindex>, dense<> : tensor<0xindex>, dense<[1, 2, 0]> : tensor<3xindex>], output_operand_aliases = [#mhlo.output_operand_alias<output_tuple_indices = [0], operand_index = 3, operand_tuple_indices = []>], result_layouts = [dense<[1, 2, 0]> : tensor<3xindex>, dense<[1, 0]> : tensor<2xindex>, dense<0> : tensor<1xindex>, dense<0> : tensor<1xindex>, dense<0> : tensor<1xindex>]} : (tensor<i32>, tensor<i32>, tensor<i32>, tensor<2x3x3xf32>) -> (tensor<2x3x3xf32>, tensor<2x3xf32>, tensor<2xi32>, tensor<37xf32>, tensor<18xi32>)
    %4 = mhlo.add %3#1, %3#1 : tensor<2x3xf32>
    return %3#0, %4 : tensor<2x3x3xf32>, tensor<2x3xf32>
  }
}"""


@pytest.mark.parametrize("as_bytecode", [False, True])
def test_mhlo_module_bytecode_with_legacy_lapack(as_bytecode):
    import io
    from jaxlib.mlir import ir
    from shlo2jax.compat import make_ir_context
    source = MHLO_EIGH
    if as_bytecode:
        with make_ir_context():
            module = ir.Module.parse(MHLO_EIGH)
            buffer = io.BytesIO()
            module.operation.write_bytecode(buffer)
        source = buffer.getvalue()
        assert "mhlo.custom_call" not in repr(source)  # really bytes, not text
    a = _herm((2, 3, 3), np.float32)
    v, twice_w = _run(shlo2jax.load(source), a)
    w = twice_w / 2
    np.testing.assert_allclose(w, np.linalg.eigvalsh(a), atol=1e-5)
    np.testing.assert_allclose(a @ v, v * w[:, None, :], atol=1e-5)


def test_dimension_size_argument_and_shape_operands():
    # jax2tf's native serialization before `jax.global_constant` (serialization
    # versions <= 4): the batch size is a leading i32 argument of @main; the pre-FFI
    # LAPACK call (here geev, shape-polymorphic since 3adfe321b0) reads it as its
    # batch operand and gets its result shapes as trailing shape operands.
    n = 3
    text = f"""
func.func public @main(%b: tensor<i32>, %a: tensor<?x{n}x{n}xf32>) -> (tensor<?x{n}xf32>, tensor<?x{n}xf32>, tensor<?x{n}x{n}xcomplex<f32>>) {{
  %n = stablehlo.constant dense<{n}> : tensor<i32>
  %v = stablehlo.constant dense<86> : tensor<ui8>
  %bb = stablehlo.reshape %b : (tensor<i32>) -> tensor<1xi32>
  %nn = stablehlo.constant dense<{n}> : tensor<1xi32>
  %ws = stablehlo.constant dense<[{n}, {n}]> : tensor<2xi32>
  %sw = stablehlo.concatenate %bb, %nn, dim = 0 : (tensor<1xi32>, tensor<1xi32>) -> tensor<2xi32>
  %sv = stablehlo.concatenate %bb, %nn, %nn, dim = 0 : (tensor<1xi32>, tensor<1xi32>, tensor<1xi32>) -> tensor<3xi32>
  %r:8 = stablehlo.custom_call @lapack_sgeev(%b, %n, %v, %v, %a, %ws, %ws, %ws, %sw, %sw, %sv, %sv, %bb) {{
      api_version = 2 : i32, indices_of_shape_operands = dense<[5, 6, 7, 8, 9, 10, 11, 12]> : tensor<8xi64>}}
      : (tensor<i32>, tensor<i32>, tensor<ui8>, tensor<ui8>, tensor<?x{n}x{n}xf32>, tensor<2xi32>, tensor<2xi32>, tensor<2xi32>, tensor<2xi32>, tensor<2xi32>, tensor<3xi32>, tensor<3xi32>, tensor<1xi32>)
      -> (tensor<{n}x{n}xf32>, tensor<{n}x{n}xf32>, tensor<{n}x{n}xf32>, tensor<?x{n}xf32>, tensor<?x{n}xf32>, tensor<?x{n}x{n}xcomplex<f32>>, tensor<?x{n}x{n}xcomplex<f32>>, tensor<?xi32>)
  func.return %r#3, %r#4, %r#6 : tensor<?x{n}xf32>, tensor<?x{n}xf32>, tensor<?x{n}x{n}xcomplex<f32>>
}}"""
    a = _random((2, n, n), np.float32)
    wr, wi, vr = _run(shlo2jax.load(text), np.int32(2), a)
    w = wr + 1j * wi
    for i in range(2):
        np.testing.assert_allclose(np.sort_complex(w[i]), np.sort_complex(np.linalg.eigvals(a[i])),
                                   atol=1e-4)
        np.testing.assert_allclose(a[i] @ vr[i], vr[i] * w[i], atol=1e-4)


def _jax_data_cases():
    import importlib
    import pkgutil
    data = pytest.importorskip("jax._src.internal_test_util.export_back_compat_test_data")
    found = []
    for info in pkgutil.iter_modules(data.__path__):
        if info.ispkg:
            continue
        module = importlib.import_module(f"{data.__name__}.{info.name}")
        for attr, value in vars(module).items():
            stack = [(f"{info.name}.{attr}", value)]
            while stack:
                name, v = stack.pop()
                if isinstance(v, dict) and "mlir_module_serialized" in v:
                    found.append((name, v))
                elif isinstance(v, dict):
                    stack += [(f"{name}[{k!r}]", x) for k, x in v.items()]
                elif isinstance(v, (list, tuple)):
                    stack += [(f"{name}[{i}]", x) for i, x in enumerate(v)]
    return found


def _producer_version(artifact: bytes):
    found = re.search(rb"StableHLO_v(\d+)\.(\d+)\.(\d+)", artifact[:64])
    return tuple(int(x) for x in found.groups()) if found else None


def test_oldest_serialized_forms_in_jax_data_load():
    """The installed jax's back-compat data holds VHLO artifacts older than the oldest
    version jaxlib still writes (StableHLO v0.9.0) and pre-artifact VHLO bytecode
    (2023, no producer version): they load and run (tests/test_back_compat.py checks
    every case's values; this pins that those oldest forms are among them)."""
    from jaxlib.mlir.dialects import stablehlo
    import test_back_compat
    minimum = tuple(int(x) for x in stablehlo.get_minimum_version().split("."))
    cases = _jax_data_cases()
    older = [(n, d) for n, d in cases
             if (_producer_version(d["mlir_module_serialized"]) or (0,)) < minimum]
    unversioned = [n for n, d in older if _producer_version(d["mlir_module_serialized"]) is None]
    assert older and unversioned, "the installed jax no longer ships pre-1.0 artifacts"
    for name, data in older:
        if data.get("nr_devices", 1) == 1 and test_back_compat._known(name) is None:
            test_back_compat.check_case(name, data)


def test_declared_operand_counts_match_the_handlers():
    # kernel_prepare(decode, operands=n) checks the count at load; the handler must read
    # exactly those operands (then jax's result shapes), or one would be silently dropped.
    import inspect
    import shlo2jax.ops  # noqa: F401
    from shlo2jax import registry
    checked, wrong = 0, []
    for name, rule in registry.CUSTOM_CALL_RULES.items():
        declared = getattr(rule.prepare, "operands", None)
        if declared is None:
            continue
        parameters = list(inspect.signature(rule.handler).parameters.values())[2:]
        named = sum(p.kind == p.POSITIONAL_OR_KEYWORD for p in parameters)
        rest = any(p.kind == p.VAR_POSITIONAL for p in parameters)
        checked += 1
        if named != declared[0] or not rest:
            wrong.append(f"{name}: declared {declared}, handler reads {named} (+ *rest: {rest})")
    assert checked > 80 and not wrong, wrong


@pytest.mark.parametrize("target", ["__cudnn$fmhaSoftmax", "__cudnn$fmhaScaleBiasMaskSoftmaxBackward"])
def test_cudnn_fused_attention_is_reported(target):
    t = "tensor<1x4x2x8xf16>"
    with pytest.raises(UnsupportedError, match=re.escape(target) + ".*cuDNN fused attention"):
        _program(target, [("arg", t)] * 3, [t, "tensor<0xui8>"],
                 'backend_config = "{\\22cudnn_fmha_backend_config\\22: {}}"')
