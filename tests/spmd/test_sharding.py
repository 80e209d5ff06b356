"""Sharded exports: mhlo.sharding / sdy shardings, sharding constraints and shard_map
regions (GSPMD `@SPMDFullToShardShape` pairs and Shardy `sdy.manual_computation`).

The parsers are checked here against hand-written tile assignments. Running a sharded
program needs 8 devices: those checks (`_mesh_*`) run together in one child process
started with XLA_FLAGS=--xla_force_host_platform_device_count=8 (the flag must be set
before jax is imported); each exports a JAX function with `jax.export` under GSPMD and
under Shardy, loads it with `shlo2jax.load`, and compares values and output shardings
with the original function run by jax.
"""

import functools
import pathlib
import sys

import numpy as np
import pytest

# tests/: multidevice, for the child process this file runs as a script (pytest has it)
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import multidevice  # noqa: E402
import shlo2jax  # noqa: E402
from shlo2jax.spmd import mesh as S  # noqa: E402
from shlo2jax.spmd import sharding_attributes as A  # noqa: E402


# ---------------------------------------------------------------- parsing (one device)

@pytest.mark.parametrize("text,tiles,devices", [
    ("{devices=[2,4]<=[8]}", (2, 4), np.arange(8).reshape(2, 4, 1)),
    ("{devices=[2,1,4]<=[8] last_tile_dim_replicate}", (2, 1),
     np.arange(8).reshape(2, 1, 4)),
    # tile (i, 0) holds devices {i + 2k}: the [2,4] iota transposed
    ("{devices=[4,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}", (4, 1),
     np.array([[0, 4], [1, 5], [2, 6], [3, 7]]).reshape(4, 1, 2)),
    ("{devices=[2,1]1,0}", (2, 1), np.array([1, 0]).reshape(2, 1, 1)),
    ("{devices=[1,2,2]<=[4] last_tile_dims={manual}}", (1, 2),
     np.arange(4).reshape(1, 2, 2)),
])
def test_tiled_hlo_shardings(text, tiles, devices):
    s = A.parse_hlo_sharding(text)
    assert s.kind == "tiled" and s.tiles == tiles
    np.testing.assert_array_equal(s.devices, devices)


@pytest.mark.parametrize("text,kind", [("{replicated}", "replicated"), ("{manual}", "manual"),
                                       ("{maximal device=3}", "maximal"), ("{unknown}", "unknown")])
def test_other_hlo_shardings(text, kind):
    s = A.parse_hlo_sharding(text)
    assert s.kind == kind
    if kind == "maximal":
        assert s.device == 3


def test_tuple_hlo_sharding():
    s = A.parse_hlo_sharding("{{replicated}, {devices=[2]<=[2]}}")
    assert s.kind == "tuple" and [e.kind for e in s.elements] == ["replicated", "tiled"]


def test_sdy_mesh_and_sharding():
    mesh = A.parse_sdy_mesh('<["x"=2, "y"=4]>')
    assert mesh == A.SdyMesh((("x", 2), ("y", 4)), None)
    assert A.parse_sdy_mesh('#sdy.mesh<["a"=2], device_ids=[1, 0]>').device_ids == (1, 0)
    s = A.parse_sdy_sharding('#sdy.sharding<@mesh, [{"y"}, {}, {"x", "y"}], replicated={"z"}>')
    assert s == A.SdySharding("mesh", (("y",), (), ("x", "y")))
    both = A.parse_sdy_shardings('#sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>, <@mesh, []>]>')
    assert [b.dims for b in both] == [(("x",), ()), ()]


def test_sdy_tiling_follows_the_mesh_axes():
    mesh = A.parse_sdy_mesh('<["x"=2, "y"=4]>')
    # dim 0 over y, dim 1 over x: tile (j, i) is the device at mesh position (i, j)
    t = A.sdy_tiling(A.parse_sdy_sharding('<@mesh, [{"y"}, {"x"}]>'), mesh)
    assert t.tiles == (4, 2)
    np.testing.assert_array_equal(t.devices[..., 0], np.arange(8).reshape(2, 4).T)
    # only the manual axes split a manual region's values
    t = A.sdy_tiling(A.parse_sdy_sharding('<@mesh, [{"x"}, {"y"}]>'), mesh, axes={"x"})
    assert t.tiles == (2, 1) and sorted(t.devices[1, 0]) == [4, 5, 6, 7]


def test_tiling_blocks_round_trip():
    import jax.numpy as jnp
    t = A.parse_hlo_sharding("{devices=[4,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}")
    tiling = t.tiling(2, 8)
    x = np.arange(32).reshape(8, 4)
    local = np.asarray(tiling.to_local(jnp.asarray(x), 8))
    for device in range(8):  # device d holds rows 2*(d % 4) ... of the [2,4]^T assignment
        np.testing.assert_array_equal(local[device], x[2 * (device % 4):2 * (device % 4) + 2])
    np.testing.assert_array_equal(np.asarray(tiling.to_global(jnp.asarray(local), x.shape)), x)


def test_gspmd_mesh_refines_every_iota_tile_assignment():
    # (reshape dims, transpose, tile dims with the replicated copies last)
    assert S._refine([((8,), (0,), (8,))], 8) == [8]
    assert S._refine([((8,), (0,), (2, 4))], 8) == [2, 4]
    assert S._refine([((2, 4), (1, 0), (4, 1, 2))], 8) == [2, 4]
    assert S._refine([((8,), (0,), (2, 4)), ((8,), (0,), (4, 2))], 8) == [2, 2, 2]
    assert S._refine([((6,), (0,), (2, 3)), ((6,), (0,), (3, 2))], 6) is None


_MANUAL_GSPMD = """
module @m attributes {mhlo.num_partitions = 2 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<2x4xf32> {mhlo.sharding = "{devices=[2,1]<=[2]}"})
      -> (tensor<2x4xf32> {mhlo.sharding = "{devices=[2,1]<=[2]}"}) {
    %0 = stablehlo.custom_call @Sharding(%arg0) {mhlo.sharding = "{devices=[2,1]<=[2]}"} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %1 = stablehlo.custom_call @SPMDFullToShardShape(%0) {mhlo.sharding = "{manual}"} : (tensor<2x4xf32>) -> tensor<1x4xf32>
    %2 = "stablehlo.collective_permute"(%1) {channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, source_target_pairs = dense<[[0, 1], [1, 0]]> : tensor<2x2xi64>} : (tensor<1x4xf32>) -> tensor<1x4xf32>
    %3 = stablehlo.custom_call @Sharding(%2) {mhlo.sharding = "{manual}"} : (tensor<1x4xf32>) -> tensor<1x4xf32>
    %4 = stablehlo.custom_call @SPMDShardToFullShape(%3) {mhlo.sharding = "{devices=[2,1]<=[2]}"} : (tensor<1x4xf32>) -> tensor<2x4xf32>
    return %4 : tensor<2x4xf32>
  }
}
"""


def test_a_manual_region_needs_its_devices():
    program = shlo2jax.load(_MANUAL_GSPMD)
    ops = [op.name for op in program.module.functions["main"].body.ops]
    assert ops == ["stablehlo.custom_call", "shlo2jax.manual_region"]
    import jax
    if len(jax.devices()) >= 2:
        pytest.skip("runs with one device")
    # decided at load: the program loads (its ops, its signature), and each call says why not
    assert type(program.entry.executable).__name__ == "TooFewDevices"
    with pytest.raises(shlo2jax.errors.ShardingError, match="partitioned over 2 devices, 1 "
                                                            "available"):
        program(np.zeros((2, 4), np.float32))


_ANNOTATED = """
module @m attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["x"=2, "y"=4]>
  func.func public @main(%arg0: tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>})
      -> (tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"y"}]>}) {
    %0 = sdy.sharding_constraint %arg0 <@mesh, [{"y"}, {}]> : tensor<8x4xf32>
    %1 = stablehlo.add %0, %0 : tensor<8x4xf32>
    return %1 : tensor<8x4xf32>
  }
}
"""


def test_an_annotated_program_runs_on_one_device():
    import jax
    program = shlo2jax.load(_ANNOTATED)
    assert program.entry.is_sharded and not program.has_manual_regions
    if len(jax.devices()) >= 8:
        pytest.skip("runs with one device")
    # decided at load: too few devices for its mesh, so it runs translated on one
    assert type(program.entry.executable).__name__ == "Translated"
    x = np.arange(32, dtype=np.float32).reshape(8, 4)
    np.testing.assert_array_equal(np.asarray(program(x)), 2 * x)


# ---------------------------------------------------------------- on a 2x4 mesh (child)

def _mesh():
    import jax
    return jax.make_mesh((2, 4), ("x", "y"), axis_types=(jax.sharding.AxisType.Auto,) * 2)


def _compare(fn, args, partitioner):
    """Exports jit `fn` under `partitioner`, loads it, and checks values and shardings."""
    import jax
    from jax import export
    old = jax.config.jax_use_shardy_partitioner
    jax.config.update("jax_use_shardy_partitioner", partitioner == "shardy")
    try:
        exported = export.export(fn)(*[jax.ShapeDtypeStruct(a.shape, a.dtype) for a in args])
        expected = fn(*args)
        for text in (exported, exported.mlir_module()):
            program = shlo2jax.load(text)
            marker = "sdy.mesh" if partitioner == "shardy" else "mhlo.sharding"
            assert marker in exported.mlir_module()
            got = program(*args)
            got = got if isinstance(got, tuple) else (got,)
            exp = expected if isinstance(expected, tuple) else (expected,)
            assert len(got) == len(exp)
            declared = exported.out_shardings_hlo
            for k, (g, e) in enumerate(zip(got, exp)):
                np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=1e-6,
                                           err_msg=f"result {k}")
                # an unspecified output sharding is the compiler's choice
                if declared[k] is not None:
                    assert g.sharding.is_equivalent_to(e.sharding, e.ndim), \
                        (k, g.sharding, e.sharding)
            for s, e, a in zip(program.entry.in_shardings, exported.in_shardings_jax(_mesh()),
                               args):
                assert s is None or e is None or s.is_equivalent_to(e, a.ndim), (s, e)
    finally:
        jax.config.update("jax_use_shardy_partitioner", old)


def _args(*shapes):
    rng = np.random.default_rng(0)
    return [rng.integers(-8, 8, s).astype(np.float32) for s in shapes]


def _shard_map_fn(body, in_specs, out_specs, in_shardings, out_shardings=None):
    import jax
    from jax.sharding import NamedSharding
    mesh = _mesh()
    f = jax.shard_map(body, mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_vma=False)
    named = lambda specs: None if specs is None else tuple(  # noqa: E731
        NamedSharding(mesh, s) for s in specs)
    return jax.jit(f, in_shardings=named(in_shardings), out_shardings=named(out_shardings))


def _collectives(partitioner):
    import jax
    from jax.sharding import PartitionSpec as P

    def body(a):
        s = jax.lax.psum(a, "y")
        g = jax.lax.all_gather(a, "x", tiled=True)
        p = jax.lax.ppermute(a, "y", [(i, (i + 1) % 4) for i in range(4)])
        t = jax.lax.all_to_all(a, "y", 0, 1, tiled=True)
        return s + p, g, t
    fn = _shard_map_fn(body, P("x", "y"), (P("x", "y"), P(None, "y"), P("x", "y")),
                       (P("x", "y"),))
    _compare(fn, _args((8, 16)), partitioner)


def _psum_scatter_and_axis_index(partitioner):
    import jax
    from jax.sharding import PartitionSpec as P

    def body(a, b):
        r = jax.lax.psum_scatter(a, ("x", "y"), scatter_dimension=0, tiled=True)
        i = jax.lax.axis_index("y").astype(np.float32) + 10 * jax.lax.axis_index("x")
        return r, b * i, jax.lax.pmax(b, "x")
    fn = _shard_map_fn(body, (P(), P("x", "y")), (P(("x", "y")), P("x", "y"), P(None, "y")),
                       (P(), P("x", "y")), (P(("x", "y")), P("x", "y"), P(None, "y")))
    _compare(fn, _args((16, 3), (4, 8)), partitioner)


def _jit_shardings(partitioner):
    import jax
    from jax.sharding import NamedSharding, PartitionSpec as P
    mesh = _mesh()

    def f(x, w):
        y = jax.lax.with_sharding_constraint(x * 2, NamedSharding(mesh, P("y", None)))
        return y @ w, jax.numpy.sin(x).sum(axis=0)
    fn = jax.jit(f, in_shardings=(NamedSharding(mesh, P("x", "y")),
                                  NamedSharding(mesh, P(None, "x"))),
                 out_shardings=(NamedSharding(mesh, P("y", "x")), NamedSharding(mesh, P())))
    _compare(fn, _args((8, 8), (8, 4)), partitioner)


def _partial_manual(partitioner):
    import jax
    from jax.sharding import PartitionSpec as P

    def body(a):
        return jax.lax.psum(a, "x") * 2
    mesh = _mesh()
    f = jax.shard_map(body, mesh=mesh, in_specs=P("x"), out_specs=P(), axis_names={"x"},
                      check_vma=False)
    from jax.sharding import NamedSharding
    fn = jax.jit(f, in_shardings=NamedSharding(mesh, P("x", "y")))
    _compare(fn, _args((8, 8)), partitioner)


_ROUND_TRIP = r"""
module @m attributes {mhlo.frontend_attributes = {xla.sdy.meshes = "{mesh = #sdy.mesh<[\22x\22=2, \22y\22=4]>}"}, mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<8x8xf32> {mhlo.frontend_attributes = {xla.sdy.sharding = "#sdy.sharding<@mesh, [{\22x\22}, {\22y\22}]>"}, mhlo.sharding = "{devices=[2,4]<=[8]}"}) -> (tensor<8x8xf32> {mhlo.sharding = "{devices=[2,4]<=[8]}"}) {
    %0 = stablehlo.custom_call @xla.sdy.GlobalToLocalShape(%arg0) : (tensor<8x8xf32>) -> tensor<4x2xf32>
    %1 = call @xla.sdy.manual_computation_body(%0) {mhlo.frontend_attributes = {xla.sdy.in_shardings = "#sdy.sharding_per_value<[<@mesh, [{\22x\22}, {\22y\22}]>]>", xla.sdy.manual_axes = "#sdy<manual_axes{\22x\22, \22y\22}>", xla.sdy.out_shardings = "#sdy.sharding_per_value<[<@mesh, [{\22x\22}, {\22y\22}]>]>"}} : (tensor<4x2xf32>) -> tensor<4x2xf32>
    %2 = stablehlo.custom_call @xla.sdy.LocalToGlobalShape(%1) : (tensor<4x2xf32>) -> tensor<8x8xf32>
    return %2 : tensor<8x8xf32>
  }
  func.func private @xla.sdy.manual_computation_body(%arg0: tensor<4x2xf32>) -> tensor<4x2xf32> {
    %0 = "stablehlo.all_reduce"(%arg0) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 0>, replica_groups = dense<[[0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>, use_global_device_ids}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = stablehlo.add %a, %b : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) : (tensor<4x2xf32>) -> tensor<4x2xf32>
    return %0 : tensor<4x2xf32>
  }
}
"""


def _round_trip_form(_):
    # serialized Shardy: the manual computation as custom calls around a body function
    program = shlo2jax.load(_ROUND_TRIP)
    x = _args((8, 8))[0]
    got = program(x)
    # psum over y: within each row block of devices, the sum of the four column blocks
    blocks = x.reshape(2, 4, 4, 2).sum(axis=2, keepdims=True)
    np.testing.assert_array_equal(np.asarray(got),
                                  np.broadcast_to(blocks, (2, 4, 4, 2)).reshape(8, 8))
    assert tuple(got.sharding.spec) == ("x", "y"), got.sharding
    assert got.sharding.mesh.axis_names == ("x", "y"), got.sharding


def _annotated_program(_):
    program = shlo2jax.load(_ANNOTATED)
    x = _args((8, 4))[0]
    got = program(x)
    np.testing.assert_array_equal(np.asarray(got), 2 * x)
    assert tuple(got.sharding.spec) in ((None, "y"),), got.sharding


def _inside_a_jit(partitioner):
    # a loaded sharded function is a traceable JAX function
    import jax
    from jax import export
    from jax.sharding import NamedSharding, PartitionSpec as P
    mesh = _mesh()
    fn = _shard_map_fn(lambda a: jax.lax.psum(a, "x"), P("x", "y"), P(None, "y"), (P("x", "y"),))
    jax.config.update("jax_use_shardy_partitioner", partitioner == "shardy")
    loaded = shlo2jax.load(export.export(fn)(jax.ShapeDtypeStruct((8, 8), np.float32)))
    x = _args((8, 8))[0]
    got = jax.jit(lambda v: loaded.entry(v) + 1,
                  in_shardings=NamedSharding(mesh, P("x", "y")))(x)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(fn(x)) + 1)


def _make_mesh_checks():
    checks = {}
    for name, fn in [("collectives", _collectives), ("psum_scatter_axis_index",
                                                     _psum_scatter_and_axis_index),
                     ("jit_shardings", _jit_shardings), ("partial_manual", _partial_manual),
                     ("inside_a_jit", _inside_a_jit)]:
        for partitioner in ("gspmd", "shardy"):
            checks[f"{name}[{partitioner}]"] = (fn, partitioner)
    checks["round_trip_form"] = (_round_trip_form, None)
    checks["annotated_program"] = (_annotated_program, None)
    return checks


_MESH_CHECKS = _make_mesh_checks()


def _child_main():
    import jax
    assert len(jax.devices()) == 8
    multidevice.report(multidevice.run_checks(
        (name, functools.partial(fn, partitioner))
        for name, (fn, partitioner) in _MESH_CHECKS.items()))


@pytest.fixture(scope="module")
def mesh_results():
    return multidevice.run_child(__file__)


@pytest.mark.xdist_group("sharding_mesh")
@pytest.mark.slow
@pytest.mark.parametrize("check", sorted(_MESH_CHECKS))
def test_on_a_2x4_mesh(mesh_results, check):
    assert mesh_results.get(check) == "ok", mesh_results.get(check)


if __name__ == "__main__" and "--child" in sys.argv:
    _child_main()
