"""Other ways to run the same module, used as oracles for translated programs: XLA
compiling the module directly, and jaxlib's StableHLO reference interpreter (in a child
process: it aborts the process on an op it lacks)."""

from __future__ import annotations

import os
import pickle
import re
import select
import signal
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np
from jaxlib.mlir import ir

from shlo2jax import attributes, compat
from shlo2jax import value_types as T
from shlo2jax.errors import InterpreterError, InterpreterUnsupported
from shlo2jax.tools.numerics import bit_patterns
from shlo2jax.transforms.chlo_legalize import legalize_chlo
from shlo2jax.transforms.common import op_names


def xla_direct(program, platform: str = "cpu"):
    """The program's module compiled directly by XLA (no translation); runs the `@main` entry.

    Returns a callable taking the entry function's arguments and returning a list of arrays.
    """
    text = program.mlir_module.operation.get_asm(large_elements_limit=None, enable_debug_info=False)
    return compat.compile_mlir_module(text, platform, program.num_replicas,
                                              program.num_partitions)


def _component_type(t: str) -> str:
    return t.replace("complex<f32>", "f32").replace("complex<f64>", "f64")


def interpreter_module_text(program, fn, static_types, n_dims: int, size: int) -> str:
    """The module with a new public @main that calls `fn` on static arguments (dimension
    arguments become constants), so that the reference interpreter, which runs @main and has
    no dynamic shapes, can evaluate it after shape refinement. Complex arguments and results
    travel as (real, imaginary) pairs: jaxlib cannot convert complex attributes to Python."""
    module = program.mlir_module
    with module.context:
        text = module.operation.get_asm(large_elements_limit=None, enable_debug_info=False)
        m = ir.Module.parse(text)
        target = "__conformance_target"
        for view in m.body.operations:
            op = view.operation
            if op.name != "func.func":
                continue
            name = op.attributes["sym_name"].value
            if name == fn.name or name == "main":
                new = target if name == fn.name else "__conformance_original_main"
                ir.SymbolTable.replace_all_symbol_uses(name, new, m.operation)
                op.attributes["sym_name"] = ir.StringAttr.get(new)
                op.attributes["sym_visibility"] = ir.StringAttr.get("private")
        body = m.operation.get_asm(large_elements_limit=None, enable_debug_info=False).rstrip()
    ins = [str(t) for t in fn.input_types]
    outs = [str(t) for t in fn.output_types]
    params, lines, args = [], [], []
    for i, t in enumerate(ins):
        if i < n_dims:
            lines.append(f"    %d{i} = stablehlo.constant dense<{size}> : {t}")
            args.append(f"%d{i}")
            continue
        st = str(static_types[i])
        if "complex<" in st:
            part = _component_type(st)
            params += [f"%re{i}: {part}", f"%im{i}: {part}"]
            lines.append(f"    %s{i} = stablehlo.complex %re{i}, %im{i} : {st}")
        else:
            params.append(f"%s{i}: {st}")
        if st != t:  # `?` dimensions: the callee's declared type, refined afterwards
            lines.append(f"    %c{i} = stablehlo.convert %s{i} : ({st}) -> {t}")
            args.append(f"%c{i}")
        else:
            args.append(f"%s{i}")
    call = f"func.call @{target}({', '.join(args)}) : ({', '.join(ins)}) -> ({', '.join(outs)})"
    if len(outs) > 1:
        lines.append(f"    %r:{len(outs)} = {call}")
        refs = [f"%r#{i}" for i in range(len(outs))]
    elif outs:
        lines.append(f"    %r = {call}")
        refs = ["%r"]
    else:
        lines.append(f"    {call}")
        refs = []
    results, result_types = [], []
    for i, (ref, t) in enumerate(zip(refs, outs)):
        if "complex<" in t:
            part = _component_type(t)
            lines.append(f"    %ore{i} = stablehlo.real {ref} : ({t}) -> {part}")
            lines.append(f"    %oim{i} = stablehlo.imag {ref} : ({t}) -> {part}")
            results += [f"%ore{i}", f"%oim{i}"]
            result_types += [part, part]
        else:
            results.append(ref)
            result_types.append(t)
    ret = f"    return {', '.join(results)} : {', '.join(result_types)}" if results else "    return"
    head = f"  func.func public @main({', '.join(params)}) -> ({', '.join(result_types)}) {{"
    assert body.endswith("}")
    return body[:-1] + "\n".join([head] + lines + [ret, "  }"]) + "\n}\n"


def split_complex(arrays) -> list:
    out = []
    for a in arrays:
        if np.iscomplexobj(a):
            out += [a.real.copy(), a.imag.copy()]
        else:
            out.append(a)
    return out


def join_complex(values: list, output_types) -> list:
    out, it = [], iter(values)
    for t in output_types:
        v = np.asarray(next(it))
        if getattr(t, "dtype", None) is not None and np.dtype(t.dtype).kind == "c":
            im = np.asarray(next(it))
            joined = np.zeros(v.shape, t.dtype)
            joined.real, joined.imag = v, im
            v = joined
        out.append(v)
    return out


# The child imports jaxlib's MLIR bindings only (no jax, no shlo2jax): it starts in a
# fraction of a second. It reads (module text, [(bits, type)]) and writes the outputs as
# MLIR attribute text, which the worker decodes.
_REFERENCE_CHILD = compat.CHILD_DIALECTS_SOURCE + """
import pickle, sys
registry = ir.DialectRegistry()
register_jax_dialects(registry)
context = ir.Context()
context.append_dialect_registry(registry)
context.load_all_available_dialects()
stablehlo.register_dialect(context)
chlo.register_dialect(context)
with open(sys.argv[1], "rb") as f:
    text, inputs = pickle.load(f)
with context, ir.Location.unknown():
    module = ir.Module.parse(text)
    args = [ir.DenseElementsAttr.get(data, type=ir.Type.parse(t)) for data, t in inputs]
    outputs = [str(o) for o in stablehlo.eval_module(module, args)]
with open(sys.argv[2], "wb") as f:
    pickle.dump(outputs, f)
"""


def _refined_reference_text(text: str, dynamic: bool) -> str:
    """The wrapper module, shape-refined when it has `?` dimensions (the reference
    interpreter has no dynamic shapes)."""
    with compat.make_ir_context(), ir.Location.unknown():
        module = ir.Module.parse(text)
        if dynamic:
            try:
                module = compat.refine_polymorphic_shapes(module)
            except Exception as e:
                cause = e.__cause__ or e
                raise InterpreterError("shape refinement of the reference module failed: "
                                          f"{crash_reason(str(cause))}") from None
        return module.operation.get_asm(large_elements_limit=None, enable_debug_info=False)


def _reference_input(a: np.ndarray):
    data = a if a.dtype.kind in "biuf" else bit_patterns(a)  # ml_dtypes: their bit patterns
    return np.array(data, order="C"), str(T.tensor_type(a.shape, a.dtype))


def _decode_reference_output(text: str) -> np.ndarray:
    return attributes.dense_from_text(text, T.parse_type(text[text.rindex(" : ") + 3:]))


def signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


_CRASH_LINE_RE = re.compile(r"Check failed|LLVM ERROR|Fatal Python error|what\(\)|terminate called|"
                            r"Segmentation fault|Aborted|[A-Za-z]*Error\b")


def crash_reason(text: str, lines: int = 3) -> str:
    """The informative end of a crash log: the abort reason rather than the stack trace."""
    keep = [ln.strip() for ln in text.splitlines() if ln.strip()
            and not re.match(r"\s*(@\s+0x|\*\*\*|File \"|#\d+ )", ln)]
    reasons = [ln for ln in keep if _CRASH_LINE_RE.search(ln)]
    chosen = reasons[-lines:] if reasons else keep[-lines:]
    return " | ".join(ln[:400] for ln in chosen)


# The same child, kept running for many programs (a fuzzer's): a length-prefixed pickle per
# request on stdin, per answer on stdout. Starting a child costs ~0.4 CPU s (jaxlib's import
# and its dialects), more than interpreting a small program.
_REFERENCE_SERVER = _REFERENCE_CHILD.split("with open(sys.argv[1]", 1)[0] + """
import os, struct
# Answers go to a copy of the pipe; what anything else writes to stdout, jaxlib's C++
# included, goes to stderr.
requests, answers = sys.stdin.buffer, os.fdopen(os.dup(1), "wb")
os.dup2(2, 1)
sys.stdout = sys.stderr
while True:
    head = requests.read(8)
    if len(head) < 8:
        break
    text, inputs = pickle.loads(requests.read(struct.unpack("<Q", head)[0]))
    try:
        with context, ir.Location.unknown():
            module = ir.Module.parse(text)
            args = [ir.DenseElementsAttr.get(data, type=ir.Type.parse(t)) for data, t in inputs]
            answer = ("ok", [str(o) for o in stablehlo.eval_module(module, args)])
    except Exception as e:
        answer = ("error", f"{type(e).__name__}: {e}")
    data = pickle.dumps(answer)
    answers.write(struct.pack("<Q", len(data)) + data)
    answers.flush()
"""


class InterpreterServer:
    """One reference-interpreter child for many programs (see `run_interpreter`'s `server`).
    A program that aborts the child is reported like a one-shot child's abort; the next
    program starts a new child."""

    def __init__(self):
        self._proc = None
        self._stderr = None

    def _start(self):
        self._stderr = tempfile.TemporaryFile()
        self._proc = subprocess.Popen([sys.executable, "-c", _REFERENCE_SERVER],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=self._stderr)

    def close(self):
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()
            self._proc = None
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    def _stderr_text(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read().decode("utf-8", "replace")

    def _read(self, n: int, deadline: float) -> bytes:
        fd, chunks, left = self._proc.stdout.fileno(), [], n
        while left:
            wait = deadline - time.monotonic()
            if wait <= 0 or not select.select([fd], [], [], wait)[0]:
                raise TimeoutError
            chunk = os.read(fd, left)
            if not chunk:
                raise EOFError
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def run(self, text: str, inputs: list, timeout: float) -> list:
        if self._proc is None or self._proc.poll() is not None:
            self.close()
            self._start()
        data = pickle.dumps((text, inputs))
        deadline = time.monotonic() + timeout
        try:
            self._proc.stdin.write(struct.pack("<Q", len(data)) + data)
            self._proc.stdin.flush()
            answer = pickle.loads(self._read(struct.unpack("<Q", self._read(8, deadline))[0],
                                             deadline))
        except TimeoutError:
            self.close()
            raise InterpreterError(f"reference interpreter ran past {timeout:.0f} s") from None
        except (EOFError, BrokenPipeError):
            code = self._proc.wait()
            reason = crash_reason(self._stderr_text()) or "no message"
            self.close()
            if code < 0:  # it aborts on what it does not implement
                raise InterpreterUnsupported(f"the reference interpreter cannot run it "
                                             f"({signal_name(code)}): {reason}") from None
            raise InterpreterError(f"running the reference interpreter failed: {reason}") from None
        status, payload = answer
        if status != "ok":
            raise InterpreterError(f"running the reference interpreter failed: {payload}")
        return [_decode_reference_output(t) for t in payload]


def run_interpreter(text: str, inputs: list, dynamic: bool = False, timeout: float = 600.0,
                    server: "InterpreterServer | None" = None) -> list:
    """The reference interpreter's outputs for @main of `text` on `inputs`: in a child of
    its own, or in `server`'s long-lived one."""
    text = _refined_reference_text(text, dynamic)
    if server is not None:
        return server.run(text, [_reference_input(a) for a in inputs], timeout)
    with tempfile.TemporaryDirectory(prefix="shlo2jax-ref-") as tmp:
        src, dst = os.path.join(tmp, "in.pkl"), os.path.join(tmp, "out.pkl")
        with open(src, "wb") as f:
            pickle.dump((text, [_reference_input(a) for a in inputs]), f)
        try:
            proc = subprocess.run([sys.executable, "-c", _REFERENCE_CHILD, src, dst],
                                  capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise InterpreterError(f"reference interpreter ran past {timeout:.0f} s") from None
        if proc.returncode < 0:  # it aborts on what it does not implement
            raise InterpreterUnsupported(
                             f"the reference interpreter cannot run it "
                             f"({signal_name(proc.returncode)}): {crash_reason(proc.stderr) or 'no message'}")
        if proc.returncode != 0:
            raise InterpreterError(f"running the reference interpreter failed: "
                                      f"{crash_reason(proc.stderr, 1) or 'no message'}")
        with open(dst, "rb") as f:
            return [_decode_reference_output(t) for t in pickle.load(f)]


def legalize_all_chlo(text: str) -> str:
    """Module text with every chlo op rewritten to stablehlo (for the reference interpreter,
    which implements no chlo op); the text unchanged when the pass cannot rewrite it."""
    with compat.make_ir_context(), ir.Location.unknown():
        module = ir.Module.parse(text)
        if not legalize_chlo(module, unsupported_names=op_names(module)):
            return text
        return module.operation.get_asm(large_elements_limit=None, enable_debug_info=True)
