"""Replicated and partitioned HLO (issue 29) on 8 host devices: the HLO jax writes for a jit
with in/out shardings over a 4x2 mesh (before XLA's SPMD partitioner: a sharded program;
after: the program of one partition, run as a grid by `run_spmd`), for a pmap (a shard_map
with a psum), hand-reduced async collective pairs (`all-reduce-start`/`-done`, ...) on a grid,
and a `replica_count=4` module. Values against jax running the original function.

XLA fixes the host device count when jax is imported, so the checks run in a child process
(tests/multidevice.py)."""

import os
import sys

import numpy as np
import pytest

HLO_ASYNC = """HloModule async_pairs, num_partitions=4

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY main {
  p0 = f32[3] parameter(0)
  ars = f32[3] all-reduce-start(p0), channel_id=1, replica_groups={{0,1},{2,3}}, use_global_device_ids=true, to_apply=add
  ard = f32[3] all-reduce-done(ars)
  ags = (f32[3], f32[12]) all-gather-start(p0), channel_id=2, replica_groups={{0,1,2,3}}, dimensions={0}, use_global_device_ids=true
  agd = f32[12] all-gather-done(ags)
  cps = (f32[3], f32[3], u32[], u32[]) collective-permute-start(p0), channel_id=3, source_target_pairs={{0,1},{1,2},{2,3},{3,0}}
  cpd = f32[3] collective-permute-done(cps)
  ROOT t = (f32[3], f32[12], f32[3]) tuple(ard, agd, cpd)
}
"""

HLO_REPLICATED = """HloModule psum_of_replicas, replica_count=4

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY main {
  p0 = f32[2] parameter(0)
  s = f32[2] sine(p0)
  ROOT r = f32[2] all-reduce(s), replica_groups={}, to_apply=add
}
"""


def _mesh():
    import jax
    from jax.sharding import Mesh
    return Mesh(np.array(jax.devices()).reshape(4, 2), ("x", "y"))


def _sharded_jit():
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec as P
    mesh = _mesh()

    def f(w, x):
        return jnp.tanh(x @ w).sum(axis=0)
    jitted = jax.jit(f, in_shardings=(NamedSharding(mesh, P(None, "y")),
                                      NamedSharding(mesh, P("x", None))),
                     out_shardings=NamedSharding(mesh, P("y")))
    r = np.random.RandomState(0)
    return f, jitted, r.randn(8, 4).astype("f4"), r.randn(16, 8).astype("f4")


def _close(a, b):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-5)


def _jit_with_shardings_before_partitioning():
    import jax
    import shlo2jax
    f, jitted, w, x = _sharded_jit()
    fn = shlo2jax.load(jitted.lower(w, x).as_text(dialect="hlo"))["main"]
    assert fn.is_sharded and dict(fn.mesh.shape) == {"x": 4, "y": 2}
    assert [tuple(s.spec) for s in fn.in_shardings] == [(None, "y"), ("x", None)]
    _close(fn(w, x), f(w, x))
    grads = jax.grad(lambda w, x: fn(w, x).sum(), (0, 1))(w, x)
    for got, want in zip(grads, jax.grad(lambda w, x: f(w, x).sum(), (0, 1))(w, x)):
        _close(got, want)


def _jit_after_partitioning_runs_as_a_grid():
    import shlo2jax
    from shlo2jax.spmd import run_spmd
    f, jitted, w, x = _sharded_jit()
    compiled = jitted.lower(w, x).compile()
    text = compiled.as_text()
    assert "num_partitions=8" in text.split("\n", 1)[0] and "_spmd" in text
    # the optimized HloModuleProto too (what an .hlo.pb after_optimizations dump holds)
    proto = compiled.runtime_executable().hlo_modules()[0].as_serialized_hlo_module_proto()
    fn = shlo2jax.load(proto)["main"]
    assert [a.shape for a in fn.in_avals] == [(8, 2), (4, 8)] and fn.in_shardings == (None, None)
    fn = shlo2jax.load(text)["main"]
    # the program of one partition: per-partition shapes, the global shardings dropped
    assert [a.shape for a in fn.in_avals] == [(8, 2), (4, 8)] and fn.in_shardings == (None, None)
    # partition k is device k of the 4x2 mesh: w's columns by k % 2, x's rows by k // 2
    args = [[w[:, (k % 2) * 2:(k % 2) * 2 + 2], x[(k // 2) * 4:(k // 2) * 4 + 4]] for k in range(8)]
    outs = run_spmd(fn, args, num_partitions=8)
    want = np.asarray(f(w, x))
    for k in range(8):
        _close(outs[k][0], want[(k % 2) * 2:(k % 2) * 2 + 2])
    # a plain call is one process: its all-reduce over 4 partitions is refused at load,
    # naming the instruction and run_spmd
    [(name, where, why)] = fn.program.module.problems
    assert name == "stablehlo.all_reduce" and "run_spmd" in why, (name, where, why)
    try:
        fn(*args[0])
    except shlo2jax.UnsupportedError as e:
        assert "run_spmd" in str(e), e
    else:
        raise AssertionError("a plain call of a partitioned program ran")


_DUMPED = """
import numpy as np, jax, jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
mesh = Mesh(np.array(jax.devices()).reshape(4, 2), ("x", "y"))
f = lambda w, x: jnp.tanh(x @ w).sum(axis=0)
jax.jit(f, in_shardings=(NamedSharding(mesh, P(None, "y")), NamedSharding(mesh, P("x", None))),
        out_shardings=NamedSharding(mesh, P("y")))(np.ones((8, 4), "f4"), np.ones((16, 8), "f4"))
"""


def _dump_folder_of_a_sharded_jit():
    """`--xla_dump_to` of the same jit (its before_optimizations .hlo.pb, which has no header
    to say num_partitions=8: the shardings do; its after_optimizations .hlo.pb, whose entry
    `main.0_spmd` says it is partitioned)."""
    import subprocess
    import tempfile
    import shlo2jax
    from shlo2jax.spmd import run_spmd
    f, _, w, x = _sharded_jit()
    with tempfile.TemporaryDirectory() as folder:
        env = dict(os.environ, XLA_FLAGS=os.environ.get("XLA_FLAGS", "") +
                   f" --xla_dump_to={folder} --xla_dump_hlo_as_proto")
        subprocess.run([sys.executable, "-c", _DUMPED], env=env, check=True, timeout=300,
                       capture_output=True)
        fn = shlo2jax.load(folder, module="jit")["main"]
        assert fn.is_sharded
        _close(fn(w, x), f(w, x))
        [after] = [n for n in os.listdir(folder) if n.endswith("cpu_after_optimizations.hlo.pb")]
        fn = shlo2jax.load(os.path.join(folder, after))["main"]
    args = [[w[:, (k % 2) * 2:(k % 2) * 2 + 2], x[(k // 2) * 4:(k // 2) * 4 + 4]] for k in range(8)]
    outs = run_spmd(fn, args, num_partitions=8)
    _close(np.concatenate([outs[0][0], outs[1][0]]), f(w, x))


def _pmap_before_and_after_optimizations():
    import jax
    import jax.numpy as jnp
    import shlo2jax
    from shlo2jax.spmd import run_spmd
    pmapped = jax.pmap(lambda v, u: (jax.lax.psum(jnp.sin(v) * u, "i"), u * 2), axis_name="i")
    r = np.random.RandomState(1)
    v, u = r.randn(8, 3).astype("f4"), r.randn(8, 3).astype("f4")
    want = pmapped(v, u)
    lowered = pmapped.lower(v, u)
    # before: a shard_map (GlobalToLocalShape of both operands as one tuple, the body,
    # LocalToGlobalShape) over 8 devices
    fn = shlo2jax.load(lowered.as_text(dialect="hlo"))["main"]
    assert fn.is_sharded
    for got, expected in zip(fn(v, u), want):
        _close(got, expected)
    grads = jax.grad(lambda v, u: fn(v, u)[0].sum(), (0, 1))(v, u)
    for got, expected in zip(grads, jax.grad(lambda v, u: pmapped(v, u)[0].sum(), (0, 1))(v, u)):
        _close(got, expected)
    # after: one partition's program with its all-reduce, run as a grid
    fn = shlo2jax.load(lowered.compile().as_text())["main"]
    outs = run_spmd(fn, [[v[k:k + 1], u[k:k + 1]] for k in range(8)], num_partitions=8)
    for i in range(2):
        _close(np.concatenate([o[i] for o in outs]), want[i])


def _async_collective_pairs_on_a_grid():
    import shlo2jax
    from shlo2jax.spmd import run_spmd
    fn = shlo2jax.load(HLO_ASYNC)["main"]
    xs = [np.arange(3, dtype=np.float32) + 10 * k for k in range(4)]
    outs = run_spmd(fn, [[x] for x in xs], num_partitions=4)
    for k, (reduced, gathered, permuted) in enumerate(outs):
        pair = (k // 2) * 2
        _close(reduced, xs[pair] + xs[pair + 1])
        _close(gathered, np.concatenate(xs))
        _close(permuted, xs[(k - 1) % 4])


def _replicated_module():
    import shlo2jax
    from shlo2jax.spmd import run_spmd
    program = shlo2jax.load(HLO_REPLICATED)
    assert int(program.module.attrs["mhlo.num_replicas"]) == 4
    xs = [np.array([k, -k], np.float32) for k in range(4)]
    outs = run_spmd(program["main"], [[x] for x in xs], num_replicas=4)
    for out in outs:
        _close(out[0], np.sin(np.stack(xs)).sum(0))


CHECKS = {name[1:]: fn for name, fn in sorted(globals().items())
          if name.startswith("_") and callable(fn) and name not in ("_mesh", "_sharded_jit", "_close")
          and not name.startswith("__")}


@pytest.fixture(scope="module")
def results():
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import multidevice
    return multidevice.run_child(__file__)


@pytest.mark.slow
@pytest.mark.parametrize("check", sorted(CHECKS))
def test_on_8_host_devices(results, check):
    assert results.get(check) == "ok", results.get(check)


if __name__ == "__main__" and "--child" in sys.argv:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import multidevice
    multidevice.report(multidevice.run_checks(sorted(CHECKS.items())))
