"""What many tests need: the MLIR spelling of tensor types, a module with one @main run on
numpy arrays, bitwise comparison of results, and modules more than one test runs."""

import numpy as np

import shlo2jax
from shlo2jax.value_types import dtype_name


def element(dtype) -> str:
    """The MLIR spelling of an element type (a numpy / ml_dtypes dtype, or already a str)."""
    return dtype if isinstance(dtype, str) else dtype_name(dtype)


def tensor(shape, dtype) -> str:
    """`tensor<2x3xf32>` for a shape and an element type (a dtype or its spelling)."""
    return f"tensor<{''.join(f'{d}x' for d in shape)}{element(dtype)}>"


def run_main(body: str, args, arg_types, result_types):
    """Loads `func.func @main(%a0: arg_types[0], ...) -> (result_types) {body}` and calls it
    on `args`; returns what the program returns."""
    params = ", ".join(f"%a{i}: {t}" for i, t in enumerate(arg_types))
    text = f"func.func @main({params}) -> ({', '.join(result_types)}) {{\n{body}\n}}"
    return shlo2jax.load(text)(*args)


def assert_same_bits(actual, expected):
    """Same dtype, shape and bytes: what moving data must keep (NaN payloads, -0 included)."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.dtype == expected.dtype and actual.shape == expected.shape, (actual, expected)
    np.testing.assert_array_equal(actual.reshape(-1).view(np.uint8),
                                  np.ascontiguousarray(expected).reshape(-1).view(np.uint8))


def op_counts(text: str) -> dict:
    """stablehlo/chlo operation names -> how often they occur in a module's text."""
    import re
    counts = {}
    for name in re.findall(r"\b((?:stablehlo|chlo)\.[a-z_]+)\b(?=[ (])", text):
        counts[name] = counts.get(name, 0) + 1
    return counts


def nested_primitives(jaxpr) -> list:
    """The names of a jaxpr's primitives, one per equation, its nested jaxprs' (a loop's
    body, a call's) included."""
    found = []
    for eqn in jaxpr.eqns:
        found.append(eqn.primitive.name)
        for value in eqn.params.values():
            for inner in value if isinstance(value, (list, tuple)) else [value]:
                inner = getattr(inner, "jaxpr", inner)
                if hasattr(inner, "eqns"):
                    found += nested_primitives(inner)
    return found


def staged_jaxpr(program, *args):
    """The jaxpr of the equations a program's translation stages (inside its own jit)."""
    import jax
    jaxpr = jax.make_jaxpr(program.entry)(*args).jaxpr
    while len(jaxpr.eqns) == 1 and "jaxpr" in jaxpr.eqns[0].params:
        jaxpr = jaxpr.eqns[0].params["jaxpr"].jaxpr
    return jaxpr


# XLA's post-optimization ops (fusions, a nested one, a copy, a bitcast) around StableHLO ones:
# what the direct lowering dissolves (tests/transforms/test_dissolve.py,
# tests/executables/test_direct_islands.py)
FUSIONS = """func.func @main(%x: tensor<4xf32>, %y: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<2x2xf32>) {
  %0:2 = "mhlo.fusion"(%x, %y) ({
  ^bb0(%a: tensor<4xf32>, %b: tensor<4xf32>):
    %1 = stablehlo.add %a, %b : tensor<4xf32>
    %2 = "mhlo.fusion"(%1) ({
    ^bb1(%c: tensor<4xf32>):
      %3 = stablehlo.multiply %c, %c : tensor<4xf32>
      "mhlo.return"(%3) : (tensor<4xf32>) -> ()
    }) : (tensor<4xf32>) -> tensor<4xf32>
    "mhlo.return"(%2, %a) : (tensor<4xf32>, tensor<4xf32>) -> ()
  }) : (tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  %4 = "mhlo.copy"(%0#1) : (tensor<4xf32>) -> tensor<4xf32>
  %5 = "mhlo.bitcast"(%4) : (tensor<4xf32>) -> tensor<2x2xf32>
  return %0#0, %4, %5 : tensor<4xf32>, tensor<4xf32>, tensor<2x2xf32>
}"""

# A float bitcast: the f64 reference cannot widen it (tests/transforms/test_upcast.py,
# tests/tools/test_compare.py)
F32_BITCAST = """
func.func public @main(%x: tensor<2xf32>) -> tensor<2xi32> {
  %0 = stablehlo.bitcast_convert %x : (tensor<2xf32>) -> tensor<2xi32>
  return %0 : tensor<2xi32>
}"""


# A chain of ops, each with its own location, so a perturbed copy can be located
# (tests/tools/test_compare.py, tests/tools/compare/test_grad.py).
CHAIN = """
func.func public @main(%x: tensor<8xf32>, %y: tensor<8xf32>) -> tensor<f32> {
  %0 = stablehlo.multiply %x, %y : tensor<8xf32> loc("step0_multiply")
  %1 = stablehlo.sine %0 : tensor<8xf32> loc("step1_sine")
  %2 = stablehlo.add %1, %x : tensor<8xf32> loc("step2_add")
  %3 = stablehlo.tanh %2 : tensor<8xf32> loc("step3_tanh")
  %c = stablehlo.constant dense<0.0> : tensor<f32> loc("step4_zero")
  %4 = stablehlo.reduce(%3 init: %c) applies stablehlo.add across dimensions = [0]
       : (tensor<8xf32>, tensor<f32>) -> tensor<f32> loc("step5_sum")
  return %4 : tensor<f32>
}
"""


# protobuf's wire format written by hand, for hand-made and damaged SavedModel files
# (tests/sources/test_protowire.py, test_saved_model.py, test_tensor_bundle.py)

def pb_varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    return bytes(out) + bytes([value])


def pb_field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field."""
    return pb_varint(number << 3 | 2) + pb_varint(len(payload)) + payload
