"""ops/sharding.py on one device: the sharding markers (`Sharding`, the Shardy constraint
custom calls) and the unpaired shard-shape conversions leave values alone, and a conversion
that changes the shape outside a manual region is refused when called. Sharded programs on
several devices, shard_map regions and the sharding parsers: tests/spmd/test_sharding.py."""

import numpy as np
import pytest

import shlo2jax
from shlo2jax.errors import TranslationError


def _marker(target, attributes, result="tensor<2x4xf32>"):
    return shlo2jax.load(f"""
func.func @main(%x: tensor<2x4xf32>) -> {result} {{
  %0 = stablehlo.custom_call @{target}(%x) {{{attributes}}} : (tensor<2x4xf32>) -> {result}
  return %0 : {result}
}}
""")


@pytest.mark.parametrize("target,attributes", [
    ("Sharding", 'mhlo.sharding = "{replicated}"'),
    ("Sharding", 'mhlo.sharding = "{devices=[2,1]<=[2]}"'),
    ("xla.sdy.ShardingConstraint", 'mhlo.sharding = "{replicated}"'),
    ("SPMDFullToShardShape", 'mhlo.sharding = "{manual}"'),
    ("SPMDShardToFullShape", 'mhlo.sharding = "{replicated}"'),
])
def test_markers_on_one_device_are_identity(target, attributes):
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    np.testing.assert_array_equal(np.asarray(_marker(target, attributes)(x)), x)


def test_a_shape_changing_conversion_outside_a_region_is_refused():
    program = _marker("SPMDFullToShardShape", 'mhlo.sharding = "{manual}"', "tensor<1x4xf32>")
    with pytest.raises(TranslationError, match="changes the shape"):
        program(np.zeros((2, 4), np.float32))


def test_sdy_propagation_barrier_is_identity():
    program = shlo2jax.load("""
func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {
  %0 = sdy.propagation_barrier %x allowed_direction=NONE : tensor<3xf32>
  return %0 : tensor<3xf32>
}
""")
    x = np.array([1, -2, 3], np.float32)
    np.testing.assert_array_equal(np.asarray(program(x)), x)
