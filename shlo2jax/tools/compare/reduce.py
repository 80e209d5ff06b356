"""`compare(..., reduce=DIR)` (CLI `--reduce DIR`): a disagreement shrunk to a small standalone
module that still shows it between the same two runs.

The first disagreeing pair's two runs are recorded op by op (the instrumented module of
`locate`: callees inlined, every op's result an extra output) and the op where the
difference starts is found (`diverging_ops`). The module is cut there: that op alone, its
operands the arguments of a new @main fed with the values one run recorded. Where that no
longer disagrees (a difference made by rounding upstream: float32's `(x*1e7 + 1) -
x*0.99999e7` parts from f64's at the subtract, but fed the rounded float32 operands alone f64
subtracts exactly as float32 does), the ops it depends on are added
back, 1, 2, 4, ... steps upstream, then removed again one chunk at a time (delta debugging,
Zeller's ddmin), each removed op's results becoming arguments fed with its recorded values.
Every candidate is checked by `compare` itself on the same backends and tolerances: what is
written reproduces as `shlo2jax compare DIR/reduced.mlir --inputs DIR/inputs.npz --backends
A,B` (with `--against DIR/reduced_other.mlir` for two programs).
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from typing import Callable, Optional

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import func as func_dialect

from shlo2jax.errors import InputError, UsageError
from shlo2jax.tools.compare.backends import Float64Backend
from shlo2jax.tools.compare.locate import (CONSTANTS, diverging_ops, inlined_body,
                                           instrumented_recording, matched_ops)
from shlo2jax.tools.compare.report import Reduced
from shlo2jax.transforms.inline_calls import remap_operands

# Candidates checked at most (each loads and runs two small modules): a bound on the time.
MAX_CHECKS = 150


def check_folder(path, what: str = "--reduce") -> None:
    """A UsageError, before any work, where the folder `path` cannot be written: a file in
    its place, no parent folder to make it in, or not writable."""
    path = os.path.abspath(os.fspath(path))
    if os.path.exists(path) and not os.path.isdir(path):
        raise UsageError(f"{what} {path}: is a file; give a folder")
    folder = path if os.path.isdir(path) else os.path.dirname(path)
    if not os.path.isdir(folder):
        raise UsageError(f"{what} {path}: no folder {folder} to make it in")
    if not os.access(folder, os.W_OK):
        raise UsageError(f"{what} {path}: the folder {folder} is not writable")


def reduce_disagreement(result, program, function: str, inputs: list, by_name: dict,
                        directory, other=None, max_checks: int = MAX_CHECKS, *,
                        compare, progress: Callable = lambda text: None) -> Reduced:
    """Writes the reduced module(s) and their arguments to `directory` for the first
    disagreeing pair of `result` (pairs with the interpreter last: every check runs it in a
    child process) and returns what was written. `program`, `function`, `inputs`: what
    `result` compared (the module's own function and arguments); `by_name`: its backends by
    name; `other`: the program compared against; `max_checks`: candidates checked at most;
    `compare`: the function that checks each candidate (`compare(..., reduce=DIR)` passes
    itself: this module is what it calls); `progress`: told the cut and each candidate's
    verdict as it comes (a line each)."""
    pairs = sorted(result.disagreeing(), key=lambda p: "interpreter" in (p.a, p.b))
    if not pairs:
        raise InputError("--reduce: nothing to reduce: every pair agrees")
    a, b = _own_first(by_name[pairs[0].a], by_name[pairs[0].b], program, other)
    tolerances = {k: result.tolerances[k] for k in ("rtol", "atol", "max_ulp")}
    start = time.perf_counter()
    recordings = [_recording(x, program, function, inputs) for x in (a, b)]
    match = "location" if other is None else "auto"
    found = diverging_ops(*recordings, tolerances["rtol"], tolerances["atol"],
                          tolerances["max_ulp"], 3, match)
    if not found:
        raise InputError(f"--reduce: {a.name} vs {b.name}: every recorded intermediate value "
                         "agrees; only the outputs differ, there is no op to cut at")
    cut = found[0]  # (where a difference starts first, where one does)
    progress(f"reduce: cut at op #{cut['op_index']} {cut['name']} ({a.name} vs {b.name})")
    values = {(k.op_index, k.result): v[0] for k, v in recordings[0].records.items()}
    counterpart = {x.op_index: y.op_index for x, y in matched_ops(*recordings, match)}
    with contextlib.ExitStack() as stack:
        mine = _Body(*stack.enter_context(inlined_body(program, function)))
        theirs = None if other is None else _Body(
            *stack.enter_context(inlined_body(other, function)))
        check = _Check(mine, theirs, counterpart, values, inputs, cut["op_index"],
                       lambda texts, args: _disagrees(texts, args, a, b, program, tolerances,
                                                      compare),
                       max_checks, progress)
        chosen = check.reduce()
        texts, arguments = check.candidate(chosen)
        written = _write(directory, texts, arguments)
        return Reduced(a.name, b.name, len(mine.ops), mine.op_count(chosen), written,
                       f"{cut['name']} at {cut['location']}", check.checks,
                       time.perf_counter() - start, _rerun(written, a, b, tolerances))


def _own_first(a, b, program, other) -> tuple:
    """The pair with first the backend that runs the program as it is (its recorded values
    are the reduced module's arguments: an f64 run's would not fit its types)."""
    if other is not None or a.effective_program(program) is program:
        return a, b
    if b.effective_program(program) is program:
        return b, a
    raise InputError(f"--reduce: neither {a.name} nor {b.name} runs the program as it is; "
                     "its recorded values would not fit a reduced module's arguments")


def _recording(backend, program, function: str, inputs: list):
    """The backend's run of the module whose extra outputs are every op's result (locate's)."""
    effective = backend.effective_program(program)
    if effective is None:
        raise InputError(f"--reduce: {backend.name} cannot run another module (it cannot "
                         "record intermediate values)")
    try:
        return instrumented_recording(backend, effective, function, inputs)
    except Exception as e:  # (a backend's own failure, told in one line)
        first = (str(e).strip().splitlines() or [""])[0]
        raise InputError(f"--reduce: recording {backend.name}'s intermediate values failed: "
                         f"{type(e).__name__}: {first}") from None


class _Body:
    """One program's function body after inlining: its ops (the terminator left out) and
    where each op's operands come from, then the values the ops nested in it read from the
    body (`captured`: a loop's body reads the function's constants): ("arg", n),
    ("constant", op index), (op index, result), or None (not known)."""

    def __init__(self, module, target, ops: list):
        self.module = module  # (its ops live while it does)
        self.ops = ops[:-1]
        self.arguments = list(target.regions[0].blocks[0].arguments)
        position = {op: index for index, op in enumerate(self.ops)}

        def index_of(value):
            return position.get(getattr(value.owner, "operation", value.owner))

        def source(value):
            if isinstance(value, ir.BlockArgument):
                return ("arg", value.arg_number)
            index = index_of(value)
            if index is None:
                return None
            if self.ops[index].name in CONSTANTS:
                return ("constant", index)
            return index, value.result_number

        def outer(value):
            if isinstance(value, ir.BlockArgument):
                return value in self.arguments
            return index_of(value) is not None
        self.captured = [_captured(op, outer) for op in self.ops]
        self.sources = [tuple(source(v) for v in list(op.operands) + captured)
                        for op, captured in zip(self.ops, self.captured)]

    def op_count(self, chosen: list) -> int:
        """The ops of the reduced function: the chosen ones and the constants they read."""
        return len(chosen) + len({s for i in chosen for s in self.sources[i]
                                  if s is not None and s[0] == "constant"})

    def upstream(self, chosen: set, steps: int) -> set:
        """`chosen` and the ops (not constants) at most `steps` operands upstream of it."""
        out, frontier = set(chosen), set(chosen)
        for _ in range(steps):
            frontier = {s[0] for i in frontier for s in self.sources[i]
                        if s is not None and isinstance(s[0], int)} - out
            if not frontier:
                break
            out |= frontier
        return out

    def plan(self, chosen: list) -> tuple:
        """(per chosen op, per operand: ("op", i, result) made by a chosen op, ("constant",
        i), or ("arg", n) an argument of the reduced function; the sources of the arguments
        in order). None where an operand's source is not known."""
        externals: dict = {}
        plan = []
        for i in chosen:
            refs = []
            for s in self.sources[i]:
                if s is None:
                    return None
                if s[0] == "constant":
                    refs.append(s)
                elif s[0] in chosen:
                    refs.append(("op",) + s)
                else:
                    refs.append(("arg", externals.setdefault(s, len(externals))))
            plan.append((i, refs))
        return plan, list(externals)

    def counterpart_plan(self, plan: list, counterpart: dict) -> Optional[list]:
        """The same plan in this (the other program's) body: each op's counterpart, its
        operands made the same way; None where they are not."""
        out, arguments = [], {}
        for i, refs in plan:
            j = counterpart.get(i)
            if j is None or len(self.sources[j]) != len(refs):
                return None
            mine = []
            for ref, s in zip(refs, self.sources[j]):
                if s is None or (ref[0] == "constant") != (s[0] == "constant"):
                    return None
                if ref[0] == "op" and s != (counterpart.get(ref[1]), ref[2]):
                    return None
                if ref[0] == "arg" and arguments.setdefault(s, ref[1]) != ref[1]:
                    return None
                mine.append(s if ref[0] == "constant" else ref)
            out.append((j, mine))
        return out

    def module_text(self, plan: list, arg_types: list, cut: int) -> str:
        """A module whose @main runs the planned ops (cloned, locations kept) and returns the
        results of the op `cut` (plan's op index), its arguments of `arg_types` (as text: the
        other program's body lives in a context of its own)."""
        context = self.ops[0].context
        with context, ir.Location.unknown(context):
            arg_types = [ir.Type.parse(t) for t in arg_types]
            module = ir.Module.create()
            results = list(self.ops[cut].results)
            with ir.InsertionPoint(module.body):
                main = func_dialect.FuncOp("main", ir.FunctionType.get(
                    arg_types, [r.type for r in results]))
            block = main.add_entry_block()
            made: dict = {}
            with ir.InsertionPoint(block):
                for i, refs in plan:
                    for ref in refs:
                        if ref[0] == "constant" and ref[1] not in made:
                            made[ref[1]] = self.ops[ref[1]].clone()
                    op = made[i] = self.ops[i].clone()
                    values = [block.arguments[ref[1]] if ref[0] == "arg" else
                              made[ref[1]].results[ref[2] if ref[0] == "op" else 0]
                              for ref in refs]
                    direct = len(op.operands)
                    for k, value in enumerate(values[:direct]):
                        op.operands[k] = value
                    remap_operands(op, dict(zip(self.captured[i], values[direct:])))
                func_dialect.ReturnOp(list(made[cut].results))
            try:
                valid = module.operation.verify()
            except ir.MLIRError:  # (the bindings raise, or answer False)
                valid = False
            return module.operation.get_asm(large_elements_limit=None, enable_debug_info=True) \
                if valid else None


def _captured(op, outer) -> list:
    """The values the ops nested in `op` read from outside it (those `outer` says), in order."""
    found: list = []
    for region in op.regions:
        for block in region.blocks:
            for view in block.operations:
                nested = view.operation
                for value in list(nested.operands) + _captured(nested, outer):
                    if value not in found and outer(value):
                        found.append(value)
    return found


class _Check:
    """The candidates of one reduction: sets of op indices of the program's body that hold
    the op `cut`, each built as a module (and the other program's, against one) and checked."""

    def __init__(self, mine: _Body, theirs: Optional[_Body], counterpart: dict, values: dict,
                 inputs: list, cut: int, disagrees, max_checks: int,
                 progress: Callable = lambda text: None):
        self.mine, self.theirs, self.counterpart = mine, theirs, counterpart
        self.values, self.inputs, self.cut = values, inputs, cut
        self.disagrees, self.max_checks, self.progress = disagrees, max_checks, progress
        self.checks, self.seen = 0, {}

    def reduce(self) -> list:
        """The smallest set found: the cut op alone where that disagrees; else the ops 1, 2,
        4, ... steps upstream added until it does, then removed by ddmin."""
        steps, size = 0, 0
        while True:
            chosen = self.mine.upstream({self.cut}, steps)
            if self.holds(chosen):
                break
            if len(chosen) == size:
                raise InputError(
                    f"--reduce: op #{self.cut} {self.mine.ops[self.cut].name} and every op it "
                    "depends on, as a module of their own, no longer disagree (the whole "
                    "program's outputs do: its difference needs more than these ops)")
            size, steps = len(chosen), max(1, 2 * steps)
        rest = self._ddmin(sorted(chosen - {self.cut}))
        return sorted(self._upstream_of_cut(set(rest) | {self.cut}))

    def _ddmin(self, items: list) -> list:
        n = 2
        while items and self.checks < self.max_checks:
            chunk = math.ceil(len(items) / n)
            for start in range(0, len(items), chunk):
                rest = items[:start] + items[start + chunk:]
                if self.holds(set(rest) | {self.cut}):
                    items, n = rest, max(n - 1, 2)
                    break
            else:
                if chunk == 1:
                    break
                n = min(2 * n, len(items))
        return items

    def _upstream_of_cut(self, chosen: set) -> set:
        """The ops of `chosen` the cut op reads, directly or through others of them."""
        reached, todo = {self.cut}, [self.cut]
        while todo:
            for s in self.mine.sources[todo.pop()]:
                if s is not None and isinstance(s[0], int) and s[0] in chosen - reached:
                    reached.add(s[0])
                    todo.append(s[0])
        return reached

    def holds(self, chosen: set) -> bool:
        """Whether the candidate (the ops of `chosen` the cut op depends on) disagrees."""
        key = frozenset(self._upstream_of_cut(chosen))
        if key not in self.seen:
            built = self.candidate(sorted(key))
            self.checks += built is not None
            self.seen[key] = built is not None and self.disagrees(*built)
            if built is not None:
                self.progress(f"reduce: candidate {self.checks} of at most {self.max_checks}, "
                              f"{self.mine.op_count(sorted(key))} ops: "
                              + ("still disagrees" if self.seen[key] else "agrees"))
        return self.seen[key]

    def candidate(self, chosen: list):
        """(the module texts: the program's and the other's, the arguments), or None where
        it cannot be built (an operand from an unknown source, a value not recorded, ops the
        other program does not make the same way)."""
        planned = self.mine.plan(chosen)
        if planned is None:
            return None
        plan, sources = planned
        arguments = [self._value(s) for s in sources]
        if any(v is None for v in arguments):
            return None
        types = [self._type(s) for s in sources]
        texts = [self.mine.module_text(plan, types, self.cut)]
        if self.theirs is not None:
            other = self.theirs.counterpart_plan(plan, self.counterpart)
            texts.append(None if other is None else
                         self.theirs.module_text(other, types, self.counterpart[self.cut]))
        return None if None in texts else (texts, arguments)

    def _value(self, source):
        if source[0] == "arg":
            return np.asarray(self.inputs[source[1]])
        value = self.values.get(source)
        return None if value is None else np.asarray(value)

    def _type(self, source):
        if source[0] == "arg":
            return str(self.mine.arguments[source[1]].type)
        return str(self.mine.ops[source[0]].results[source[1]].type)


def _disagrees(texts: list, arguments: list, a, b, program, tolerances: dict,
               compare) -> bool:
    """Whether `compare` on the same two backends still finds the candidate's runs apart."""
    try:
        if len(texts) == 2:
            result = compare(texts[0], [_fresh(a)], against=texts[1], inputs=arguments,
                             options=program.options, **tolerances)
        else:
            result = compare(texts[0], [_fresh(a), _fresh(b)], inputs=arguments,
                             options=program.options, **tolerances)
    except Exception:  # a candidate that does not load or run is no reproduction
        return False
    return bool(result.disagreeing())


def _fresh(b):
    """The backend for a new candidate: the f64 one keeps every program it widened."""
    return Float64Backend(b.platform) if isinstance(b, Float64Backend) else b


def _rerun(paths: list, a, b, tolerances: dict) -> str:
    """The command line that compares the reduced module(s) again."""
    which = f"--against {paths[1]} --backends {a.name}" if len(paths) == 3 else \
        f"--backends {a.name},{b.name}"
    limits = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in tolerances.items()
                      if v is not None)
    return f"shlo2jax compare {paths[0]} --inputs {paths[-1]} {which} {limits}"


def _write(directory, texts: list, arguments: list) -> list:
    os.makedirs(directory, exist_ok=True)
    paths = [os.path.join(directory, n) for n in ("reduced.mlir", "reduced_other.mlir")]
    if len(texts) == 1 and os.path.exists(paths[1]):
        os.remove(paths[1])  # (an earlier --against reduction's: it goes with no other file)
    paths = paths[:len(texts)]
    for path, text in zip(paths, texts):
        with open(path, "w") as f:
            f.write(text)
    paths.append(os.path.join(directory, "inputs.npz"))
    np.savez(paths[-1], **{f"arg_{i}": v for i, v in enumerate(arguments)})
    return paths
