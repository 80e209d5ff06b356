"""The conformance runner: does this toolchain agree with StableHLO on these programs?

    shlo2jax conformance PATH... [-j N] [--timeout S] [-k PATTERN] [--json FILE]
                                 [--floor FILE] [--known-failures FILE]

Every `*.mlir` under the paths is split into cases (a file, or its `// -----` chunks,
ids `path#k`, paths relative to the conformance folder) and each case is reported as

* **pass**        every check held;
* **fail**        a check did not hold (which check, and the largest error);
* **unsupported** an op or type has no translation yet (named), or the case needs what
                  the runner does not model yet (probes, send/recv between processes);
* **error**       anything else: a translation error, a crash, a timeout.

followed by `N passed, N failed, N skipped` (errors count as failed, unsupported as
skipped). Kinds of case:

* public functions without arguments that call checks, as `stablehlo.custom_call
  @check.*` or as ops of the `check` dialect (its custom syntax is rewritten to the
  generic form jaxlib parses). Each check records its operands while the function is
  traced under `jax.jit` with x64; they come back as outputs and are compared after the
  run: `expect_eq` bitwise (any NaN equals any NaN, -0 differs from +0);
  `expect_almost_eq` |actual - expected| <= tolerance (custom call 1e-3, dialect 1e-4
  or its `tolerance`); `expect_close` ULP distance in [min, max] (custom call [0, 3]);
  non-finite values must match bitwise except NaN == NaN; complex values componentwise;
  narrow floats by their bit patterns. `custom_call @check.eq` is `expect_eq` for
  integers and `expect_almost_eq` (1e-4) otherwise, as in the reference interpreter.
* a public entry that takes arguments (e.g. the shape-polymorphic `testdata/dynamic`
  cases), or a lone function without checks: it runs on seeded inputs (dimension-size
  arguments and `?` dimensions get one consistent size) and its outputs are compared
  with the StableHLO reference interpreter in jaxlib, run in a child process because it
  aborts on ops it lacks (then the case is unsupported, with the interpreter's reason).

* multi-process cases (`interpreter.run_parallel`): the op is translated like any other
  (shlo2jax.ops.collectives, shlo2jax.spmd.grid): each process is a shard of a `shard_map` over a
  replicas x partitions mesh. Workers start with 8 host CPU devices
  (`XLA_FLAGS=--xla_force_host_platform_device_count=8`); with `-j 0` the calling process's
  devices count, and a grid larger than them is unsupported.

Cases run in a pool of worker processes that each import jax once. A case that runs
past `--timeout` or kills its worker (abort, segfault) is reported as an error and the
worker is replaced: the run always finishes.

The gate (`--floor`, `--known-failures`) exits 1 when a folder passes fewer cases than
its floor or a case fails that is not a listed known failure; the known-failures list
may only shrink.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import fnmatch
import importlib
import importlib.util
import json
import os
import re
import sys
import time
import traceback
from multiprocessing.connection import wait
from typing import Callable, Iterable, Optional

import jax
import numpy as np

from shlo2jax import quant
from shlo2jax import compat
from shlo2jax import value_types as T
from shlo2jax.errors import InterpreterError, InterpreterUnsupported, LoadError, UnsupportedError
from shlo2jax.host_transfers import host_io
from shlo2jax.loader import load
from shlo2jax.options import LoadOptions
from shlo2jax.probes import probe
from shlo2jax.quant import F6Array
from shlo2jax.tools import exits, isolated, reference
from shlo2jax.tools.numerics import check_values, reference_mismatch
from shlo2jax.tools.option_flags import add_option_flags, options_from
from shlo2jax.tools.progress import Progress
from shlo2jax.tools.reference import (join_complex as _join_complex,
                                interpreter_module_text as _reference_module_text,
                                split_complex as _split_complex)
from shlo2jax.translate import Token, Translator, TranslatorMode

OUTCOMES = ("pass", "fail", "unsupported", "error")

# ---------------------------------------------------------------- cases


@dataclasses.dataclass
class Case:
    id: str      # path relative to the corpus root, plus `#k` for the k-th `// -----` chunk
    path: str    # the file
    text: str    # the module text of this case
    group: str   # the folder the floor counts passes by

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def _find_root(path: str) -> str:
    """The conformance folder a path lies in (the one holding `testdata/` or `interpret/`
    beside a README), so that case ids do not depend on how the run was invoked."""
    start = os.path.abspath(path if os.path.isdir(path) else os.path.dirname(path))
    here = start
    while True:
        if os.path.isfile(os.path.join(here, "README.md")) and any(
                os.path.isdir(os.path.join(here, d)) for d in ("testdata", "interpret")):
            return here
        parent = os.path.dirname(here)
        if parent == here:
            return start
        here = parent


def _files(path: str) -> list[str]:
    if os.path.isdir(path):
        found = []
        for dirpath, dirnames, filenames in os.walk(path):
            dirnames.sort()
            found += [os.path.join(dirpath, f) for f in sorted(filenames) if f.endswith(".mlir")]
        return found
    if os.path.isfile(path):
        return [path]
    raise FileNotFoundError(f"no such file or folder: {path}")


def discover(paths: Iterable[str], root: Optional[str] = None) -> list[Case]:
    """The cases in the given files and folders (folders: every *.mlir, recursively)."""
    cases, seen = [], set()
    for path in paths:
        base = root or _find_root(path)
        for file in _files(path):
            rel = os.path.relpath(os.path.abspath(file), base).replace(os.sep, "/")
            if rel in seen:
                continue
            seen.add(rel)
            group = os.path.dirname(rel) or "."
            with open(file, encoding="utf-8") as f:
                text = f.read()
            chunks = re.split(r"^// -----.*$", text, flags=re.M)
            if len(chunks) == 1:
                cases.append(Case(rel, file, text, group))
                continue
            line = 0
            for k, chunk in enumerate(chunks):
                if "func.func" in chunk:
                    # padded so that locations in messages are lines of the file
                    cases.append(Case(f"{rel}#{k}", file, "\n" * line + chunk, group))
                line += chunk.count("\n")
    return cases


def select(cases: list[Case], patterns: list[str]) -> list[Case]:
    """`-k`: a case is kept when any pattern is a substring of its id or a glob matching
    part of it (`add*i32` matches `testdata/add_int32_20_20.mlir`)."""
    if not patterns:
        return cases
    return [c for c in cases if any(
        p in c.id or fnmatch.fnmatchcase(c.id, f"*{p}*") for p in patterns)]


# ---------------------------------------------------------------- check-dialect syntax

# jaxlib does not register the `check` / `interpreter` dialects, so their custom
# assembly cannot be parsed: it is rewritten to the generic op form.
_CUSTOM_OP_RE = re.compile(r"(?<![\w.\"@])(check\.expect_\w+|interpreter\.print)\b")
_GENERIC_PROPS_RE = re.compile(r'("(?:check|interpreter)\.\w+"\([^()]*\)\s*)<\{')


def _next_significant(text: str, i: int) -> str:
    """The first character at or after `i` that is neither whitespace nor in a comment."""
    n = len(text)
    while i < n:
        if text[i].isspace():
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        else:
            return text[i]
    return ""


def _scan_statement(text: str, start: int) -> tuple[int, str]:
    """The op statement starting at `start`, read independently of its layout: (its end, its
    text with comments dropped and newlines as spaces). Operands, values and types may span
    lines and have comments between them; the statement ends at a newline outside brackets
    where nothing continues it (its text so far does not end in `,` `:` `=`, the next
    significant character is not `,` `:` `=` `{`, and its types have begun). A comment
    trailing its last line stays where it is."""
    depth, i, in_str, typed = 0, start, False, False
    body: list[str] = []
    n = len(text)

    def ends_here(at: int) -> bool:
        last = "".join(body).rstrip()[-1:]
        return typed and last not in (",", ":", "=") and \
            _next_significant(text, at) not in (",", ":", "=", "{")

    while i < n:
        ch = text[i]
        if in_str:
            body.append(ch)
            if ch == "\\" and i + 1 < n:
                body.append(text[i + 1])
                i += 1
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
            body.append(ch)
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            if depth <= 0 and ends_here(j):
                return i, "".join(body)
            body.append(" ")
            i = j
            continue
        elif ch == "\n":
            if depth <= 0 and ends_here(i):
                return i, "".join(body)
            body.append(" ")
        else:
            if ch in "<([{":
                depth += 1
            elif ch in ">)]}" and not (ch == ">" and i > 0 and text[i - 1] == "-"):
                depth -= 1  # (`->` is not a closing bracket)
            elif ch == ":" and depth <= 0:
                typed = True
            body.append(ch)
        i += 1
    return n, "".join(body)


def _split_top(text: str, sep: str) -> list[str]:
    parts, depth, start, in_str = [], 0, 0, False
    for i, ch in enumerate(text):
        if in_str:
            in_str = ch != '"' or text[i - 1] == "\\"
            continue
        if ch == '"':
            in_str = True
        elif ch in "<([{":
            depth += 1
        elif ch in ">)]}" and not (ch == ">" and i and text[i - 1] == "-"):
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return parts


def _attr_value(value: str) -> str:
    """A bare attribute value of the custom syntax (`0.1`, `3`, `"p"`) with its MLIR type."""
    value = value.strip()
    if value.startswith(('"', "dense<", "[", "#")) or " : " in value:
        return value
    if re.fullmatch(r"[-+]?\d+", value):
        return f"{value} : i64"
    return f"{value} : f64"


def _generic_check(name: str, body: str) -> str:
    """`check.expect_* <body>` (custom syntax, op name stripped) -> the generic op."""
    head, *rest = _split_top(body, ":")  # at the first `:` outside brackets
    tail = " : ".join(rest)
    items = [p for p in _split_top(head, ",") if p]
    tail = tail.strip()
    extra = ""
    if tail.endswith("}"):  # a trailing attr-dict: `... : tensor<f64> {tolerance = 0.1 : f64}`
        depth, i = 0, len(tail) - 1
        while i >= 0:
            depth += tail[i] == "}"
            depth -= tail[i] == "{"
            if depth == 0:
                break
            i -= 1
        extra = tail[i + 1:-1].strip()
        tail = tail[:i].strip()
    types = [t for t in _split_top(tail, ",") if t]
    operands, attrs, value = [], [], None
    for item in items:
        if item.startswith("%"):
            operands.append(item)
        elif item.startswith("dense"):
            value = item
        elif "=" in item:
            key, _, val = item.partition("=")
            attrs.append(f"{key.strip()} = {_attr_value(val)}")
        else:
            raise ValueError(f"cannot read `{name} {body.strip()}`")
    if value is not None:
        attrs.insert(0, f"value = {value} : {types[0]}")
    if extra:
        attrs.append(extra)
    if len(types) < len(operands):
        types = types + [types[-1]] * (len(operands) - len(types))
    attr_dict = " {" + ", ".join(attrs) + "}" if attrs else ""
    return (f'"{name}"({", ".join(operands)}){attr_dict} : '
            f'({", ".join(types[:len(operands)])}) -> ()')


_PROBE_RE = re.compile(r'^(\s*%[\w#]+\s*=\s*)interpreter\.probe\s+(%[\w#]+)\s*,\s*'
                       r'probe_id\s*=\s*("(?:[^"\\]|\\.)*")\s*:\s*(.+?)\s*$', re.M)


def rewrite_check_syntax(text: str) -> str:
    """Rewrites the `check` dialect's custom syntax (and `interpreter.print` / `.probe`) to
    the generic form jaxlib can parse, and the `<{...}>` properties of such generic ops to an
    attribute dictionary (properties of unregistered ops are not visible as attributes)."""
    text = _PROBE_RE.sub(lambda m: f'{m.group(1)}"interpreter.probe"({m.group(2)}) '
                                   f'{{probe_id = {m.group(3)}}} : ({m.group(4)}) -> {m.group(4)}',
                         text)
    out, pos = [], 0
    for m in _CUSTOM_OP_RE.finditer(text):
        if m.start() < pos:
            continue
        line_start = text.rfind("\n", 0, m.start()) + 1
        prefix = text[line_start:m.start()]
        if prefix.strip() or "//" in prefix:
            continue  # inside a comment or another construct
        end, body = _scan_statement(text, m.end())
        out.append(text[pos:m.start()])
        out.append(_generic_check(m.group(1), body.strip()))
        pos = end
    out.append(text[pos:])
    text = "".join(out)
    return _props_to_attrs(text) if "<{" in text else text


def _props_to_attrs(text: str) -> str:
    out, pos = [], 0
    for m in _GENERIC_PROPS_RE.finditer(text):
        if m.start() < pos:
            continue
        open_at = m.end() - 1  # the `{`
        depth, i = 0, open_at
        while i < len(text):
            depth += text[i] == "{"
            depth -= text[i] == "}"
            if depth == 0:
                break
            i += 1
        if not text.startswith("}>", i):
            continue
        out += [text[pos:m.end() - 2], text[open_at:i + 1]]
        pos = i + 2
    out.append(text[pos:])
    return "".join(out)


# ---------------------------------------------------------------- running one case

class CaseResult(Exception):
    """Raised inside a case to end it with an outcome."""

    def __init__(self, outcome: str, message: str):
        super().__init__(message)
        self.outcome, self.message = outcome, message


def _unsupported_message(err) -> str:
    seen, parts = set(), []
    for name, _loc, what in err.problems:
        key = (name, what)
        if key not in seen:
            seen.add(key)
            parts.append(f"{name}: {what}")
    more = f" (+{len(parts) - 3} more)" if len(parts) > 3 else ""
    return "; ".join(parts[:3]) + more


_NOT_MODELLED = ()

def _flat_arrays(values) -> list:
    # An f6 value stays one leaf: np.asarray makes it an ml_dtypes float6 array.
    leaves = jax.tree_util.tree_leaves(values, is_leaf=lambda x: isinstance(x, (Token, F6Array)))
    return [v for v in leaves if not isinstance(v, Token)]


def _run_checked(program, fn) -> tuple[int, Optional[str]]:
    """Runs a no-argument function with the check recorder; (checks, failure or None)."""
    probed = None
    if any(op.name == "interpreter.probe" for op in program.module.ops):
        # `expect_serialized_eq` compares with what a probe recorded: record them first.
        _, probed = probe(fn, values="probes")
    recorded = []
    body = Translator(program.module, program.options, TranslatorMode(recorder=recorded)).function_body(
        fn.definition)

    def traced():
        recorded.clear()
        outs = body()
        return _flat_arrays(outs), [list(r[2]) for r in recorded]

    with compat.enable_x64():
        _, operands = jax.jit(traced)()
        jax.block_until_ready(operands)
    failures = []
    for (op, check, _), values in zip(recorded, operands):
        kind = check.kind
        # Quantized operands: storage integers for expect_eq, dequantized values otherwise.
        values = [np.asarray(quant.check_operand(v, kind)) for v in values]
        if kind == "serialized_eq":
            recorded_values = probed.by_probe_id(check.probe_id) if probed else []
            if check.iter >= len(recorded_values):
                failures.append(f"@{fn.name}: {op.location}: probe {check.probe_id!r} "
                                f"recorded {len(recorded_values)} value(s), none for iteration "
                                f"{check.iter}")
                continue
            kind, expected = "eq", np.asarray(recorded_values[check.iter])
            actual = values[0]
        elif check.expected is not None:
            actual, expected = values[0], np.asarray(check.expected)
        elif len(values) == 2:
            actual, expected = values
        else:
            raise CaseResult("error", f"@{fn.name}: {op.name} at {op.location} has no expected "
                                      "value (an attribute the runner could not read)")
        msg = check_values(kind, actual, expected, tolerance=check.tolerance,
                           min_ulp=check.min_ulp_difference, max_ulp=check.max_ulp_difference)
        if msg:
            failures.append(f"@{fn.name}: {kind} check at {op.location}: {msg}")
    if failures:
        more = f" (+{len(failures) - 1} more failing check(s))" if len(failures) > 1 else ""
        return len(recorded), failures[0] + more
    return len(recorded), None


def _run_checked_parallel(program, fn, text: str) -> tuple[int, Optional[str]]:
    """`_run_checked`; in multi-process cases (`interpreter.run_parallel`, run by
    shlo2jax.spmd.grid) the host feed is the interpreter's channels: a send meets the recv of
    its channel (loopback), and outfeeds go where nobody reads them."""
    if "interpreter.run_parallel" not in text:
        return _run_checked(program, fn)
    with host_io(loopback=True):
        return _run_checked(program, fn)


def _seeded_inputs(fn, size: int, seed: int = 0):
    """Seeded inputs for a function with arguments, and the static types they have.

    With `?` dimensions (jax shape polymorphism), the leading rank-0 integer arguments are
    the dimension sizes: they get `size`, and so does every `?` dimension (the corpus's
    programs name one size variable per leading argument, and equal sizes satisfy any
    mapping of variables to dimensions)."""
    rng = np.random.default_rng(seed)
    types = list(fn.input_types)
    if not all(isinstance(t, T.TensorType) for t in types):
        raise CaseResult("unsupported", f"@{fn.name} takes a token or tuple argument")
    dynamic = any(not t.is_static for t in types)
    n_dims = 0
    if dynamic:
        while n_dims < len(types) and types[n_dims].shape == () and T.is_integer(types[n_dims].dtype):
            n_dims += 1
    static_types, inputs = [], []
    for i, t in enumerate(types):
        st = T.TensorType(tuple(size if d is None else d for d in t.shape), t.dtype, t.element,
                          t.quant, t.bounds)
        static_types.append(st)
        shape = st.shape
        if t.quant is not None:
            raise CaseResult("unsupported", f"@{fn.name} takes a quantized argument")
        if i < n_dims:
            value = size
        elif t.dtype == np.bool_:
            value = rng.integers(0, 2, shape)
        elif T.is_integer(t.dtype) and len(shape) <= 1:
            value = np.zeros(shape)  # mostly start indices: 0 is valid for any size
        elif T.is_integer(t.dtype):
            value = rng.integers(0, size, shape)  # small and non-negative: safe as indices
        elif T.is_complex(t.dtype):
            value = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
        else:
            value = rng.standard_normal(shape) * 2
        inputs.append(np.asarray(np.asarray(value).astype(t.dtype)))
    return inputs, n_dims, static_types


def _run_reference(text: str, inputs: list, dynamic: bool, timeout: float) -> list:
    """The reference interpreter's outputs, its failures as case outcomes."""
    try:
        return reference.run_interpreter(text, inputs, dynamic, timeout)
    except InterpreterUnsupported as e:
        raise CaseResult("unsupported", str(e)) from None
    except InterpreterError as e:
        raise CaseResult("error", str(e)) from None


def _run_against_reference(program, fn, deadline: float) -> str:
    """Runs `fn` on seeded inputs through the translation and through the reference
    interpreter (in a child process) and compares the outputs."""
    size = 3
    inputs, n_dims, static_types = _seeded_inputs(fn, size)
    dynamic = any(not t.is_static for t in fn.input_types)
    outs = fn(*inputs)
    outs = outs if isinstance(outs, tuple) else (outs,)
    actual = [np.asarray(o) for o in _flat_arrays(outs)]
    text = _reference_module_text(program, fn, static_types, n_dims, size)
    expected = _run_reference(text, _split_complex(inputs[n_dims:]), dynamic,
                              max(5.0, deadline - time.time()))
    expected = _join_complex(expected, [t for t in fn.output_types
                                        if not isinstance(t, (T.TokenType, T.TupleType))])
    if len(expected) != len(actual):
        raise CaseResult("fail", f"@{fn.name}: {len(actual)} output(s), the reference "
                                 f"interpreter gave {len(expected)}")
    for i, (a, e) in enumerate(zip(actual, expected)):
        msg = reference_mismatch(a, np.asarray(e))
        if msg:
            raise CaseResult("fail", f"@{fn.name} output {i} vs reference interpreter: {msg}")
    return f"@{fn.name}: {len(actual)} output(s) agree with the reference interpreter"


def run_case(case: dict, timeout: float = 120.0,
             options: Optional[LoadOptions] = None) -> tuple[str, str]:
    """Runs one case in this process: (outcome, message). `options`: how the case is loaded
    (default: `LoadOptions()`, strict: a case with an op that cannot run is "unsupported")."""
    deadline = time.time() + timeout
    text = case["text"]
    try:
        for marker, why in _NOT_MODELLED:
            if marker in text:
                return "unsupported", why
        try:
            text = rewrite_check_syntax(text)
        except (ValueError, IndexError) as e:
            return "error", f"cannot rewrite the check-dialect syntax: {e}"
        try:
            program = load(text, options, source_name=case["id"])
        except UnsupportedError as e:
            return "unsupported", _unsupported_message(e)
        except LoadError as e:
            return "error", f"load: {e}"
        functions = list(program.functions.values())
        runnable = [f for f in functions if not f.input_types]
        if runnable:
            checks = 0
            for fn in runnable:
                n, failure = _run_checked_parallel(program, fn, text)
                if failure:
                    return "fail", failure
                checks += n
            if checks:
                return "pass", f"{checks} check(s) held"
            # no checks: the reference interpreter is the oracle for what it returns
            if len(runnable) == 1 and runnable[0].output_types:
                return "pass", _run_against_reference(program, runnable[0], deadline)
            return "pass", "no checks: ran to completion"
        if len(functions) == 1 or "main" in program.functions:  # inputs needed: seeded
            return "pass", _run_against_reference(program, program.entry, deadline)
        return "unsupported", "no public function without arguments and no single entry"
    except CaseResult as r:
        return r.outcome, r.message
    except UnsupportedError as e:
        return "unsupported", _unsupported_message(e)
    except Exception as e:  # a translation error or a bug: reported, never fatal
        where = traceback.extract_tb(e.__traceback__)[-1]
        detail = f"{type(e).__name__}: {str(e).strip()}"
        if len(detail) > 1500:
            detail = detail[:1500] + " ..."
        return "error", f"{detail} [{os.path.basename(where.filename)}:{where.lineno}]"


# ---------------------------------------------------------------- worker pool

_PLUGINS_ENV = "SHLO2JAX_CONFORMANCE_PLUGINS"


def load_plugins(plugins: Iterable[str]) -> None:
    """Imports each plugin (a module name or a .py file), e.g. to register custom-call
    translations the programs need, before any case runs."""
    for plugin in plugins:
        if plugin.endswith(".py") and os.path.isfile(plugin):
            name = "_shlo2jax_plugin_" + re.sub(r"\W", "_", os.path.abspath(plugin))
            spec = importlib.util.spec_from_file_location(name, plugin)
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
        else:
            importlib.import_module(plugin)


_WORKER_CMD = "from shlo2jax.tools.conformance import _worker_main; _worker_main()"
_CASES_PER_WORKER = 300  # fresh workers now and then: jax caches grow with every jit


def _with_host_devices(env) -> dict:
    """`interpreter.run_parallel` runs its processes on a mesh of devices: on CPU, XLA makes
    8 host devices when told before jax is imported."""
    flags = env.get("XLA_FLAGS", "")
    if "xla_force_host_platform_device_count" not in flags:
        env["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count=8".strip()
    return env


def _worker_main() -> None:
    """Worker: reads cases from stdin, writes outcomes to stdout (pickled frames). Anything
    the case prints goes to stderr (a log the parent reads when the worker dies)."""
    conn_in, conn_out = isolated.worker_connections()
    # jax read JAX_PLATFORMS when this module imported it (the parent's env has it; this
    # default reaches the worker's own children); XLA reads XLA_FLAGS only when jax makes
    # its backends, at the first case, so the host devices set here still count.
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    _with_host_devices(os.environ)
    # Here, not at the top: the op families register once per worker, before it reports
    # ready (their import is not charged to a case's timeout); the parent, which only
    # hands out cases, never loads them.
    import shlo2jax.ops  # noqa: F401  (every op family, once per worker)
    plugins = os.environ.get(_PLUGINS_ENV, "")
    load_plugins(p for p in plugins.split(os.pathsep) if p)
    conn_out.send(("ready", os.getpid()))
    for case, timeout, options in isolated.requests(conn_in):
        start = time.time()
        outcome, message = run_case(case, timeout, options)
        conn_out.send((case["id"], outcome, message, time.time() - start))


class _Worker(isolated.WorkerProcess):
    def __init__(self, plugins=()):
        env = {**_with_host_devices(dict(os.environ)),
               "JAX_PLATFORMS": os.environ.get("JAX_PLATFORMS", "cpu"),
               "PYTHONUNBUFFERED": "1",
               _PLUGINS_ENV: os.pathsep.join(os.path.abspath(p) if p.endswith(".py") else p
                                             for p in plugins)}
        super().__init__([sys.executable, "-c", _WORKER_CMD], env, "shlo2jax-worker-")
        self.case: Optional[dict] = None
        self.case_start = 0.0

    def send(self, case: dict, timeout: float, options: Optional[LoadOptions]):
        self.case, self.case_start = case, time.time()
        self.deadline = self.case_start + timeout
        self.send_conn.send((case, timeout, options))


def run_cases(cases: list[Case], jobs: int, timeout: float,
              on_result: Callable[[dict], None] = lambda r: None, plugins=(),
              options: Optional[LoadOptions] = None) -> list[dict]:
    """Runs the cases in `jobs` worker processes (0: in this process, no isolation, no
    timeout) and returns one dict per case: id, group, outcome, message, seconds. Each case
    is loaded with `options` (default: `LoadOptions()`)."""
    results = []

    def finish(case: dict, outcome: str, message: str, seconds: float):
        result = {"id": case["id"], "group": case["group"], "outcome": outcome,
                  "message": message, "seconds": round(seconds, 3)}
        results.append(result)
        on_result(result)

    if jobs <= 0:
        load_plugins(plugins)
        for case in cases:
            start = time.time()
            outcome, message = run_case(case.as_dict(), timeout, options)
            finish(case.as_dict(), outcome, message, time.time() - start)
        return results

    pending = collections.deque(c.as_dict() for c in cases)
    workers: list[_Worker] = []
    startup_limit = max(300.0, timeout)
    failed_starts = 0
    try:
        while pending or any(w.case for w in workers):
            while len(workers) < min(jobs, len(pending) + sum(1 for w in workers if w.case)):
                workers.append(_Worker(plugins))
            for w in workers:
                if w.ready and w.case is None and pending:
                    w.send(pending.popleft(), timeout, options)
            now = time.time()
            deadlines = [w.deadline if w.case else w.started + startup_limit for w in workers]
            ready = wait([w.recv_conn for w in workers], timeout=max(0.0, min(deadlines) - now))
            for w in list(workers):
                if w.recv_conn in ready:
                    try:
                        msg = w.recv_conn.recv()
                    except (EOFError, OSError):
                        msg = None
                    if msg is None:  # the worker died
                        how = w.exit_description()
                        tail = w.log_tail()
                        if w.case:
                            finish(w.case, "error", f"the worker died ({how}) running this case"
                                   + (f": {tail}" if tail else ""), time.time() - w.case_start)
                        elif not w.ready:
                            failed_starts += 1
                            if failed_starts >= 3:
                                raise RuntimeError(f"conformance workers fail to start ({how}): "
                                                   f"{tail}")
                        w.close()
                        workers.remove(w)
                        continue
                    if msg[0] == "ready":
                        w.ready = True
                        failed_starts = 0
                        continue
                    _, outcome, message, seconds = msg
                    case, w.case = w.case, None
                    finish(case, outcome, message, seconds)
                    w.done += 1
                    if w.done >= _CASES_PER_WORKER:
                        w.close()
                        workers.remove(w)
                elif time.time() >= (w.deadline if w.case else w.started + startup_limit):
                    if w.case:
                        finish(w.case, "error", f"timed out after {timeout:g} s (worker killed)",
                               time.time() - w.case_start)
                    else:
                        failed_starts += 1
                        if failed_starts >= 3:
                            raise RuntimeError("conformance workers do not start: "
                                               f"{w.log_tail()}")
                    w.close(kill=True)
                    workers.remove(w)
    finally:
        for w in workers:
            if w.case:
                w.close(kill=True)
            else:
                w.close()
    return results


# ---------------------------------------------------------------- floor and known failures

_FLOOR_NOTE = ("Minimum passing cases per folder of the conformance corpus. The CI gate fails "
               "when a folder passes fewer. Raise these when cases start passing; regenerate "
               "with `shlo2jax conformance ../shared/conformance --write-floor FILE`.")
_KNOWN_NOTE = ("Conformance cases known to fail or error, each with its reason. This list may "
               "only shrink: a case that fails and is not listed fails the CI gate, so a fix "
               "removes its entry and a regression is fixed, never added here. Regenerate with "
               "`--write-known-failures FILE` only to drop entries or at integration, and "
               "curate the reasons.")


def _load_json(path: Optional[str], key: str) -> dict:
    if not path:
        return {}
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    return dict(data.get(key, {}))


def _write_json(path: str, note: str, key: str, values: dict) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"note": note, key: dict(sorted(values.items()))}, f, indent=2)
        f.write("\n")


def summarize(results: list[dict]) -> dict:
    """group -> Counter of outcomes (plus '*' for everything)."""
    groups: dict = collections.defaultdict(collections.Counter)
    for r in results:
        groups[r["group"]][r["outcome"]] += 1
        groups["*"][r["outcome"]] += 1
    return groups


def summary_line(counts) -> str:
    return (f"{counts['pass']} passed, {counts['fail'] + counts['error']} failed, "
            f"{counts['unsupported']} skipped")


def known_failures(path: Optional[str]) -> tuple[dict, dict]:
    """(every known failure: case id -> reason, those of the installed jaxlib only) from the
    known-failures file: its `known_failures` hold on every jaxlib; its
    `known_failures_by_jaxlib` map a jaxlib release (`"0.12"`: every 0.12.x; `"0.12.0.1"`)
    to the cases that fail on it alone, where its XLA computes otherwise than the case's
    stored values."""
    import jaxlib
    if not path:
        return {}, {}
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    installed = jaxlib.__version__
    of_jaxlib = {case: reason
                 for release, cases in data.get("known_failures_by_jaxlib", {}).items()
                 if installed == release or installed.startswith(release + ".")
                 for case, reason in cases.items()}
    return dict(data.get("known_failures", {}), **of_jaxlib), of_jaxlib


def gate(results: list[dict], floor: dict, known: dict, of_jaxlib: Optional[dict] = None
         ) -> list[str]:
    """Why the run does not meet the floor / known-failures bar (empty: it does). A folder's
    floor counts without the known failures of the installed jaxlib alone (`of_jaxlib`),
    which pass on the others."""
    problems = []
    groups = summarize(results)
    excused = collections.Counter(r["group"] for r in results if r["id"] in (of_jaxlib or {})
                                  and r["outcome"] != "pass")
    for group, minimum in sorted(floor.items()):
        passed = groups.get(group, collections.Counter())["pass"]
        if passed < int(minimum) - excused[group]:
            problems.append(f"{group}: {passed} passed, below the floor of {minimum}")
    for r in results:
        if r["outcome"] in ("fail", "error") and r["id"] not in known:
            problems.append(f"{r['id']}: {r['outcome']} and not a known failure: "
                            f"{r['message'][:300]}")
    return problems


# ---------------------------------------------------------------- command line

def _parser() -> argparse.ArgumentParser:
    p = exits.Parser(  # a usage error is one line (shlo2jax.tools.exits)
        prog="shlo2jax conformance",
        description="Run StableHLO conformance cases through the translation and report "
                    "pass / fail / unsupported / error per case.")
    p.add_argument("paths", nargs="+", metavar="PATH", help=".mlir files or folders (recursive)")
    p.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1,
                   help="worker processes (default: CPU count; 0 runs in this process)")
    p.add_argument("--timeout", type=float, default=120.0,
                   help="seconds per case before its worker is killed (default 120)")
    p.add_argument("-k", dest="patterns", action="append", default=[], metavar="PATTERN",
                   help="only cases whose id contains PATTERN, or a part of it matches "
                        "PATTERN as a glob (repeatable)")
    p.add_argument("--root", help="folder case ids are relative to (default: the conformance "
                                  "folder holding the paths, else the path itself)")
    p.add_argument("--json", help="write every case's outcome to this file")
    p.add_argument("--plugin", action="append", default=[], metavar="MODULE",
                   help="a module name or .py file each worker imports first, e.g. one that "
                        "registers custom-call translations (repeatable)")
    p.add_argument("-q", "--quiet", action="store_true", help="print only cases that do not pass")
    p.add_argument("--floor", help="JSON of minimum passes per folder; below it: exit 1")
    p.add_argument("--known-failures", help="JSON of case id -> reason; any other failing "
                                            "case: exit 1")
    p.add_argument("--write-floor", metavar="FILE", help="write this run's passes per folder")
    p.add_argument("--write-known-failures", metavar="FILE",
                   help="write this run's failing cases (keeping reasons already listed in "
                        "--known-failures)")
    add_option_flags(p)
    return p


def main(argv=None) -> int:
    args = _parser().parse_args(sys.argv[1:] if argv is None else list(argv))
    started = time.time()
    try:
        cases = select(discover(args.paths, args.root), args.patterns)
    except FileNotFoundError as e:
        print(f"shlo2jax: error: conformance: {e}", file=sys.stderr)  # one line, as every CLI error
        return 2
    floor = _load_json(args.floor, "floor")
    known, of_jaxlib = known_failures(args.known_failures)
    width = max((len(c.id) for c in cases), default=0)

    bar = Progress(len(cases), "conformance", quiet=args.quiet)

    def show(r: dict):
        bar.advance()
        if args.quiet and r["outcome"] == "pass":
            return
        message = r["message"].replace("\n", " ")
        tag = " (known failure)" if r["outcome"] in ("fail", "error") and r["id"] in known else ""
        bar.line(f"{r['outcome']:<11} {r['id']:<{min(width, 70)}}  {message}{tag}")

    try:
        with bar:
            results = run_cases(cases, args.jobs, args.timeout, show, args.plugin,
                                options_from(args))
    except RuntimeError as e:
        print(f"shlo2jax: error: conformance: {e}", file=sys.stderr)  # one line, as every CLI error
        return 2
    results.sort(key=lambda r: r["id"])
    groups = summarize(results)
    elapsed = time.time() - started
    print()
    for group in sorted(g for g in groups if g != "*"):
        print(f"{group}: {summary_line(groups[group])}")
    fixed = [r["id"] for r in results if r["outcome"] == "pass" and r["id"] in known]
    for case_id in fixed:
        print(f"note: {case_id} passes now: remove it from the known failures")
    print(f"({len(results)} cases in {elapsed:.0f} s)")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"summary": summary_line(groups["*"]), "seconds": round(elapsed, 1),
                       "cases": results}, f, indent=1)
            f.write("\n")
    if args.write_floor:
        _write_json(args.write_floor, _FLOOR_NOTE, "floor",
                    {g: c["pass"] for g, c in groups.items() if g != "*"})
    if args.write_known_failures:
        _write_json(args.write_known_failures, _KNOWN_NOTE, "known_failures",
                    {r["id"]: known.get(r["id"], f"{r['outcome']}: {r['message'][:200]}")
                     for r in results if r["outcome"] in ("fail", "error")})
    if floor and args.patterns:
        print("note: the floor is not checked on a run filtered with -k")
        floor = {}
    problems = gate(results, floor, known, of_jaxlib) if (args.floor or args.known_failures) \
        else []
    for problem in problems:
        print(f"GATE: {problem}")
    print(summary_line(groups["*"]))
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
