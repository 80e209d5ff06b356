"""rng_bit_generator (bit-exact Threefry against numpy) and rng (distribution properties)."""

import itertools

import ml_dtypes
import numpy as np
import pytest

import shlo2jax
from shlo2jax import value_types as T

M32 = 0xFFFFFFFF
M64 = 0xFFFFFFFFFFFFFFFF


def _rotl(x, r):
    return ((x << r) | (x >> (32 - r))) & M32


def _threefry2x32(k0, k1, x0, x1):
    """Threefry-2x32, 20 rounds (Salmon et al. 2011), on Python ints."""
    ks = [k0, k1, k0 ^ k1 ^ 0x1BD11BDA]
    rotations = [[13, 15, 26, 6], [17, 29, 16, 24]]
    x0, x1 = (x0 + ks[0]) & M32, (x1 + ks[1]) & M32
    for i in range(5):
        for r in rotations[i % 2]:
            x0 = (x0 + x1) & M32
            x1 = _rotl(x1, r) ^ x0
        x0 = (x0 + ks[(i + 1) % 3]) & M32
        x1 = (x1 + ks[(i + 2) % 3] + i + 1) & M32
    return x0, x1


def _xla_threefry_u64(key, counter, n):
    """XLA's THREE_FRY generator for 64-bit outputs: state = [key, counter]; element i is
    Threefry(key, counter + i) with both halves packed low-then-high."""
    out = []
    for i in range(n):
        c = (counter + i) & M64
        y0, y1 = _threefry2x32(key & M32, key >> 32, c & M32, c >> 32)
        out.append(y0 | (y1 << 32))
    return out


def _rbg(algorithm, shape, element, state, generic=False):
    t = f"tensor<{''.join(f'{d}x' for d in shape)}{element}>"
    if generic:
        op = (f'%a, %b = "mhlo.rng_bit_generator"(%s) {{rng_algorithm = '
              f"#mhlo.rng_algorithm<{algorithm}>}} : (tensor<2xui64>) -> (tensor<2xui64>, {t})")
    else:
        op = (f"%a, %b = stablehlo.rng_bit_generator %s, algorithm = {algorithm} : "
              f"(tensor<2xui64>) -> (tensor<2xui64>, {t})")
    text = (f"func.func @main(%s: tensor<2xui64>) -> (tensor<2xui64>, {t}) {{\n  {op}\n"
            f"  return %a, %b : tensor<2xui64>, {t}\n}}")
    new_state, bits = shlo2jax.load(text)(np.asarray(state, np.uint64))
    return np.asarray(new_state), np.asarray(bits)


@pytest.mark.parametrize("shape", [(), (5,), (2, 3)])
@pytest.mark.parametrize("state", [(3, 3), (0x123456789ABCDEF0, 2**64 - 2)])  # counter wraps
def test_three_fry_u64_bit_exact(shape, state):
    new_state, bits = _rbg("THREE_FRY", shape, "ui64", state)
    n = int(np.prod(shape))
    assert bits.dtype == np.uint64 and bits.shape == shape
    assert [int(v) for v in bits.reshape(-1)] == _xla_threefry_u64(state[0], state[1], n)
    np.testing.assert_array_equal(new_state, [state[0], (state[1] + n) & M64])


@pytest.mark.parametrize("algorithm", ["DEFAULT", "THREE_FRY", "PHILOX"])
@pytest.mark.parametrize("element,dtype,bits_element,bits_dtype", [
    ("ui8", np.uint8, "ui8", np.uint8), ("ui16", np.uint16, "ui16", np.uint16),
    ("ui32", np.uint32, "ui32", np.uint32), ("ui64", np.uint64, "ui64", np.uint64),
    ("i8", np.int8, "ui8", np.uint8), ("i32", np.int32, "ui32", np.uint32),
    ("i64", np.int64, "ui64", np.uint64), ("f16", np.float16, "ui16", np.uint16),
    ("bf16", ml_dtypes.bfloat16, "ui16", np.uint16), ("f32", np.float32, "ui32", np.uint32),
    ("f64", np.float64, "ui64", np.uint64)])
def test_every_algorithm_and_type(algorithm, element, dtype, bits_element, bits_dtype):
    t, tb = f"tensor<4x8x{element}>", f"tensor<4x8x{bits_element}>"
    text = ("func.func @main(%s: tensor<2xui64>) -> (tensor<2xui64>, "
            f"{t}, {tb}) {{\n"
            f"  %a, %b = stablehlo.rng_bit_generator %s, algorithm = {algorithm} : "
            f"(tensor<2xui64>) -> (tensor<2xui64>, {t})\n"
            f"  %c, %d = stablehlo.rng_bit_generator %s, algorithm = {algorithm} : "
            f"(tensor<2xui64>) -> (tensor<2xui64>, {tb})\n"
            f"  return %a, %b, %d : tensor<2xui64>, {t}, {tb}\n}}")
    program = shlo2jax.load(text)
    state = np.array([42, 7], np.uint64)
    new_state, out, raw = (np.asarray(v) for v in program(state))
    assert out.dtype == np.dtype(dtype) and out.shape == (4, 8)
    assert new_state.shape == (2,) and new_state.dtype == np.uint64
    assert not np.array_equal(new_state, state)
    # A deterministic function of the state.
    again_state, again, _ = (np.asarray(v) for v in program(state))
    np.testing.assert_array_equal(again_state, new_state)
    assert again.tobytes() == out.tobytes()
    # Other element types carry the raw bits of the same-width unsigned draw (as XLA does).
    assert out.view(bits_dtype).tobytes() == raw.tobytes()
    # Random bits: roughly half of them set.
    assert 0.35 < np.unpackbits(raw.view(np.uint8)).mean() < 0.65


def test_mhlo_rng_bit_generator():
    state = (3, 3)
    new_state, bits = _rbg("THREE_FRY", (), "ui64", state, generic=True)
    assert int(bits) == _xla_threefry_u64(3, 3, 1)[0]
    np.testing.assert_array_equal(new_state, [3, 4])


@pytest.mark.parametrize("algorithm,state", [("THREE_FRY", "tensor<3xui64>"),
                                              ("PHILOX", "tensor<4xui64>"),
                                              ("DEFAULT", "tensor<4xui64>"),
                                              ("PHILOX", "tensor<f32>")])
def test_state_shapes_the_spec_does_not_allow(algorithm, state):
    # ui64[2] for every algorithm, ui64[3] for PHILOX, and DEFAULT's implementation-defined
    # size is XLA's (Philox: 2 or 3). StableHLO's release artifacts write a tensor<f32>
    # state (op_rng_bit_generator): refused at load, naming the spec's states.
    text = (f"func.func @main(%s: {state}) -> ({state}, tensor<4xui32>) {{\n"
            f"  %a, %b = stablehlo.rng_bit_generator %s, algorithm = {algorithm} : "
            f"({state}) -> ({state}, tensor<4xui32>)\n"
            f"  return %a, %b : {state}, tensor<4xui32>\n}}")
    with pytest.raises(shlo2jax.UnsupportedError,
                       match=f"rng_bit_generator {algorithm} with state .*1-dimensional ui64"):
        shlo2jax.load(text)


# ---------------------------------------------------------------- rng

def _rng(distribution, element, dtype, a, b, shape, count=1):
    """`count` rng ops in one function, all with the same operands."""
    t = f"tensor<{''.join(f'{d}x' for d in shape)}{element}>"
    ops = "\n".join(
        f'  %r{i} = "stablehlo.rng"(%a, %b, %shape) {{rng_distribution = '
        f"#stablehlo<rng_distribution {distribution}>}} : "
        f"(tensor<{element}>, tensor<{element}>, tensor<{len(shape)}xi64>) -> {t}"
        for i in range(count))
    results = ", ".join(f"%r{i}" for i in range(count))
    types = ", ".join([t] * count)
    text = (f"func.func @main(%a: tensor<{element}>, %b: tensor<{element}>) -> ({types}) {{\n"
            f"  %shape = stablehlo.constant dense<{list(shape)}> : tensor<{len(shape)}xi64>\n"
            f"{ops}\n  return {results} : {types}\n}}")
    out = shlo2jax.load(text)(np.asarray(a, dtype), np.asarray(b, dtype))
    return [np.asarray(o) for o in out] if count > 1 else [np.asarray(out)]


@pytest.mark.slow
@pytest.mark.parametrize("element,dtype,a,b", [
    ("f32", np.float32, -2.0, 3.0), ("f64", np.float64, 0.5, 0.75),
    ("bf16", ml_dtypes.bfloat16, 1.0, 8.0), ("f16", np.float16, -1.0, 1.0),
    ("i32", np.int32, -5, 7), ("i64", np.int64, 10, 13), ("ui8", np.uint8, 3, 250),
    ("i8", np.int8, -128, 127), ("ui32", np.uint32, 0, 2)])
def test_rng_uniform_range(element, dtype, a, b):
    (out,) = _rng("UNIFORM", element, dtype, a, b, (100, 50))
    assert out.dtype == np.dtype(dtype) and out.shape == (100, 50)
    values = out.astype(np.float64)
    assert values.min() >= a and values.max() < b  # [a, b)
    assert len(np.unique(values)) > 1
    mean = (a + b) / 2 if T.is_float(dtype) else (a + b - 1) / 2  # integers: a..b-1
    assert abs(values.mean() - mean) < (b - a) * 0.05


@pytest.mark.parametrize("element,dtype", [("f32", np.float32), ("f64", np.float64),
                                           ("bf16", ml_dtypes.bfloat16)])
def test_rng_normal(element, dtype):
    (out,) = _rng("NORMAL", element, dtype, 2.0, 0.5, (200, 100))
    assert out.dtype == np.dtype(dtype)
    values = out.astype(np.float64)
    assert abs(values.mean() - 2.0) < 0.02 and abs(values.std() - 0.5) < 0.02


def test_rng_is_deterministic_and_ops_are_distinct():
    first = _rng("UNIFORM", "f32", np.float32, 0.0, 1.0, (16,), count=2)
    second = _rng("UNIFORM", "f32", np.float32, 0.0, 1.0, (16,), count=2)
    np.testing.assert_array_equal(first[0], second[0])
    np.testing.assert_array_equal(first[1], second[1])
    assert not np.array_equal(first[0], first[1])



RBG_TYPES = ["ui8", "ui16", "ui32", "ui64", "i8", "i16", "i32", "i64", "f16", "bf16", "f32",
             "f64"]
RBG_SHAPES = [(), (3,), (2, 5), (3, 1, 5)]


@pytest.mark.slow
@pytest.mark.parametrize("algorithm,words", [("DEFAULT", 2), ("DEFAULT", 3), ("THREE_FRY", 2),
                                             ("PHILOX", 2), ("PHILOX", 3)])
def test_bit_exact_with_xla_every_shape_and_type(algorithm, words):
    """Every output element type and several shapes (odd sizes included: the 64-bit draws
    are split), in one module, against XLA compiling the same module directly. PHILOX's
    3-word state, which lax does not take, goes through a primitive of our own."""
    from shlo2jax.tools.reference import xla_direct
    st = f"tensor<{words}xui64>"
    lines, results = [], []
    for i, (element, shape) in enumerate(itertools.product(RBG_TYPES, RBG_SHAPES)):
        t = "tensor<" + "".join(f"{d}x" for d in shape) + element + ">"
        lines.append(f"  %s{i}, %o{i} = stablehlo.rng_bit_generator %s, algorithm = {algorithm} "
                     f": ({st}) -> ({st}, {t})")
        results += [(f"%s{i}", st), (f"%o{i}", t)]
    text = (f"func.func @main(%s: {st}) -> ({', '.join(t for _, t in results)}) {{\n"
            + "\n".join(lines) + f"\n  return {', '.join(v for v, _ in results)} : "
            + ", ".join(t for _, t in results) + "\n}")
    program = shlo2jax.load(text)
    state = np.array([0x0123456789ABCDEF, 2**64 - 3, 77][:words], np.uint64)
    ours = [np.asarray(v) for v in program(state)]
    theirs = [np.asarray(v) for v in xla_direct(program)(state)]
    assert len(ours) == len(theirs) == len(results)
    for (name, t), a, b in zip(results, ours, theirs):
        # (xla_direct hands back signless integers as unsigned: compare the bits.)
        assert a.dtype.itemsize == b.dtype.itemsize and a.shape == b.shape, (t, a.dtype, b.dtype)
        assert a.tobytes() == b.tobytes(), (name, t)


def test_dynamic_rng_bit_generator_takes_every_state_the_static_op_takes():
    # jax.export's custom call: a ui64[3] Philox state (which lax does not take) as the op
    text = """
func.func @main(%s: tensor<3xui64>) -> (tensor<3xui64>, tensor<5xui32>, tensor<3xui64>, tensor<5xui32>) {
  %shape = stablehlo.constant dense<[5]> : tensor<1xi32>
  %0:2 = stablehlo.custom_call @stablehlo.dynamic_rng_bit_generator(%s, %shape) {
      api_version = 2 : i32, rng_algorithm = #stablehlo<rng_algorithm DEFAULT>}
      : (tensor<3xui64>, tensor<1xi32>) -> (tensor<3xui64>, tensor<5xui32>)
  %1:2 = stablehlo.rng_bit_generator %s, algorithm = PHILOX
      : (tensor<3xui64>) -> (tensor<3xui64>, tensor<5xui32>)
  func.return %0#0, %0#1, %1#0, %1#1 : tensor<3xui64>, tensor<5xui32>, tensor<3xui64>, tensor<5xui32>
}"""
    outs = [np.asarray(v) for v in shlo2jax.load(text)(np.array([1, 2, 3], np.uint64))]
    np.testing.assert_array_equal(outs[0], outs[2])
    np.testing.assert_array_equal(outs[1], outs[3])
    with pytest.raises(shlo2jax.UnsupportedError, match="1-dimensional ui64"):
        shlo2jax.load(text.replace("3xui64", "4xui64"))


def test_rng_shape_of_type_index():
    # StableHLO's release artifacts (op_rng): the shape operand a `tensor<0xindex>` argument
    text = """
func.func @main(%a: tensor<f32>, %b: tensor<f32>, %shape: tensor<0xindex>) -> tensor<f32> {
  %0 = stablehlo.rng %a, %b, %shape, distribution = UNIFORM : (tensor<f32>, tensor<f32>, tensor<0xindex>) -> tensor<f32>
  return %0 : tensor<f32>
}"""
    value = float(shlo2jax.load(text)(np.float32(2), np.float32(3), np.zeros(0, np.int64)))
    assert 2 <= value < 3
