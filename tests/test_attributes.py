"""attributes.py's dense data: copies that own 64-byte aligned memory (issue 32)."""

import mmap
import pathlib

import jax
import numpy as np
import pytest
from jaxlib.mlir import ir

import shlo2jax
from shlo2jax import attributes
from shlo2jax import value_types as T
from shlo2jax.compat import make_ir_context

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _owner(array):
    """What finally owns an array's memory (through views and memoryviews)."""
    while True:
        if isinstance(array, np.ndarray) and array.base is not None:
            array = array.base
        elif isinstance(array, memoryview):
            array = array.obj
        else:
            return array


@pytest.mark.parametrize("shape, dtype", [((512, 1024), np.float32),  # 2 MB: a mapping
                                          ((1000,), np.int8),  # the heap
                                          ((3,), np.float64)])  # < 64 bytes: numpy's own
def test_aligned_copy_is_an_owned_aligned_copy(shape, dtype):
    source = np.arange(np.prod(shape)).astype(dtype).reshape(shape)
    copy = attributes.aligned_copy(source)
    assert copy.dtype == source.dtype and copy.shape == source.shape
    assert copy.flags.c_contiguous and copy.flags.writeable
    if copy.nbytes >= 64:
        assert copy.ctypes.data % 64 == 0
    assert not np.shares_memory(copy, source)
    np.testing.assert_array_equal(copy, source)
    source[...] = 7
    assert not (copy == 7).all()


def test_large_constant_is_held_apart_from_the_mlir_context():
    """A decoded constant is a copy in memory of its own (not a view of the attribute, which
    would keep the MLIR context alive), aligned so that CPU device_put wraps it."""
    value = np.random.default_rng(0).standard_normal((512, 1024)).astype(np.float32)
    with make_ir_context():
        attr = ir.DenseElementsAttr.get(value)
        decoded = attributes.dense_elements(attr, T.parse_type("tensor<512x1024xf32>"))
        assert not np.shares_memory(decoded, np.asarray(attr))
    assert isinstance(_owner(np.asarray(attr)), ir.Attribute)  # (what the test tells apart)
    assert isinstance(_owner(decoded), (np.ndarray, mmap.mmap))
    del attr
    np.testing.assert_array_equal(decoded, value)
    assert decoded.ctypes.data % 64 == 0
    if jax.default_backend() == "cpu":
        assert jax.device_put(decoded).unsafe_buffer_pointer() == decoded.ctypes.data


def test_attribute_values_are_decoded_once_per_distinct_attribute():
    """The decoder decodes an attribute that many ops hold once (MLIR uniques attributes),
    where its value cannot change (numbers, strings, tuples, records); arrays and
    dictionaries stay one per op, and every op's value is what decoding it alone gives."""
    from shlo2jax import module as M
    text = """
    func.func @main(%x: tensor<2x3xf32>) -> (tensor<3x2xf32>, tensor<3x2xf32>, tensor<2xf32>, tensor<2xf32>) {
      %a = stablehlo.transpose %x, dims = [1, 0] : (tensor<2x3xf32>) -> tensor<3x2xf32>
      %b = stablehlo.transpose %x, dims = [1, 0] : (tensor<2x3xf32>) -> tensor<3x2xf32>
      %c = stablehlo.constant {d = {k = 1 : i64}} dense<[1.0, 2.0]> : tensor<2xf32>
      %e = stablehlo.constant {d = {k = 1 : i64}} dense<[1.0, 2.0]> : tensor<2xf32>
      return %a, %b, %c, %e : tensor<3x2xf32>, tensor<3x2xf32>, tensor<2xf32>, tensor<2xf32>
    }"""
    with make_ir_context() as context:
        module = ir.Module.parse(text, context)
        decoded = M.decode_module(module, strict=False)
        first, second = decoded.ops[0].attrs, decoded.ops[1].attrs
        assert first == second == {"permutation": (1, 0)}
        assert first["permutation"] is second["permutation"]  # decoded once
        c, e = decoded.ops[2].attrs, decoded.ops[3].attrs
        np.testing.assert_array_equal(c["value"], e["value"])
        assert c["value"] is not e["value"] and c["d"] is not e["d"] and c["d"] == {"k": 1}
        ops = [op.operation for op in module.body.operations[0].regions[0].blocks[0].operations]
        for op, record in zip(ops, decoded.ops):
            alone = attributes.decode_op_attributes(op)
            assert alone.keys() == record.attrs.keys()
            for name, value in alone.items():
                assert type(value) is type(record.attrs[name])
                if isinstance(value, np.ndarray):
                    np.testing.assert_array_equal(value, record.attrs[name])
                else:
                    assert value == record.attrs[name]


def test_a_dictionary_entry_the_bindings_cannot_name_is_a_load_problem():
    # `shlo2jax mutate --kinds hlo_proto --count 1000 --seed 4`, mutant 12: an HLO proto whose
    # frontend attributes hold an entry of a null name; reading it raised the bindings'
    # RuntimeError ("basic_string::_M_construct null not valid"), an internal error.
    from shlo2jax.tools import mutate
    name, mutation, data = mutate.mutants(
        mutate.structured_sources(str(ROOT), kinds=("hlo_proto",)), 13, 4)[12]
    assert (name, mutation) == ("tests/corpus/hlo/tf_gru_while_after_opt/model.hlo.pb",
                                "empty@field1#1595"), "the mutants changed: find it again"
    with pytest.raises(shlo2jax.Shlo2JaxError, match="dictionary attribute's entry cannot"):
        shlo2jax.load(data)
