"""constant (dense literals of every element type: lists, splats, hex) and iota.

Expected values are the literals themselves, converted with numpy / ml_dtypes.
f6 types are covered by test_f6.py.
"""

import ml_dtypes
import numpy as np
import pytest

import shlo2jax
from shlo2jax import value_types as T

from _helpers import assert_same_bits

INTEGERS = ["i1", "i2", "i4", "i8", "i16", "i32", "i64", "ui2", "ui4", "ui8", "ui16", "ui32",
            "ui64"]
FLOATS = ["f4E2M1FN", "f8E4M3FN", "f8E5M2", "f8E4M3FNUZ", "f8E5M2FNUZ", "f8E4M3B11FNUZ",
          "f8E4M3", "f8E3M4", "f8E8M0FNU", "bf16", "f16", "f32", "f64"]
COMPLEX = ["complex<f32>", "complex<f64>"]


def literal_values(element):
    """(MLIR literal list, expected array) with extreme values of the type."""
    dtype = T.ELEMENT_DTYPES[element]
    if dtype == np.bool_:
        return "[true, false, true]", np.array([True, False, True])
    if T.is_complex(dtype):
        values = [complex(1.5, -2.0), complex(0.0, 3.25), complex(-1e30, 0.5)]
        return ("[" + ", ".join(f"({v.real:e}, {v.imag:e})" for v in values) + "]",
                np.array(values, dtype))
    if T.is_integer(dtype):
        info = ml_dtypes.iinfo(dtype)
        values = [int(info.min), 0, 1, int(info.max)]
        arr = (np.array(values, np.uint64) if dtype == np.uint64
               else np.array(values, np.int64).astype(dtype))
        return "[" + ", ".join(map(str, values)) + "]", arr
    info = ml_dtypes.finfo(dtype)
    if element == "f8E8M0FNU":
        values = [1.0, 0.25, float(info.max), float(info.smallest_normal)]
    else:
        values = [0.0, -1.5, float(info.max), float(info.smallest_subnormal), -float(info.max)]
    return "[" + ", ".join(f"{v:.17e}" for v in values) + "]", np.array(values).astype(dtype)


@pytest.mark.parametrize("element", INTEGERS + FLOATS + COMPLEX)
def test_constant_every_element_type(element):
    text, values = literal_values(element)
    n = values.size
    t, s = f"tensor<{n}x{element}>", f"tensor<2x2x{element}>"
    splat = text[1:].split(",")[0].strip()
    if T.is_complex(values.dtype):
        splat = text[1:].split("),")[0].strip() + ")"
    program = shlo2jax.load(f"""func.func @main() -> ({t}, {s}) {{
      %0 = stablehlo.constant dense<{text}> : {t}
      %1 = stablehlo.constant dense<{splat}> : {s}
      return %0, %1 : {t}, {s}
    }}""")
    dense, full = program()
    assert_same_bits(dense, values)
    assert_same_bits(full, np.full((2, 2), values[0], values.dtype))


@pytest.mark.parametrize("element,hex_text,expected", [
    ("f32", "0x0000C07F0000803F", np.array([np.nan, 1.0], np.float32)),
    ("i16", "0x0180FF7F", np.array([-32767, 32767], np.int16)),
    ("bf16", "0x803F0080", np.array([1.0, -0.0]).astype(T.ELEMENT_DTYPES["bf16"])),
])
def test_constant_hex_literal(element, hex_text, expected):
    t = f"tensor<2x{element}>"
    out = shlo2jax.load(f"""func.func @main() -> {t} {{
      %0 = stablehlo.constant dense<"{hex_text}"> : {t}
      return %0 : {t}
    }}""")()
    # Hex literals hold the little-endian bytes of the values.
    assert_same_bits(out, expected)


def test_constant_empty_and_scalar():
    out = shlo2jax.load("""func.func @main() -> (tensor<0x3xf32>, tensor<ui64>) {
      %0 = stablehlo.constant dense<> : tensor<0x3xf32>
      %1 = stablehlo.constant dense<18446744073709551615> : tensor<ui64>
      return %0, %1 : tensor<0x3xf32>, tensor<ui64>
    }""")()
    assert_same_bits(out[0], np.zeros((0, 3), np.float32))
    assert_same_bits(out[1], np.array(2**64 - 1, np.uint64))


IOTA_TYPES = ["i2", "i4", "i8", "i16", "i32", "i64", "ui2", "ui4", "ui8", "ui16", "ui32", "ui64",
              "f4E2M1FN", "f8E4M3FN", "f8E5M2", "f8E4M3FNUZ", "f8E5M2FNUZ", "f8E4M3B11FNUZ",
              "f8E4M3", "f8E3M4", "bf16", "f16", "f32", "f64", "complex<f32>", "complex<f64>"]


@pytest.mark.parametrize("element", IOTA_TYPES)
def test_iota_every_element_type(element):
    dtype = T.ELEMENT_DTYPES[element]
    # Small enough that every index is exact in the type (ui2 holds 0..3).
    t0, t1 = f"tensor<4x3x{element}>", f"tensor<2x4x{element}>"
    out0, out1 = shlo2jax.load(f"""func.func @main() -> ({t0}, {t1}) {{
      %0 = stablehlo.iota dim = 0 : {t0}
      %1 = stablehlo.iota dim = 1 : {t1}
      return %0, %1 : {t0}, {t1}
    }}""")()
    assert_same_bits(out0, np.broadcast_to(np.arange(4)[:, None], (4, 3)).astype(dtype))
    assert_same_bits(out1, np.broadcast_to(np.arange(4)[None, :], (2, 4)).astype(dtype))



# ------------------------------------------------------------------ splats stay splats (issue 46)

from shlo2jax import attributes  # noqa: E402
from shlo2jax.errors import LoadError  # noqa: E402

HUGE = "tensor<100000x100000x100xf32>"  # 3.64 TiB declared
# More elements than attributes.SPLAT_RECORD_ELEMENTS: decoded as a Splat record.
LARGE_SHAPE = (257, 256)


def test_large_splat_is_decoded_as_a_record():
    from jaxlib.mlir import ir
    from shlo2jax.compat import make_ir_context
    assert LARGE_SHAPE[0] * LARGE_SHAPE[1] > attributes.SPLAT_RECORD_ELEMENTS
    with make_ir_context():
        attr = ir.Attribute.parse(f"dense<1.0> : {HUGE}")
        value = attributes.decode(attr)
        small = attributes.decode(ir.Attribute.parse("dense<1.0> : tensor<4x4xf32>"))
    assert type(value) is attributes.Splat
    assert value.shape == (100000, 100000, 100) and value.dtype == np.float32
    assert value.size == 10**12 and value.nbytes == 4 * 10**12
    assert type(small) is np.ndarray  # small splats stay arrays (rules read them at plan time)
    text_value = attributes.dense_from_text("dense<0x7FC00001>", T.parse_type(HUGE), splats=True)
    assert type(text_value) is attributes.Splat and text_value == attributes.Splat(
        np.array(0x7FC00001, np.uint32).view(np.float32), value.shape)
    little = attributes.Splat(np.float32(2.5), (2, 3))
    assert_same_bits(np.asarray(little), np.full((2, 3), 2.5, np.float32))
    assert_same_bits(little.materialise(), np.full((2, 3), 2.5, np.float32))


def _huge_program(value="1.5"):
    return shlo2jax.load(f"""func.func @main() -> (tensor<f32>, tensor<10x10x10xf32>) {{
      %c = stablehlo.constant dense<{value}> : {HUGE}
      %sl = stablehlo.slice %c [0:10, 0:10, 0:10] : ({HUGE}) -> tensor<10x10x10xf32>
      %z = stablehlo.constant dense<0.0> : tensor<f32>
      %s = stablehlo.reduce(%sl init: %z) applies stablehlo.add across dimensions = [0, 1, 2]
        : (tensor<10x10x10xf32>, tensor<f32>) -> tensor<f32>
      return %s, %sl : tensor<f32>, tensor<10x10x10xf32>
    }}""")


def test_huge_splat_loads_lowers_and_runs_without_materialising():
    import re
    import tracemalloc

    import jax
    tracemalloc.start()
    try:
        program = _huge_program()
        shapes = jax.eval_shape(program["main"])
        lowered = jax.jit(program["main"]).lower().as_text()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20, peak  # a materialised splat is 3.6 TiB (a MemoryError)
    assert [s.shape for s in shapes] == [(), (10, 10, 10)]
    assert "broadcast_in_dim" in lowered
    assert not re.search(r"dense<[^>]*> : " + re.escape(HUGE), lowered), lowered[:2000]
    total, block = program()
    assert float(total) == 1500.0
    assert_same_bits(block, np.full((10, 10, 10), 1.5, np.float32))


@pytest.mark.parametrize("element", INTEGERS + FLOATS + COMPLEX)
def test_large_splat_every_element_type(element):
    text, values = literal_values(element)
    splat = text[1:].split(",")[0].strip()
    if T.is_complex(values.dtype):
        splat = text[1:].split("),")[0].strip() + ")"
    t = f"tensor<{LARGE_SHAPE[0]}x{LARGE_SHAPE[1]}x{element}>"
    program = shlo2jax.load(f"""func.func @main() -> {t} {{
      %0 = stablehlo.constant dense<{splat}> : {t}
      return %0 : {t}
    }}""")
    import jax
    lowered = jax.jit(program["main"]).lower().as_text()
    assert_same_bits(program(), np.full(LARGE_SHAPE, values[0], values.dtype))
    assert "broadcast_in_dim" in lowered


# More elements than attributes.SPLAT_VIEW_ELEMENTS, no more than SPLAT_RECORD_ELEMENTS: an
# array that is a view of its one element.
VIEW_SHAPE = (64, 1024)


@pytest.mark.parametrize("element", INTEGERS + FLOATS + COMPLEX)
def test_a_mid_size_splat_is_one_element_seen_at_every_index(element):
    from jaxlib.mlir import ir
    from shlo2jax.compat import make_ir_context
    size = VIEW_SHAPE[0] * VIEW_SHAPE[1]
    assert attributes.SPLAT_VIEW_ELEMENTS < size <= attributes.SPLAT_RECORD_ELEMENTS
    text, values = literal_values(element)
    splat = text[1:].split(",")[0].strip()
    if T.is_complex(values.dtype):
        splat = text[1:].split("),")[0].strip() + ")"
    t = f"tensor<{VIEW_SHAPE[0]}x{VIEW_SHAPE[1]}x{element}>"
    decoded = [attributes.dense_from_text(f"dense<{splat}>", T.parse_type(t), splats=True)]
    if not T.is_complex(values.dtype):  # (the bindings read no complex splat: printed text)
        with make_ir_context():
            decoded.append(attributes.decode(ir.Attribute.parse(f"dense<{splat}> : {t}")))
    for value in decoded:
        assert type(value) is np.ndarray and value.shape == VIEW_SHAPE
        assert attributes.is_splat_view(value) and not value.flags.writeable
        assert_same_bits(np.ascontiguousarray(value), np.full(VIEW_SHAPE, values[0], values.dtype))
    program = shlo2jax.load(f"""func.func @main() -> {t} {{
      %0 = stablehlo.constant dense<{splat}> : {t}
      return %0 : {t}
    }}""")
    assert_same_bits(program(), np.full(VIEW_SHAPE, values[0], values.dtype))


def test_a_small_splat_is_a_full_array():
    from jaxlib.mlir import ir
    from shlo2jax.compat import make_ir_context
    with make_ir_context():
        value = attributes.decode(ir.Attribute.parse("dense<2.0> : tensor<16x16xf32>"))
    assert 16 * 16 <= attributes.SPLAT_VIEW_ELEMENTS
    assert type(value) is np.ndarray and value.flags.owndata and not attributes.is_splat_view(value)


def test_a_splat_view_is_no_large_constant_and_the_analyses_read_it():
    # max(x, -inf everywhere) is x (ops.elementwise._identity_of_bound): decided from the
    # splat's elements, as from a full array; 256 KiB declared, one element held, so the
    # program does not count it among the constants it outlines
    t = f"tensor<{VIEW_SHAPE[0]}x{VIEW_SHAPE[1]}xf32>"
    program = shlo2jax.load(f"""func.func @main(%x: {t}) -> {t} {{
      %low = stablehlo.constant dense<0xFF800000> : {t}
      %0 = stablehlo.maximum %x, %low : {t}
      return %0 : {t}
    }}""")
    assert program.module.large_constants == []
    import jax
    x = np.linspace(-2, 2, VIEW_SHAPE[0] * VIEW_SHAPE[1], dtype=np.float32).reshape(VIEW_SHAPE)
    names = [e.primitive.name for e in jax.make_jaxpr(program["main"])(x).jaxpr.eqns[0]
             .params["jaxpr"].jaxpr.eqns]
    assert "max" not in names, names
    assert_same_bits(program(x), x)


def test_short_constant_data_is_a_load_error_naming_the_op_and_size():
    text = f"""func.func @main() -> {HUGE} {{
      %c = stablehlo.constant dense_resource<blob1> : {HUGE}
      return %c : {HUGE}
    }}
    {{-#
      dialect_resources: {{ builtin: {{ blob1: "0x040000000000803F0000803F" }} }}
    #-}}"""
    with pytest.raises(LoadError, match=r"stablehlo\.constant at .*8 bytes.*3\.64 TiB"):
        shlo2jax.load(text)
    elided = f"""func.func @main() -> {HUGE} {{
      %c = stablehlo.constant dense_resource<__elided__> : {HUGE}
      return %c : {HUGE}
    }}"""
    with pytest.raises(LoadError, match=r"stablehlo\.constant at .*placeholder data.*3\.64 TiB"):
        shlo2jax.load(elided, placeholder_data=True)
