"""Writes the test inputs of tests/sources/test_vhlo_downgrade.py and the downgrade tests
of test_release_artifacts.py into tests/vhlo/downgrade/. Run with a jax whose jaxlib reads
StableHLO 1.20 or newer (jax 0.12: `/work/venvs/jax012/bin/python
tests/vhlo/make_downgrade_inputs.py`):

* `release_subset.<v>.mlir.bc` (v = 1_18_0, 1_19_0, 1_20_0): StableHLO's release artifact
  of that version (tests/vhlo/, see SOURCE.md) less its functions that use a VHLO feature
  with no older form since 1.13 (see shlo2jax.sources.vhlo_downgrade: collective_reduce,
  collective_broadcast_v2, async ops, replica groups by mesh axes, custom_call
  result_tilings, composite regions) and their callers, written again for that version
  (`stablehlo.serialize_portable_artifact_str`): the custom_call_v2 and composite_v2 of the
  other functions stay, for the downgrade to rename.
* `jax012_shape_poly.bin`, `jax012_composite_mlp.bin`: `jax.export` artifacts (serialized
  `Exported`) of a shape-polymorphic function and of an MLP whose first layer is a
  `jax.lax.composite`; jax 0.12 writes StableHLO 1.18 (custom_call_v2, composite_v2).
* `result_tilings.mlir.bc`, `composite_regions.mlir.bc`: one function each that uses the
  new attribute / regions (1.18.0 artifacts): refused by name on an older jaxlib.
"""

from __future__ import annotations

import pathlib
import re

HERE = pathlib.Path(__file__).parent
OUT = HERE / "downgrade"

# What no downgrade brings to 1.13 (the oldest jaxlib the tests run: 0.7.2), as it prints in
# a VHLO module's generic form.
_NO_OLDER_FORM = re.compile(
    r'"vhlo\.(collective_reduce_v1|collective_broadcast_v2|async_start_v1|async_done_v1)"'
    r"|replica_group_mesh_axes_v1|!vhlo\.future_v1"
    r"|result_tilings = #vhlo\.array_v1<\[#"
    r'|"vhlo\.composite_v2"\([^)]*\) <\{[^\n]*\}> \(\{')


def _functions_using_newer(vhlo_asm: str) -> set:
    """Names of the vhlo.func_v1 functions of a generic VHLO module that use what has no
    older form, or call one that does."""
    bodies, calls = {}, {}
    for chunk in re.split(r'(?=^  "vhlo\.func_v1"\(\))', vhlo_asm, flags=re.M)[1:]:
        name = re.search(r'sym_name = #vhlo\.string_v1<"([^"]+)">', chunk)[1]
        bodies[name] = chunk
        calls[name] = set(re.findall(r'callee = #vhlo\.string_v1<"([^"]+)">', chunk))
    bad = {n for n, body in bodies.items() if _NO_OLDER_FORM.search(body)}
    while True:
        more = {n for n, callees in calls.items() if callees & bad} - bad
        if not more:
            return bad
        bad |= more


def release_subset(version: str) -> bytes:
    from jaxlib.mlir import ir
    from jaxlib.mlir.dialects import stablehlo

    from shlo2jax.compat import make_ir_context
    data = (HERE / f"stablehlo_legalize_to_vhlo.{version.replace('.', '_')}.mlir.bc").read_bytes()
    with make_ir_context() as context:
        context.dialects["vhlo"]  # noqa: B018
        vhlo = ir.Module.parse(data)
        drop = _functions_using_newer(vhlo.operation.get_asm(print_generic_op_form=True,
                                                             large_elements_limit=16))
        module = stablehlo.deserialize_portable_artifact(context, data)
        for op in list(module.body.operations):
            if op.operation.name == "func.func" and \
                    op.operation.attributes["sym_name"].value in drop:
                op.operation.erase()
        text = module.operation.get_asm(enable_debug_info=False)
    return bytes(stablehlo.serialize_portable_artifact_str(text, version))


def _exported(fn, *shapes) -> bytes:
    import jax
    from jax import export
    return bytes(export.export(jax.jit(fn))(*shapes).serialize())


def jax_exports() -> dict:
    import jax
    import jax.numpy as jnp
    from jax import export

    def shape_poly(x):
        return jnp.sin(x) * x.shape[0] + jnp.sum(x, axis=1, keepdims=True)

    def dense(x, w, b):
        return jnp.maximum(x @ w + b, 0.0)

    def mlp(x, w1, b1, w2, b2):
        h = jax.lax.composite(dense, name="shlo2jax.test.dense")(x, w1, b1)
        return h @ w2 + b2

    f32 = jnp.float32
    return {
        "jax012_shape_poly.bin": _exported(
            shape_poly, jax.ShapeDtypeStruct(export.symbolic_shape("b, 3"), f32)),
        "jax012_composite_mlp.bin": _exported(
            mlp, *(jax.ShapeDtypeStruct(s, f32) for s in ((4, 3), (3, 5), (5,), (5, 2), (2,)))),
    }


RESULT_TILINGS = """
func.func @main(%arg0: tensor<64x256xf32>) -> tensor<64x256xf32> {
  %0 = "stablehlo.custom_call"(%arg0) {
    api_version = 2 : i32, call_target_name = "foo",
    operand_layouts = [dense<[1, 0]> : tensor<2xindex>],
    result_layouts = [dense<[1, 0]> : tensor<2xindex>],
    result_tilings = [[dense<[8, 128]> : tensor<2xindex>]]
  } : (tensor<64x256xf32>) -> tensor<64x256xf32>
  func.return %0 : tensor<64x256xf32>
}
"""

COMPOSITE_REGIONS = """
func.func @main(%arg0: tensor<f32>) -> tensor<f32> {
  %0 = "stablehlo.composite"(%arg0) ({
    ^bb0(%a: tensor<f32>):
      "stablehlo.return"(%a) : (tensor<f32>) -> ()
  }) {name = "shlo2jax.test.region", decomposition = @target, version = 1 : i32}
    : (tensor<f32>) -> tensor<f32>
  func.return %0 : tensor<f32>
}
func.func private @target(%arg0: tensor<f32>) -> tensor<f32> {
  func.return %arg0 : tensor<f32>
}
"""


def main() -> None:
    from jaxlib.mlir.dialects import stablehlo
    OUT.mkdir(exist_ok=True)
    for version in ("1.18.0", "1.19.0", "1.20.0"):
        name = f"release_subset.{version.replace('.', '_')}.mlir.bc"
        (OUT / name).write_bytes(release_subset(version))
    for name, data in jax_exports().items():
        (OUT / name).write_bytes(data)
    for name, text in (("result_tilings.mlir.bc", RESULT_TILINGS),
                       ("composite_regions.mlir.bc", COMPOSITE_REGIONS)):
        (OUT / name).write_bytes(bytes(stablehlo.serialize_portable_artifact_str(text, "1.18.0")))
    for path in sorted(OUT.iterdir()):
        print(path.relative_to(HERE), path.stat().st_size)


if __name__ == "__main__":
    main()
