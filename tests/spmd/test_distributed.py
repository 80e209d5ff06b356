"""Sharded exports and run_spmd grids across processes (`jax.distributed`).

Three kinds of child process, each re-running this file as a script:

* `--reference DIR` (one process, 8 host CPU devices): exports each case's jitted
  function with `jax.export` (GSPMD and Shardy), writes the serialized artifact, its
  inputs, the producer's outputs and gradients, and the translation's outputs and
  gradients on the 8 devices of this one process.
* `--worker ID PORT DIR` (two of them, 4 host CPU devices each, joined by
  `jax.distributed.initialize` over gloo): loads the same artifacts and runs them on the
  8 global devices, forward and `jax.grad`, and runs the producer itself there too (the
  artifact's `Exported.call`, with its VJP); the global results are gathered with
  `multihost_utils.process_allgather` and written per worker. They also run a 2x4
  `run_spmd` grid.
* The test (this process, numpy only) compares them: the translation on one process
  against the producer, and each worker's results against the one-process run and
  against the producer on the same processes.

All cases run in one reference process and one pair of workers (starting jax is most
of the cost on a small machine). A jaxlib without gloo CPU collectives skips the
multi-process checks, saying so; on Linux, whose jaxlib wheels ship gloo, that skip
fails `test_the_processes_ran_here` instead.
"""

import json
import os
import pathlib
import re
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("distributed")]

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
WORKERS = 2
DEVICES_PER_WORKER = 4
TIMEOUT = 240  # seconds for each stage (the workers wait for each other)
# The cases whose export names its collectives' groups by mesh axes
# (`#stablehlo.replica_group_mesh_axes`: jax >= 0.12 writes them for a Shardy shard_map) on a
# mesh of several axes, listed by the reference run; across processes they are a known
# failure (KNOWN_FAILURE).
KNOWN_FAILURES_FILE = "mesh_axes_cases.json"
KNOWN_FAILURE = (
    "known failure: jit(grad) of a Shardy shard_map on a 2x4 mesh whose collectives name mesh "
    "axes (jax >= 0.12 exports), called on global arrays placed by the program's shardings, "
    "fails in jax's output-sharding recovery (IndivisibleError: shape [2, 4] against the 1x8 "
    "process-grid mesh the manual region's shard_map runs on); one process given host arrays "
    "runs it, and so does a one-axis mesh (pmap)")


# ---------------------------------------------------------------- the cases (producer side)

def _mesh():
    import jax
    return jax.make_mesh((2, 4), ("x", "y"), axis_types=(jax.sharding.AxisType.Auto,) * 2)


def _jit_shardings():
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec as P
    mesh = _mesh()

    def f(x, w):
        y = jax.lax.with_sharding_constraint(x * 2, NamedSharding(mesh, P("y", None)))
        return jnp.tanh(y @ w), jnp.sin(x).sum(axis=0)
    fn = jax.jit(f, in_shardings=(NamedSharding(mesh, P("x", "y")),
                                  NamedSharding(mesh, P(None, "x"))),
                 out_shardings=(NamedSharding(mesh, P("y", "x")), NamedSharding(mesh, P())))
    return fn, [(8, 8), (8, 4)]


def _shard_map_collectives():
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec as P
    mesh = _mesh()

    def body(a, b):
        s = jax.lax.psum(a * b, "y")
        g = jax.lax.all_gather(jnp.sin(a), "x", tiled=True)
        p = jax.lax.ppermute(a * a, "y", [(i, (i + 1) % 4) for i in range(4)])
        return s + p, g
    f = jax.shard_map(body, mesh=mesh, in_specs=(P("x", "y"), P("x", "y")),
                      out_specs=(P("x", "y"), P(None, "y")), check_vma=False)
    fn = jax.jit(f, in_shardings=(NamedSharding(mesh, P("x", "y")),) * 2)
    return fn, [(8, 16), (8, 16)]


def _shard_map_scatter():
    import jax
    from jax.sharding import NamedSharding, PartitionSpec as P
    mesh = _mesh()

    def body(a, b):
        r = jax.lax.psum_scatter(a * a, ("x", "y"), scatter_dimension=0, tiled=True)
        t = jax.lax.all_to_all(b, "y", 0, 1, tiled=True)
        i = jax.lax.axis_index("y").astype(b.dtype) + 10 * jax.lax.axis_index("x")
        return r, t * i
    f = jax.shard_map(body, mesh=mesh, in_specs=(P(), P("x", "y")),
                      out_specs=(P(("x", "y")), P("x", "y")), check_vma=False)
    fn = jax.jit(f, in_shardings=(NamedSharding(mesh, P()), NamedSharding(mesh, P("x", "y"))))
    return fn, [(16, 3), (8, 16)]


def _partial_manual():
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec as P
    mesh = _mesh()

    def body(a):  # manual over x only; y is left to the compiler
        return jax.lax.psum(jnp.tanh(a), "x") * 2
    f = jax.shard_map(body, mesh=mesh, in_specs=P("x"), out_specs=P(), axis_names={"x"},
                      check_vma=False)
    fn = jax.jit(f, in_shardings=NamedSharding(mesh, P("x", "y")))
    return fn, [(8, 8)]


def _pmap():
    # jax 0.10 lowers pmap to a shard_map over an axis of all 8 devices; the export leaves
    # the argument's sharding open
    import jax
    import jax.numpy as jnp
    f = jax.pmap(lambda a: jax.lax.psum(jnp.sin(a), "i") * a, axis_name="i")
    return jax.jit(f), [(8, 3)]


CASES = {}
for _name, _make in [("jit_shardings", _jit_shardings),
                     ("shard_map_collectives", _shard_map_collectives),
                     ("shard_map_scatter", _shard_map_scatter),
                     ("partial_manual", _partial_manual),
                     ("pmap", _pmap)]:
    for _partitioner in ("gspmd", "shardy"):
        CASES[f"{_name}[{_partitioner}]"] = (_make, _partitioner)


# A replicas x partitions grid for shlo2jax.spmd.run_spmd. No producer writes such programs
# any more (jax 0.10's pmap lowers to a shard_map over partitions, a sharded program like the
# cases above): this one is written by hand, as the StableHLO interpreter's run_parallel tests
# are, and checked against the spec's semantics (`_grid_expected`).
GRID = """
module @grid attributes {mhlo.num_replicas = 2 : i32, mhlo.num_partitions = 4 : i32} {
  func.func public @main(%x: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x12xf32>, tensor<2x3xf32>) {
    %sum = "stablehlo.all_reduce"(%x) ({
      ^bb0(%a: tensor<f32>, %b: tensor<f32>):
        %s = stablehlo.add %a, %b : tensor<f32>
        stablehlo.return %s : tensor<f32>
    }) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
    %sq = stablehlo.multiply %x, %x : tensor<2x3xf32>
    %g = "stablehlo.all_gather"(%sq) {all_gather_dim = 1 : i64,
         replica_groups = dense<[[0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>,
         channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>,
         use_global_device_ids} : (tensor<2x3xf32>) -> tensor<2x12xf32>
    %sin = stablehlo.sine %x : tensor<2x3xf32>
    %p = "stablehlo.collective_permute"(%sin) {
         source_target_pairs = dense<[[0, 1], [1, 2], [2, 3], [3, 0]]> : tensor<4x2xi64>,
         channel_handle = #stablehlo.channel_handle<handle = 2, type = 1>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
    return %sum, %g, %p : tensor<2x3xf32>, tensor<2x12xf32>, tensor<2x3xf32>
  }
}"""
GRID_SHAPE = (2, 4)


def _grid_inputs():
    return [np.cos(np.arange(6, dtype=np.float32) + 6 * k).reshape(2, 3) for k in range(8)]


def _grid_expected(xs):
    """Each process's results by the spec: all_reduce over the replicas of a partition
    (cross_replica), all_gather over the partitions of a replica (flattened ids), and
    collective_permute from the previous partition (cross_partition)."""
    R, P = GRID_SHAPE
    out = []
    for k in range(R * P):
        r, p = divmod(k, P)
        out.append([sum(xs[q * P + p] for q in range(R)),
                    np.concatenate([xs[r * P + q] ** 2 for q in range(P)], axis=1),
                    np.sin(xs[r * P + (p - 1) % P])])
    return out


def _grid_forward_and_grad(function, xs):
    """run_spmd's outputs (flat, process-major) and the gradient of a weighted sum of
    them with respect to every process's argument."""
    import jax
    from shlo2jax import spmd
    R, P = GRID_SHAPE

    def run(xs):
        return [v for outs in spmd.run_spmd(function, [[x] for x in xs], R, P) for v in outs]
    grads = jax.jit(jax.grad(_loss(lambda *xs: tuple(run(list(xs)))),
                             argnums=tuple(range(len(xs)))))(*xs)
    return run(xs), list(grads)


def _loss(fn):
    """A scalar of all of fn's results, weighted so that every gradient entry differs."""
    import jax.numpy as jnp

    def loss(*args):
        outs = fn(*args)
        outs = outs if isinstance(outs, tuple) else (outs,)
        total = 0.0
        for k, o in enumerate(outs):
            weights = jnp.cos(k + jnp.arange(o.size, dtype=o.dtype)).reshape(o.shape)
            total = total + jnp.sum(o * weights)
        return total
    return loss


def _forward_and_grad(fn, args):
    import jax
    outs = fn(*args)
    outs = outs if isinstance(outs, tuple) else (outs,)
    grads = jax.jit(jax.grad(_loss(fn), argnums=tuple(range(len(args)))))(*args)
    return list(outs), list(grads)


def _save(path, outs, grads, gather=np.asarray):
    arrays = {f"out{k}": gather(o) for k, o in enumerate(outs)}
    arrays.update({f"grad{k}": gather(g) for k, g in enumerate(grads)})
    np.savez(path, **arrays)


# ---------------------------------------------------------------- child processes

def _mesh_of_several_axes(module_text: str) -> bool:
    """Whether the module's `sdy.mesh` has two or more axes of more than one device (which
    the manual region's flat process-grid mesh cannot express)."""
    meshes = re.findall(r"sdy\.mesh @\w+ = <\[([^\]]*)\]", module_text)
    return any(sum(int(n) > 1 for n in re.findall(r'"\w+"=(\d+)', axes)) >= 2
               for axes in meshes)


def _reference_main(out_dir: pathlib.Path):
    """One process, 8 devices: the artifacts, the producer's results and the
    translation's."""
    import jax
    from jax import export
    import shlo2jax
    assert len(jax.devices()) == 8, jax.devices()
    rng = np.random.default_rng(0)
    report, mesh_axes_cases = {}, []
    for name, (make, partitioner) in CASES.items():
        jax.config.update("jax_use_shardy_partitioner", partitioner == "shardy")
        fn, shapes = make()
        args = [rng.integers(-4, 5, s).astype(np.float32) / 4 for s in shapes]
        exported = export.export(fn)(*[jax.ShapeDtypeStruct(a.shape, a.dtype) for a in args])
        marker = "sdy.mesh" if partitioner == "shardy" else "mhlo.sharding"
        text = exported.mlir_module()
        assert marker in text, name
        if "replica_group_mesh_axes" in text and _mesh_of_several_axes(text):
            mesh_axes_cases.append(name)
        # with the producer's VJP, so the workers can run the producer itself
        (out_dir / f"{name}.export").write_bytes(exported.serialize(vjp_order=1))
        np.savez(out_dir / f"{name}.inputs.npz", *args)
        _save(out_dir / f"{name}.producer.npz", *_forward_and_grad(fn, args))
        # the translation's own gradients, not the VJP the artifact carries
        program = shlo2jax.load(exported.serialize(), producer_vjp=False)
        _save(out_dir / f"{name}.one_process.npz", *_forward_and_grad(program.entry, args))
        report[name] = "ok"
    (out_dir / KNOWN_FAILURES_FILE).write_text(json.dumps(mesh_axes_cases))
    jax.config.update("jax_use_shardy_partitioner", True)
    _save(out_dir / "grid.one_process.npz",
          *_grid_forward_and_grad(shlo2jax.load(GRID).entry, _grid_inputs()))
    report["grid"] = "ok"
    print("RESULTS" + json.dumps(report), flush=True)


def _worker_main(process_id: int, port: int, out_dir: pathlib.Path):
    """One of the processes of a `jax.distributed` run: the same artifacts on the 8
    global devices (4 of them this process's)."""
    import jax
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(coordinator_address=f"localhost:{port}",
                               num_processes=WORKERS, process_id=process_id)
    try:
        devices = jax.devices()  # the CPU client starts here, with its collectives
    except Exception as e:  # noqa: BLE001 - only a jaxlib without gloo is a skip
        if "gloo" not in str(e).lower():
            raise
        print(f"SKIP this jaxlib has no gloo CPU collectives ({type(e).__name__}: {e})",
              flush=True)
        return
    from jax.experimental import multihost_utils
    import shlo2jax
    assert jax.process_count() == WORKERS and len(devices) == 8, devices
    assert len(jax.local_devices()) == DEVICES_PER_WORKER, jax.local_devices()

    def gather(x):  # a global array's value (a host array is already one)
        return x if isinstance(x, np.ndarray) else np.asarray(
            multihost_utils.process_allgather(x, tiled=True))
    report = {}
    known = set(json.loads((out_dir / KNOWN_FAILURES_FILE).read_text()))
    for name in CASES:
        if name not in known:
            _worker_case(name, out_dir, process_id, gather)
            report[name] = "ok"
            continue
        try:  # (both processes fail alike, at the gradient's compile, before any collective)
            _worker_case(name, out_dir, process_id, gather)
            report[name] = "ok"
        except Exception as e:  # noqa: BLE001 - a known failure, reported to the test
            report[name] = f"known failure: {type(e).__name__}: {str(e).splitlines()[0][:200]}"
    # every process passes the whole grid's arguments and reads every process's results
    outs, grads = _grid_forward_and_grad(shlo2jax.load(GRID).entry, _grid_inputs())
    assert all(o.is_fully_replicated and not o.is_fully_addressable for o in outs)
    outs = [np.asarray(o) for o in outs]  # readable here without gathering
    _save(out_dir / f"grid.worker{process_id}.npz", outs, grads, gather)
    report["grid"] = "ok"
    jax.distributed.shutdown()
    print("RESULTS" + json.dumps(report), flush=True)


def _worker_case(name, out_dir, process_id, gather):
    """One case on the processes: the translation's results and gradients, and the
    producer's, saved for the tests."""
    import jax
    from jax import export
    from jax.sharding import NamedSharding, PartitionSpec
    import shlo2jax
    artifact = (out_dir / f"{name}.export").read_bytes()
    fn = shlo2jax.load(artifact, producer_vjp=False).entry
    with np.load(out_dir / f"{name}.inputs.npz") as data:
        host = [data[f"arr_{k}"] for k in range(len(data.files))]
    # global arrays, each process providing the blocks of its own devices (an argument
    # whose sharding the program leaves open goes as the host array)
    args = [x if s is None else
            jax.make_array_from_callback(x.shape, s, lambda index, x=x: x[index])
            for x, s in zip(host, fn.in_shardings)]
    outs, grads = _forward_and_grad(fn, args)
    assert not any(o.is_fully_addressable for o in outs + grads)  # they span both
    # the same function given host arrays: the program places them itself
    outs_from_host = fn(*host)
    outs_from_host = outs_from_host if isinstance(outs_from_host, tuple) else (outs_from_host,)
    for a, b in zip(outs, outs_from_host):
        np.testing.assert_array_equal(gather(a), gather(b))
    if name == next(iter(CASES)):
        # differentiated outside jit, op by op, as the README's example does (once: each
        # op compiles on its own)
        eager = jax.grad(_loss(fn), argnums=tuple(range(len(args))))(*args)
        for a, b in zip(grads, eager):
            np.testing.assert_allclose(gather(b), gather(a), rtol=1e-6, atol=1e-6)
    _save(out_dir / f"{name}.worker{process_id}.npz", outs, grads, gather)
    # the producer itself across the processes (jax runs the artifact, its VJP for grad;
    # Exported.call wants every argument on the devices: open ones replicated)
    placed = [jax.device_put(a, NamedSharding(fn.mesh, PartitionSpec()))
              if isinstance(a, np.ndarray) else a for a in args]
    _save(out_dir / f"{name}.producer.worker{process_id}.npz",
          *_forward_and_grad(export.deserialize(bytearray(artifact)).call, placed), gather)


# ---------------------------------------------------------------- the test

def _env(devices: int) -> dict:
    path = os.pathsep.join([str(ROOT), str(HERE)] + [
        p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
    return dict(os.environ, XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}",
                JAX_PLATFORMS="cpu", PYTHONPATH=path)


_ALL_OK = dict({name: "ok" for name in CASES}, grid="ok")


def _known(out_dir) -> set:
    """The cases that are known failures across processes on this jax (see KNOWN_FAILURE)."""
    return set(json.loads((out_dir / KNOWN_FAILURES_FILE).read_text()))


def _as_expected(report, known) -> bool:
    return report is not None and report.keys() == _ALL_OK.keys() and all(
        value == "ok" or (name in known and value.startswith("known failure"))
        for name, value in report.items())


def _worker_results(runs, case, worker):
    """The path of a worker's results for `case`: a known failure xfails here, strictly
    (a known failure that passes fails the test: take it off the list)."""
    path = runs / f"{case}.worker{worker}.npz"
    if case in _known(runs):
        assert not path.exists(), (f"{case} now runs across processes: the known failure no "
                                   f"longer holds ({KNOWN_FAILURE})")
        pytest.xfail(KNOWN_FAILURE)
    return path


def _tail(text: str, n: int = 3000) -> str:
    return text[-n:] if text else "(empty)"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def _results(stdout: str):
    lines = [ln for ln in stdout.splitlines() if ln.startswith("RESULTS")]
    return json.loads(lines[-1][len("RESULTS"):]) if lines else None


def _run_reference(out_dir):
    proc = subprocess.run([sys.executable, __file__, "--reference", str(out_dir)],
                          env=_env(8), capture_output=True, text=True, timeout=TIMEOUT)
    report = _results(proc.stdout)
    assert proc.returncode == 0 and report == _ALL_OK, (
        f"the one-process reference run failed (exit {proc.returncode}):\n"
        f"{_tail(proc.stdout)}\n{_tail(proc.stderr)}")


def _run_workers(out_dir):
    port = _free_port()
    procs = [subprocess.Popen([sys.executable, __file__, "--worker", str(k), str(port),
                               str(out_dir)], env=_env(DEVICES_PER_WORKER),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for k in range(WORKERS)]
    deadline = time.monotonic() + TIMEOUT
    outputs = []
    for proc in procs:
        try:
            outputs.append(proc.communicate(timeout=max(1.0, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            for p in procs:
                if p.poll() is None:
                    p.kill()
            outputs.append(proc.communicate())
    skips = [ln[len("SKIP "):] for stdout, _ in outputs for ln in stdout.splitlines()
             if ln.startswith("SKIP ")]
    if len(skips) == WORKERS and all(proc.returncode == 0 for proc in procs):
        return skips[0]
    failures = []
    for k, (proc, (stdout, stderr)) in enumerate(zip(procs, outputs)):
        if proc.returncode != 0 or not _as_expected(_results(stdout), _known(out_dir)):
            failures.append(f"--- worker {k} (exit {proc.returncode}):\n{_tail(stdout)}\n"
                            f"--- worker {k} stderr:\n{_tail(stderr)}")
    if failures:
        # both workers' output: one failing usually leaves the other waiting
        for k, (stdout, stderr) in enumerate(outputs):
            if all(f"worker {k} " not in f for f in failures):
                failures.append(f"--- worker {k} stderr:\n{_tail(stderr)}")
        pytest.fail(f"the {WORKERS}-process run failed:\n" + "\n".join(failures))
    return None


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The directory of the artifacts and the one-process results."""
    out_dir = tmp_path_factory.mktemp("distributed")
    _run_reference(out_dir)
    return out_dir


@pytest.fixture(scope="module")
def worker_outcome(reference):
    """(the directory, now with each worker's results; why the workers skipped, or None)."""
    return reference, _run_workers(reference)


@pytest.fixture
def runs(worker_outcome):
    out_dir, skipped = worker_outcome
    if skipped:
        pytest.skip(skipped)
    return out_dir


def test_the_processes_ran_here(worker_outcome):
    # jaxlib's Linux wheels ship gloo: skipping the multi-process checks must not be the
    # normal path on the machines this project runs on (CI and development are Linux)
    if not sys.platform.startswith("linux"):
        pytest.skip(f"gloo may be missing from jaxlib on {sys.platform}")
    assert worker_outcome[1] is None, worker_outcome[1]


def _load(path):
    with np.load(path) as data:
        return {k: data[k] for k in data.files}


def _assert_same_results(got_path, want_path, rtol, what):
    want, got = _load(want_path), _load(got_path)
    assert want.keys() == got.keys()
    for key in want:
        np.testing.assert_allclose(got[key], want[key], rtol=rtol, atol=1e-6,
                                   err_msg=f"{what} {key}")


@pytest.mark.parametrize("case", sorted(CASES))
def test_one_process_translation_matches_the_producer(reference, case):
    _assert_same_results(reference / f"{case}.one_process.npz",
                         reference / f"{case}.producer.npz", 1e-5, case)


@pytest.mark.parametrize("worker", range(WORKERS))
@pytest.mark.parametrize("case", sorted(CASES))
def test_processes_agree_with_one_process(runs, case, worker):
    _assert_same_results(_worker_results(runs, case, worker), runs / f"{case}.one_process.npz",
                         1e-6, f"{case} (worker {worker})")


@pytest.mark.parametrize("worker", range(WORKERS))
@pytest.mark.parametrize("case", sorted(CASES))
def test_processes_agree_with_the_producer_on_the_processes(runs, case, worker):
    _assert_same_results(_worker_results(runs, case, worker),
                         runs / f"{case}.producer.worker{worker}.npz", 1e-5,
                         f"{case} (worker {worker})")


def test_the_grid_on_one_process_follows_the_spec(reference):
    one = _load(reference / "grid.one_process.npz")
    expected = [v for outs in _grid_expected(_grid_inputs()) for v in outs]
    for k, e in enumerate(expected):
        np.testing.assert_allclose(one[f"out{k}"], e, rtol=1e-6, atol=1e-6,
                                   err_msg=f"output {k} (process {k // 3})")


@pytest.mark.parametrize("worker", range(WORKERS))
def test_the_grid_across_processes_agrees_with_one_process(runs, worker):
    one = _load(runs / "grid.one_process.npz")
    many = _load(runs / f"grid.worker{worker}.npz")
    assert one.keys() == many.keys() and len(one) == 8 * 3 + 8
    for key in one:
        np.testing.assert_allclose(many[key], one[key], rtol=1e-6, atol=1e-6,
                                   err_msg=f"grid {key} (worker {worker})")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--reference"]:
        _reference_main(pathlib.Path(sys.argv[2]))
    elif sys.argv[1:2] == ["--worker"]:
        _worker_main(int(sys.argv[2]), int(sys.argv[3]), pathlib.Path(sys.argv[4]))
