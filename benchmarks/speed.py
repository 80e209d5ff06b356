"""Time to first result and translation throughput, side by side with `jax.export`.

    python benchmarks/speed.py [--small jax/mlp,jax/gru_scan,...]
                               [--large corpus,model_like,generated,sampler,climate]
                               [--first fold,climate,neural_ode] [--runs 5]
                               [--tree LABEL=PATH ...] [--json FILE]

Every figure comes from a fresh child process (as a user's notebook or script pays it), the
variants of one program run in alternation and each figure is the median over `--runs`
processes. Bytecode is cached (as in an installed package): the children write their `.pyc`
files under a temporary folder, and a warm-up child runs first. `--no-bytecode` runs them as
with PYTHONDONTWRITEBYTECODE=1 and an editable install (every shlo2jax module compiled from
source on import, ~0.15-0.2 s more: jax's own bytecode is in site-packages).

small: corpus artifacts (serialized `jax.export.Exported`), per variant
  import      `import shlo2jax` (for jax.export: `from jax import export`); `import jax`
              before it is common to both and not counted
  load        `shlo2jax.load(bytes)` / `jax.export.deserialize(bytes)`
  first       the first call on the entry's arguments, to its result (trace, lower, compile, run)
  total       import + load + first: the time to first result
  steady      median of 50 later calls
  ratio       total / jax.export's total
warm: the same, in one process that already ran a first program both ways (a notebook
  loading one more program): load and first call, jax's caches cleared before each
large: translation throughput: load + trace + lower to StableHLO text (XLA's compile left out),
  of what a first call compiles (the executable's jit), traced and lowered with the collector
  paused and the frame stack headroom a first call gives them (`gc after`: one full
  collection over what translating left, paid by a later collection),
  per variant, wall and CPU seconds (ops per CPU second: what a shared machine can compare;
  `read`, the CPU seconds of the load spent reading the input: parsing, the checks that keep
  malformed input from aborting the process, a VHLO artifact's conversion); `static ops` the module's ops (nested regions included), `inlined ops` those a
  copy with every func.call inlined would have (what a translation that traced every call
  site again would trace). jax.export's figure is deserialize + trace + lower of `exp.call`
  (it does not translate: it embeds the module), for the programs that are artifacts.
  corpus      the largest corpus artifacts (tests/corpus/**/exported.bin by size)
  model_like  a generated model: 48 blocks (4 distinct block functions) called through
              func.call, per-layer weights as 64 KiB dense constants, and in every block a
              while loop whose body holds a case, one branch calling the shared norm function
  generated   benchmarks/bench.py's generated program (150 functions of 410 ops, 250 calls)
  sampler     benchmarks/bench.py's diffusion sampler (50,540 ops), exported with jax.export
              when the benchmark runs
  climate     benchmarks/bench.py's climate-style model (51,000 ops, 105 while loops), exported
              likewise (not in the default list; so are `fold`, `neural_ode` and any other
              of bench.py's real programs, by name)

first: time to first result of large programs: load + the first call (trace, lower, XLA's
  compile and the run, to its result), wall seconds, beside `jax.export.deserialize` + its
  first call (XLA compiling the module as exported), on the same arguments (deterministic
  normal values, a tenth in scale; integers 0); `ratio` is shlo2jax's total over jax.export's.
  Names as for `--large` (bench.py's real programs); none by default, as each compile takes
  10-60 s (`--first fold,climate,neural_ode`)

`--tree LABEL=PATH` adds a shlo2jax variant imported from another checkout (e.g. a baseline
made with `git archive <commit> | tar -x -C PATH`), run in alternation with this checkout's.
The machine may be shared: compare the variants of one run, not runs made at other times.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib.abc
import importlib.util
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "corpus"
SMALL = ["jax/mlp", "jax/gru_scan", "flax/nnx_mlp", "torch/nn_gelu_mlp", "keras/keras_cnn"]
LARGE = ["corpus", "model_like", "generated", "sampler"]
STEADY_CALLS = 50


# ------------------------------------------------------------------ generated programs

def model_like_module(layers: int = 48, variants: int = 4, seq: int = 32, d: int = 64,
                      ff: int = 256, micro: int = 300, branch_ops: int = 120, trips: int = 3,
                      seed: int = 0) -> str:
    """MLIR text of a program shaped like an exported model (see the module docstring)."""
    import numpy as np
    rng = np.random.default_rng(seed)

    def f32(*shape):
        return "tensor<" + "".join(f"{n}x" for n in shape) + "f32>"
    X, H, G, S, i32 = f32(seq, d), f32(seq, ff), f32(d), f32(seq), "tensor<i32>"
    lines = ["module @model_like {",
             f"  func.func private @norm(%x: {X}, %g: {G}) -> {X} {{",
             "    %z = stablehlo.constant dense<0.0> : tensor<f32>",
             f"    %sq = stablehlo.multiply %x, %x : {X}",
             "    %s = stablehlo.reduce(%sq init: %z) applies stablehlo.add across dimensions = [1]"
             f" : ({X}, tensor<f32>) -> {S}",
             f"    %n = stablehlo.constant dense<{1.0 / d}> : {S}",
             f"    %m = stablehlo.multiply %s, %n : {S}",
             f"    %e = stablehlo.constant dense<1.0e-05> : {S}",
             f"    %me = stablehlo.add %m, %e : {S}",
             f"    %r = stablehlo.rsqrt %me : {S}",
             f"    %rb = stablehlo.broadcast_in_dim %r, dims = [0] : ({S}) -> {X}",
             f"    %gb = stablehlo.broadcast_in_dim %g, dims = [1] : ({G}) -> {X}",
             f"    %y = stablehlo.multiply %x, %rb : {X}",
             f"    %o = stablehlo.multiply %y, %gb : {X}",
             f"    return %o : {X}", "  }"]
    binary = ["stablehlo.add", "stablehlo.multiply", "stablehlo.subtract", "stablehlo.maximum"]
    unary = ["stablehlo.tanh", "stablehlo.logistic", "stablehlo.sine", "stablehlo.exponential"]

    def chain(prefix, start, other, typ, count, offset, indent="    "):
        out, prev = [], start
        for i in range(count):
            name, k = f"%{prefix}{i}", (i + offset) % 7
            if k == 3:
                out.append(f"{indent}{name} = {unary[(i + offset) % 4]} {prev} : {typ}")
            else:
                out.append(f"{indent}{name} = {binary[(i + offset) % 4]} {prev}, {other} : {typ}")
                if (i + offset) % 4 == 3:  # values stay bounded
                    out.append(f"{indent}{name}t = stablehlo.tanh {name} : {typ}")
                    name += "t"
            prev = name
        return out, prev

    for v in range(variants):
        lines.append(f"  func.func private @block{v}(%x: {X}, %w1: {f32(d, ff)}, "
                     f"%w2: {f32(ff, d)}, %g: {G}) -> {X} {{")
        lines.append(f"    %h = func.call @norm(%x, %g) : ({X}, {G}) -> {X}")
        lines.append(f"    %a = stablehlo.dot_general %h, %w1, contracting_dims = [1] x [0] : "
                     f"({X}, {f32(d, ff)}) -> {H}")
        body, last = chain("m", "%a", "%a", H, micro, v)
        lines += body
        lines += [f"    %b = stablehlo.dot_general {last}, %w2, contracting_dims = [1] x [0] : "
                  f"({H}, {f32(ff, d)}) -> {X}",
                  f"    %r = stablehlo.add %x, %b : {X}",
                  f"    %c0 = stablehlo.constant dense<0> : {i32}",
                  f"    %w:2 = stablehlo.while(%i = %c0, %s = %r) : {i32}, {X}",
                  "    cond {",
                  f"      %n = stablehlo.constant dense<{trips}> : {i32}",
                  f"      %p = stablehlo.compare LT, %i, %n, SIGNED : ({i32}, {i32}) -> tensor<i1>",
                  "      stablehlo.return %p : tensor<i1>",
                  "    } do {",
                  f"      %one = stablehlo.constant dense<1> : {i32}",
                  f"      %two = stablehlo.constant dense<2> : {i32}",
                  f"      %k = stablehlo.remainder %i, %two : {i32}",
                  '      %sel = "stablehlo.case"(%k) ({']
        first, last0 = chain("p", "%s", "%r", X, branch_ops, v + 1, " " * 8)
        lines += first + [f"        stablehlo.return {last0} : {X}", "      }, {",
                          f"        %q = func.call @norm(%s, %g) : ({X}, {G}) -> {X}"]
        second, last1 = chain("q", "%q", "%s", X, branch_ops, v + 2, " " * 8)
        lines += second + [f"        stablehlo.return {last1} : {X}",
                           f"      }}) : ({i32}) -> {X}",
                           f"      %i1 = stablehlo.add %i, %one : {i32}",
                           f"      stablehlo.return %i1, %sel : {i32}, {X}",
                           "    }", f"    return %w#1 : {X}", "  }"]

    def constant(name, shape, scale):
        data = (rng.standard_normal(shape) * scale).astype("<f4").tobytes().hex().upper()
        return f'    {name} = stablehlo.constant dense<"0x{data}"> : {f32(*shape)}'
    lines.append(f"  func.func public @main(%x: {X}) -> {X} {{")
    previous = "%x"
    for layer in range(layers):
        lines += [constant(f"%w1_{layer}", (d, ff), d ** -0.5),
                  constant(f"%w2_{layer}", (ff, d), ff ** -0.5),
                  constant(f"%g_{layer}", (d,), 1.0),
                  f"    %y{layer} = func.call @block{layer % variants}({previous}, %w1_{layer}, "
                  f"%w2_{layer}, %g_{layer}) : ({X}, {f32(d, ff)}, {f32(ff, d)}, {G}) -> {X}"]
        previous = f"%y{layer}"
    lines += [f"    return {previous} : {X}", "  }", "}"]
    return "\n".join(lines)


def _largest_corpus(count: int = 3) -> list:
    found = sorted(CORPUS.glob("*/*/exported.bin"), key=lambda p: -p.stat().st_size)
    return [str(p.parent.relative_to(CORPUS)) for p in found[:count]]


def _bench():
    """benchmarks/bench.py, whose programs these are."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import bench
    return bench


def _large_programs(names, workdir: pathlib.Path) -> list:
    """-> [(label, path)]"""
    programs = []
    for name in names:
        if name == "corpus":
            programs += [(entry, CORPUS / entry / "exported.bin") for entry in _largest_corpus()]
        elif name == "model_like":
            path = workdir / "model_like.mlir"
            path.write_text(model_like_module())
            programs.append((name, path))
        elif name == "generated":
            path = workdir / "generated.mlir"
            path.write_text(_bench()._generated_module())
            programs.append((name, path))
        elif name in _bench()._REAL_PROGRAMS:
            path = workdir / name / "exported.bin"  # (the name jax.export's variant reads)
            path.parent.mkdir(exist_ok=True)
            path.write_bytes(_bench()._real_model_module(name))
            programs.append((name, path))
        else:
            programs.append((name, CORPUS / name / "exported.bin"))
    return programs


# ------------------------------------------------------------------ child processes

class _TreeFinder(importlib.abc.MetaPathFinder):
    """Imports shlo2jax (and its ops and quant packages) from another checkout."""

    def __init__(self, tree: str):
        tree = pathlib.Path(tree)
        self.packages = {"shlo2jax": tree / "shlo2jax", "shlo2jax.ops": tree / "ops",
                         "shlo2jax.quant": tree / "quant"}

    def find_spec(self, fullname, path=None, target=None):
        folder = self.packages.get(fullname)
        if folder is None:
            return None
        return importlib.util.spec_from_file_location(
            fullname, folder / "__init__.py", submodule_search_locations=[str(folder)])


def _arguments(entry_dir: pathlib.Path) -> list:
    import numpy as np
    data = np.load(entry_dir / "data.npz")
    return [data[f"arg_{i}"] for i in range(sum(k.startswith("arg_") for k in data.files))]


def child_small(variant: str, entry: str) -> dict:
    import jax  # common to both: not counted
    entry_dir = CORPUS / entry
    blob = (entry_dir / "exported.bin").read_bytes()
    args = _arguments(entry_dir)
    t0 = time.perf_counter()
    if variant == "export":
        from jax import export
        t1 = time.perf_counter()
        exported = export.deserialize(bytearray(blob))

        def call(*flat):  # the exported function's own pytree of arguments (torch's (args, kwargs))
            positional, named = jax.tree.unflatten(exported.in_tree, flat)
            return exported.call(*positional, **named)
    else:
        import shlo2jax
        t1 = time.perf_counter()
        call = shlo2jax.load(blob)["main"]
    t2 = time.perf_counter()
    jax.block_until_ready(call(*args))
    t3 = time.perf_counter()
    steady = []
    for _ in range(STEADY_CALLS):
        start = time.perf_counter()
        jax.block_until_ready(call(*args))
        steady.append(time.perf_counter() - start)
    return {"import": t1 - t0, "load": t2 - t1, "first": t3 - t2, "total": t3 - t0,
            "steady": statistics.median(steady)}


def child_warm(variant: str, target: str) -> dict:
    """In one process, after a first program ran both ways (imports, backend, MLIR dialects
    paid): each entry's load + first call by shlo2jax and by jax.export, alternating, jax's
    caches cleared before each (a notebook loading one more program)."""
    import jax
    from jax import export
    import shlo2jax
    entries, runs = target.split("|")

    def shlo(blob, args):
        t0 = time.perf_counter()
        call = shlo2jax.load(blob)["main"]
        t1 = time.perf_counter()
        jax.block_until_ready(call(*args))
        return t1 - t0, time.perf_counter() - t1

    def exported(blob, args):
        t0 = time.perf_counter()
        loaded = export.deserialize(bytearray(blob))
        t1 = time.perf_counter()
        positional, named = jax.tree.unflatten(loaded.in_tree, args)
        jax.block_until_ready(loaded.call(*positional, **named))
        return t1 - t0, time.perf_counter() - t1

    ways = {"shlo2jax": shlo, "jax.export": exported}
    inputs = {e: ((CORPUS / e / "exported.bin").read_bytes(), _arguments(CORPUS / e))
              for e in entries.split(",")}
    first = next(iter(inputs.values()))
    for way in ways.values():
        way(*first)
    result = {}
    for entry, data in inputs.items():
        samples = {name: [] for name in ways}
        for i in range(int(runs)):
            for name in (list(ways) if i % 2 == 0 else list(ways)[::-1]):
                jax.clear_caches()
                samples[name].append(ways[name](*data))
        result[entry] = {name: {"load": statistics.median(s[0] for s in got),
                                "first": statistics.median(s[1] for s in got),
                                "total": statistics.median(s[0] + s[1] for s in got)}
                         for name, got in samples.items()}
    return result


def _inlined_op_count(module) -> int:
    """Ops of the entry function with every func.call replaced by its callee's ops."""
    memo = {}

    def ops_of(region):
        count = 0
        for op in region.ops:
            count += 1
            if op.name == "func.call":
                count += function(op.attrs["callee"])
            for inner in op.regions:
                count += ops_of(inner)
        return count

    def function(name):
        if name not in memo:
            memo[name] = ops_of(module.functions[name].body)
        return memo[name]
    return function("main")


def _first_arguments(avals) -> list:
    import numpy as np
    rng = np.random.default_rng(0)
    return [(rng.standard_normal(a.shape) * 0.1).astype(a.dtype)
            if np.issubdtype(a.dtype, np.floating) else np.zeros(a.shape, a.dtype)
            for a in avals]


def child_first(variant: str, path: str) -> dict:
    """Load + first call to its result, on arguments made from the entry's avals."""
    import jax
    blob = pathlib.Path(path).read_bytes()
    t0 = time.perf_counter()
    if variant == "export":
        from jax import export
        exported = export.deserialize(bytearray(blob))
        avals = exported.in_avals

        def call(*flat):
            positional, named = jax.tree.unflatten(exported.in_tree, flat)
            return exported.call(*positional, **named)
    else:
        import shlo2jax
        call = shlo2jax.load(blob).entry
        avals = call.in_avals
    args = _first_arguments(avals)
    t1 = time.perf_counter()
    jax.block_until_ready(call(*args))
    t2 = time.perf_counter()
    return {"load": t1 - t0, "first": t2 - t1, "total": t2 - t0}


def _module_aval(ttype):
    import jax
    return jax.ShapeDtypeStruct(ttype.shape, ttype.dtype)


def _as_a_first_call(variant: str):
    """shlo2jax's trace and lowering with the collector paused, as a first call runs them
    (`Translated.__call__`: `jax.jit` of a program, lowered outside that pause, can meet a
    full collection there instead); `gc_after_cpu` is one full collection over what the
    translation left, which a later collection pays."""
    if variant == "export":
        return contextlib.nullcontext()
    from shlo2jax import memory
    paused = getattr(memory, "gc_paused", None)  # (an older checkout: as it was)
    return paused() if paused is not None else contextlib.nullcontext()


def _on_a_first_calls_stack(variant: str, fn):
    """`fn()` with the frame stack headroom a first call gives shlo2jax's trace and lowering
    (`memory.with_stack_headroom`: where jax's lowering loops would cross the end of a
    chunk of CPython's frame stack is otherwise chance, by the caller's depth); jax.export's
    (and an older checkout's) as it comes."""
    if variant == "export":
        return fn()
    from shlo2jax import memory
    headroom = getattr(memory, "with_stack_headroom", None)
    return headroom(fn) if headroom is not None else fn()


def child_large(variant: str, path: str) -> dict:
    import jax
    path = pathlib.Path(path)
    w0, c0 = time.perf_counter(), time.process_time()
    if variant == "export":
        if path.name != "exported.bin":
            return {}
        from jax import export
        exported = export.deserialize(bytearray(path.read_bytes()))

        def fn(*flat):
            positional, named = jax.tree.unflatten(exported.in_tree, flat)
            return exported.call(*positional, **named)
        fn, avals = jax.jit(fn), exported.in_avals
    else:
        import shlo2jax
        read_cpu = _time_reads()
        w0, c0 = time.perf_counter(), time.process_time()  # (the import is not translation)
        program = shlo2jax.load(path)
        entry = program.entry
        # what a first call traces, lowers and compiles: the executable's jit, on the module
        # function's arguments (an older checkout: the entry called under a jit of its own)
        fn = getattr(getattr(entry, "executable", None), "jitted", None)
        if fn is not None and hasattr(entry, "definition"):
            avals = [_module_aval(t) for t in entry.definition.input_types]
        else:
            fn = jax.jit(lambda *args: entry(*args))
            avals = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in entry.in_avals]
    w1, c1 = time.perf_counter(), time.process_time()

    def trace_and_lower():
        traced = fn.trace(*avals)
        marks = time.perf_counter(), time.process_time()
        traced.lower().as_text()
        return marks
    with jax.enable_x64(True), _as_a_first_call(variant):
        w2, c2 = _on_a_first_calls_stack(variant, trace_and_lower)
    w3, c3 = time.perf_counter(), time.process_time()
    gc.collect()
    result = {"load": w1 - w0, "trace": w2 - w1, "lower": w3 - w2, "seconds": w3 - w0,
              "load_cpu": c1 - c0, "trace_cpu": c2 - c1, "lower_cpu": c3 - c2, "cpu": c3 - c0,
              "gc_after_cpu": time.process_time() - c3}
    if variant != "export":
        module = program.module
        result.update(static_ops=len(module.ops), inlined_ops=_inlined_op_count(module))
        if read_cpu:
            result["read_cpu"] = sum(read_cpu)
    return result


def _time_reads() -> list:
    """The CPU seconds of each `sources.read` the loader makes (parsing the input, its checks,
    a VHLO artifact's conversion: the part of the load before decoding), appended to the
    list returned; none where the checkout's loader reads otherwise."""
    from shlo2jax import loader
    sources = getattr(loader, "sources", None)
    spent: list = []
    if sources is None or not hasattr(sources, "read"):
        return spent
    read = sources.read

    def timed(*args, **kwargs):
        start = time.process_time()
        try:
            return read(*args, **kwargs)
        finally:
            spent.append(time.process_time() - start)
    sources.read = timed  # (this child process only)
    return spent


def _child_env(tree: str, pycache: str) -> dict:
    env = dict(os.environ, JAX_PLATFORMS=os.environ.get("JAX_PLATFORMS", "cpu"))
    if pycache:
        env["PYTHONPYCACHEPREFIX"] = pycache
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    if tree:
        env["SPEED_TREE"] = tree
    return env


def _run_child(kind, variant, target, tree, pycache) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", kind, variant, str(target)],
                         capture_output=True, text=True, timeout=1800,
                         env=_child_env(tree, pycache))
    for line in out.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    lines = [line for line in (out.stderr or out.stdout).strip().splitlines()
             if line.strip() and "JAX_TRACEBACK_FILTERING" not in line]
    return {"error": lines[-1:]}


# ------------------------------------------------------------------ main

def _median(samples, key):
    values = [s[key] for s in samples if key in s]
    return statistics.median(values) if values else None


def _fmt(value, spec):
    return f"{value:{spec}}" if isinstance(value, (int, float)) else "-"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", default=",".join(SMALL))
    parser.add_argument("--large", default=",".join(LARGE))
    parser.add_argument("--first", default="",
                        help="large programs whose time to first result is measured")
    parser.add_argument("--runs", type=int, default=5, help="processes per variant and program")
    parser.add_argument("--tree", action="append", default=[],
                        help="LABEL=PATH: another checkout's shlo2jax as one more variant")
    parser.add_argument("--no-bytecode", action="store_true",
                        help="children write no .pyc (PYTHONDONTWRITEBYTECODE=1)")
    parser.add_argument("--json", default="")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        kind, variant, target = args.child
        if os.environ.get("SPEED_TREE"):
            sys.meta_path.insert(0, _TreeFinder(os.environ["SPEED_TREE"]))
        result = {"small": child_small, "warm": child_warm, "large": child_large,
                  "first": child_first}[kind](
            variant, target)
        print("RESULT " + json.dumps(result))
        return
    variants = [("shlo2jax", "")] + [tuple(t.split("=", 1)) for t in args.tree]
    variants = [(f"shlo2jax@{label}" if tree else label, tree) for label, tree in variants]
    variants.append(("jax.export", None))
    results = {"small": {}, "warm": {}, "large": {}, "first": {}}
    with tempfile.TemporaryDirectory() as tmp:
        pycache = "" if args.no_bytecode else str(pathlib.Path(tmp) / "pycache")
        small = [e for e in args.small.split(",") if e]
        if small:  # warm-up: every variant's bytecode written once
            for _, tree in variants:
                _run_child("small", "export" if tree is None else "shlo2jax", small[0],
                           tree or "", pycache)
        for entry in small:
            samples = {label: [] for label, _ in variants}
            for _ in range(args.runs):
                for label, tree in variants:
                    samples[label].append(_run_child(
                        "small", "export" if tree is None else "shlo2jax", entry, tree or "",
                        pycache))
            results["small"][entry] = {label: {k: _median(s, k) for k in
                                               ("import", "load", "first", "total", "steady")}
                                       | {"errors": [x["error"] for x in s if "error" in x]}
                                       for label, s in samples.items()}
        if small:
            for label, tree in variants:
                if tree is not None:
                    results["warm"][label] = _run_child("warm", "shlo2jax", ",".join(small) + "|"
                                                        + str(args.runs), tree, pycache)
        for label, path in _large_programs([n for n in args.large.split(",") if n],
                                           pathlib.Path(tmp)):
            samples = {name: [] for name, _ in variants}
            for _ in range(max(1, args.runs // 2)):
                for name, tree in variants:
                    samples[name].append(_run_child(
                        "large", "export" if tree is None else "shlo2jax", path, tree or "",
                        pycache))
            row = {}
            for name, s in samples.items():
                keys = ("load", "trace", "lower", "seconds", "static_ops", "inlined_ops",
                        "read_cpu", "load_cpu", "trace_cpu", "lower_cpu", "cpu", "gc_after_cpu")
                row[name] = {k: _median(s, k) for k in keys} | {
                    "errors": [x["error"] for x in s if "error" in x]}
            results["large"][label] = row
        for label, path in _large_programs([n for n in args.first.split(",") if n],
                                           pathlib.Path(tmp)):
            samples = {name: [] for name, _ in variants}
            for _ in range(args.runs):
                for name, tree in variants:
                    samples[name].append(_run_child(
                        "first", "export" if tree is None else "shlo2jax", path, tree or "",
                        pycache))
            results["first"][label] = {
                name: {k: _median(s, k) for k in ("load", "first", "total")}
                | {"errors": [x["error"] for x in s if "error" in x]}
                for name, s in samples.items()}
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(results, indent=2))
    _print(results, [label for label, _ in variants])


def _against_export(row, labels):
    """(label, its figures, its total over jax.export's or None) for each variant of a row."""
    base = row["jax.export"].get("total")
    for label in labels:
        r = row[label]
        yield label, r, (r["total"] / base if r.get("total") and base else None)


def _print(results, labels):
    if results["small"]:
        print("time to first result, small corpus artifacts (medians of fresh processes, wall s;"
              " steady in ms)")
        print(f"{'entry':22s} {'variant':22s} {'import':>7s} {'load':>7s} {'first':>7s} "
              f"{'total':>7s} {'ratio':>6s} {'steady':>8s}")
        for entry, row in results["small"].items():
            for label, r, ratio in _against_export(row, labels):
                print(f"{entry:22s} {label:22s} {_fmt(r['import'], '7.3f')} {_fmt(r['load'], '7.3f')}"
                      f" {_fmt(r['first'], '7.3f')} {_fmt(r['total'], '7.3f')} {_fmt(ratio, '6.2f')}"
                      f" {_fmt(r['steady'] and r['steady'] * 1e3, '8.3f')}"
                      + (f"  errors: {r['errors'][:1]}" if r["errors"] else ""))
    if results["warm"]:
        print("\nload + first call in a warm process (one program already run both ways; jax's "
              "caches cleared before each; medians, wall s)")
        print(f"{'entry':22s} {'variant':22s} {'load':>7s} {'first':>7s} {'total':>7s} "
              f"{'ratio':>6s}")
        for label, by_entry in results["warm"].items():
            if "error" in by_entry:
                print(f"{label}: error {by_entry['error']}")
                continue
            for entry, row in by_entry.items():
                base = row["jax.export"]["total"]
                for name, r in ((label, row["shlo2jax"]), ("jax.export", row["jax.export"])):
                    print(f"{entry:22s} {name:22s} {r['load']:7.3f} {r['first']:7.3f} "
                          f"{r['total']:7.3f} {r['total'] / base:6.2f}")
    if results["first"]:
        print("\ntime to first result, large programs (load + first call: trace, lower, XLA's "
              "compile, the run; medians of fresh processes, wall s)")
        print(f"{'program':22s} {'variant':22s} {'load':>7s} {'first':>8s} {'total':>8s} "
              f"{'ratio':>6s}")
        for program, row in results["first"].items():
            for label, r, ratio in _against_export(row, labels):
                print(f"{program:22s} {label:22s} {_fmt(r['load'], '7.2f')} "
                      f"{_fmt(r['first'], '8.2f')} {_fmt(r['total'], '8.2f')} "
                      f"{_fmt(ratio, '6.3f')}"
                      + (f"  errors: {r['errors'][:1]}" if r["errors"] else ""))
    if results["large"]:
        print("\ntranslation: load + trace + lower to StableHLO text (medians, wall s; then CPU s:"
              " load/trace/lower and ops per CPU s; read: the part of the load that reads the"
              " input, its checks and conversion included, before decoding)")
        print(f"{'program':28s} {'variant':22s} {'static':>7s} {'inlined':>8s} {'load':>6s} "
              f"{'trace':>6s} {'lower':>6s} {'total':>6s} {'ops/s':>8s} {'inl ops/s':>9s} "
              f"{'cpu l/t/l':>16s} {'ops/cpu s':>9s} {'read':>5s} {'gc after':>8s}")
        for program, row in results["large"].items():
            ops = next((r for r in row.values() if r.get("static_ops")), {})
            for label in labels:
                r = row[label]
                total = r.get("seconds")
                static, inlined = ops.get("static_ops"), ops.get("inlined_ops")
                print(f"{program:28s} {label:22s} {_fmt(static, '7.0f')} {_fmt(inlined, '8.0f')} "
                      f"{_fmt(r['load'], '6.2f')} {_fmt(r['trace'], '6.2f')} "
                      f"{_fmt(r['lower'], '6.2f')} {_fmt(total, '6.2f')} "
                      f"{_fmt(static / total if static and total else None, '8.0f')} "
                      f"{_fmt(inlined / total if inlined and total else None, '9.0f')} "
                      f"{_fmt(r.get('load_cpu'), '4.2f'):>4s}/{_fmt(r.get('trace_cpu'), '4.2f'):>4s}/"
                      f"{_fmt(r.get('lower_cpu'), '4.2f'):>4s}     "
                      f"{_fmt(static / r['cpu'] if static and r.get('cpu') else None, '9.0f')} "
                      f"{_fmt(r.get('read_cpu'), '5.2f')} {_fmt(r.get('gc_after_cpu'), '8.2f')}"
                      + (f"  errors: {r['errors'][:1]}" if r["errors"] else ""))


if __name__ == "__main__":
    main()
