"""`compare(..., locate=True)`: where two backends (or two programs) part, op by op.

Translated backends record every op's results through `shlo2jax.probe`; the others run a copy
of the module whose extra outputs are the results of its ops (`instrumented_module_text`).
The two records' ops are matched by location (line and column; two programs whose locations
differ, by structure) and the first ops whose values differ beyond the tolerances are
reported, each with how far its operands already were: an op whose operands agree is where
the difference starts, one whose operands differ carries it from upstream.
"""

from __future__ import annotations

import contextlib
import difflib
import linecache
import os
import re
import time
from typing import Callable, NamedTuple

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import func as func_dialect

from shlo2jax import value_types as T
from shlo2jax.compat import make_ir_context
from shlo2jax.loader import load
from shlo2jax.module import format_location
from shlo2jax.probes import ProbeKey
from shlo2jax.tools.compare.backends import Backend
from shlo2jax.tools.compare.overlay import node_ids
from shlo2jax.tools.compare.report import Comparison, Divergence, OpError
from shlo2jax.tools.numerics import Errors, array_errors, error_figures
from shlo2jax.transforms.common import function_named
from shlo2jax.transforms.inline_calls import inline_calls


@contextlib.contextmanager
def inlined_body(program, function: str):
    """(module, target, ops): a copy of the program's module with its callees inlined into
    `function`, that function's op and its body's ops (the terminator last), inside an MLIR
    context of its own while the block runs."""
    text = program.mlir_module.operation.get_asm(large_elements_limit=None, enable_debug_info=True)
    with make_ir_context(), ir.Location.unknown():
        module = ir.Module.parse(text)
        inline_calls(module, function)
        target = function_named(module, function)
        yield module, target, [op.operation for op in target.regions[0].blocks[0].operations]


def instrumented_module_text(program, function: str, max_elements: int = 20_000_000):
    """For backends that cannot record intermediate values (the reference interpreter, XLA
    directly): the module with its callees inlined into `function` and the tensor result of
    every op of `function`'s body appended to its outputs. Returns (text, keys, n_outputs,
    operands): `keys[i]` names the op behind extra output i (a ProbeKey); `operands`, where
    each op's operands come from (see `Recording`). Constants are not recorded (they are the
    module's own on every backend); recording stops after `max_elements` elements (the later
    ops are then not located)."""
    with inlined_body(program, function) as (module, target, ops):
        terminator, body = ops[-1], ops[:-1]
        recorded, keys, total = [], [], 0
        operands = _block_operands(body)
        for index, op in enumerate(body):
            if op.name in CONSTANTS:
                continue
            for i, result in enumerate(op.results):
                try:
                    ttype = T.parse_type(str(result.type))
                except Exception:  # tokens, tuples, types the library does not model
                    continue
                if not isinstance(ttype, T.TensorType) or not ttype.is_static or \
                        ttype.quant is not None:
                    continue
                total += int(np.prod(ttype.shape, dtype=np.int64))
                if total > max_elements:
                    break
                recorded.append(result)
                keys.append(ProbeKey(index, i, op.name,
                                     format_location(op.location, program.source_name)))
            if total > max_elements:
                break
        n_outputs = len(terminator.operands)
        with ir.InsertionPoint(terminator), terminator.location:
            func_dialect.ReturnOp(list(terminator.operands) + recorded)
        terminator.erase()
        old = ir.FunctionType(ir.TypeAttr(target.attributes["function_type"]).value)
        new_type = ir.FunctionType.get(list(old.inputs),
                                       list(old.results) + [r.type for r in recorded])
        target.attributes["function_type"] = ir.TypeAttr.get(new_type)
        if "res_attrs" in target.attributes:
            del target.attributes["res_attrs"]
        return module.operation.get_asm(large_elements_limit=None, enable_debug_info=True), \
            keys, n_outputs, operands


# Ops not recorded (the module's own values on every backend).
CONSTANTS = ("stablehlo.constant", "mhlo.constant")


def _block_operands(body: list) -> dict:
    """Op index -> where each operand of the ops of one block comes from (see `Recording`)."""
    position = {op: index for index, op in enumerate(body)}
    def source(value):
        if isinstance(value, ir.BlockArgument):
            return ("arg", value.arg_number)
        owner = value.owner
        index = position.get(getattr(owner, "operation", owner))
        if index is None:
            return None
        return ("constant",) if body[index].name in CONSTANTS else (index, value.result_number)
    return {index: tuple(source(v) for v in op.operands) for index, op in enumerate(body)}


def module_operands(program, function: str) -> dict:
    """Where each operand of each op of the decoded module comes from (see `Recording`); the
    arguments of a function called from one place are its call's operands."""
    module = program.module
    source: dict = {value: ("arg", n)
                    for n, value in enumerate(module.functions[function].body.args)}
    calls: dict = {}
    for op in module.ops:
        source.update({value: (op.index, i) for i, value in enumerate(op.results)})
        if op.name == "func.call":
            calls.setdefault(op.attrs.get("callee"), []).append(op)
    for callee, sites in calls.items():
        fdef = module.functions.get(callee)
        if len(sites) == 1 and fdef is not None and fdef.body is not None and callee != function:
            source.update({arg: ("via", operand)
                           for arg, operand in zip(fdef.body.args, sites[0].operands)})
    def resolve(value):
        ref = source.get(value)
        for _ in range(len(calls) + 1):  # (a call inside a callee: one step per call)
            if ref is None or ref[0] != "via":
                return ref
            ref = source.get(ref[1])
        return None
    return {op.index: tuple(resolve(v) for v in op.operands) for op in module.ops}


class Recording(NamedTuple):
    """One backend's run with every op's results: `records` (ProbeKey -> its values, one per
    execution), the name its program was loaded under, its inputs, and `operands`: op index ->
    where each operand comes from, (op index, result), ("arg", n) (the function's argument n),
    ("constant",) (a constant not recorded: the module's own) or None (not known: a region's
    argument). A recording of cotangents (compare(grad=True)) has `readers` instead: (op
    index, result) -> the indices of the ops that read it ("return" for the function's)."""
    records: dict
    source_name: str
    inputs: list
    operands: dict
    readers: dict = {}


def instrumented_recording(backend: Backend, program, function: str, inputs: list):
    """The Recording of one run of the instrumented module."""
    text, keys, n_outputs, operands = instrumented_module_text(program, function)
    instrumented = load(text, program.options)
    outputs = backend.run_recorded(instrumented, function, inputs)
    return Recording({key: [value] for key, value in zip(keys, outputs[n_outputs:])},
                     program.source_name, inputs, operands)


def _probe_recording(backend: Backend, program, function: str, inputs: list, values):
    effective = backend.effective_program(program)
    records = backend.probe(program, function, inputs, values=values)[1]
    return Recording(records, effective.source_name, inputs,
                     module_operands(effective, function))


def timed_recording(progress: Callable, name: str, record: Callable):
    """`record()` (backend `name`'s Recording, None or a str saying why it failed), its start
    and end told to `progress` (a line each)."""
    progress(f"locate: recording every op of {name}")
    start = time.perf_counter()
    recording = record()
    what = "cannot record" if recording is None else "failed" if isinstance(recording, str) \
        else f"{sum(map(len, recording.records.values()))} values recorded"
    progress(f"locate: {name}: {what} in {time.perf_counter() - start:.1f} s")
    return recording


def locate(result: Comparison, program, function: str, inputs: list, by_name: dict,
           rtol, atol, max_ulp, limit: int, values="all", match: str = "location",
           progress: Callable = lambda text: None) -> None:
    """Probes where both backends run the translation (values inside called functions and
    loops included); otherwise the instrumented module, whose extra outputs are the results
    of the function's ops after inlining, runs on both. `match`: how the two records' ops
    correspond (see `matched_ops`); `progress`: told each recording's start and end."""
    recorded: dict = {}
    for pair in result.disagreeing():
        a, b = by_name[pair.a], by_name[pair.b]
        how = "probe" if a.probe is not None and b.probe is not None else "outputs"
        if (a.name, b.name, how) in recorded:
            continue
        recordings = []
        for x in (a, b):
            if (x.name, how) not in recorded:
                recorded[(x.name, how)] = timed_recording(progress, x.name, lambda: _recording(
                    x, how, program, function, inputs, values))
            recordings.append(recorded[(x.name, how)])
        recorded[(a.name, b.name, how)] = True
        if any(r is None for r in recordings):
            missing = ", ".join(x.name for x, r in zip((a, b), recordings) if r is None)
            result.locate_notes.append(f"{pair.a} vs {pair.b}: not located ({missing} cannot "
                                       "record intermediate values)")
            continue
        if any(isinstance(r, str) for r in recordings):
            why = "; ".join(r for r in recordings if isinstance(r, str))
            result.locate_notes.append(f"{pair.a} vs {pair.b}: recording failed: {why}")
            continue
        found = diverging_ops(*recordings, rtol, atol, max_ulp, limit, match)
        profile = error_profile(*recordings, rtol, atol, max_ulp, match)
        if how == "probe":  # (op indices of a's decoded module: Model Explorer's nodes known)
            nodes = node_ids(a.effective_program(program).module)
            profile = [op._replace(node=nodes.get(op.op_index)) for op in profile]
        result.profiles[(a.name, b.name)] = profile
        result.located += [Divergence(a.name, b.name, **d) for d in found]
        if not found:
            result.locate_notes.append(f"{pair.a} vs {pair.b}: every recorded intermediate "
                                       "value agrees; only the outputs differ")


def _recording(backend: Backend, how: str, program, function: str, inputs: list, values):
    """The backend's Recording; None where it cannot record; a str saying why it failed."""
    effective = backend.effective_program(program)
    try:
        if effective is None:
            return None
        if how == "probe":
            return _probe_recording(backend, program, function, inputs, values)
        return instrumented_recording(backend, effective, function, inputs)
    except Exception as e:  # reported; the comparison itself stands
        first = (str(e).strip().splitlines() or [""])[0]
        return f"{backend.name}: {type(e).__name__}: {first}"


def _positions(records, source_name: str = "") -> dict:
    """(location, result, k) -> key, k counting repeats of the first two in program order:
    aligns the records of two programs whose op indices or op names differ (a perturbed copy;
    the f64 reference, which builds complex constants from two parts). A location in the
    program's own text is keyed by its line and column whatever name the program was loaded
    under (a file's path, or `-` for text given as a string)."""
    seen: dict = {}
    out = {}
    for key in records:
        pair = (_own_position(key.location, source_name), key.result)
        k = seen[pair] = seen.get(pair, -1) + 1
        out[pair + (k,)] = key
    return out


def _own_position(location: str, source_name: str) -> str:
    """A location in the program's own text as `-:line:col`, whatever the program's name."""
    if source_name and location.startswith(f"{source_name}:"):
        return "-:" + location[len(source_name) + 1:]
    return location


def matched_ops(a: Recording, b: Recording, match: str = "location") -> list:
    """(key of a, key of b) of the ops that correspond, in a's program order. "location": by
    location (one program on two backends); "auto" (two programs): by location where most
    of the ops of both are the same ops at the same locations (an edited copy of one file),
    else by structure (`_aligned`)."""
    positions_a = _positions(a.records, a.source_name)
    positions_b = _positions(b.records, b.source_name)
    if match == "auto":
        same = sum(1 for p, key in positions_a.items() if p[0] != "unknown"
                   and p in positions_b and positions_b[p].name == key.name)
        if 2 * same < min(len(positions_a), len(positions_b)):
            return _aligned(a, b)
    return [(key, positions_b[p]) for p, key in positions_a.items() if p in positions_b]


def _aligned(a: Recording, b: Recording) -> list:
    """The two op sequences aligned by structure, each op an (op name, result, its type, its
    operands' types or argument numbers) in program order: the longest matching blocks
    (difflib's), and in a stretch replaced by one of the same length, the ops whose results
    have the same type (an op turned into another: an add into a subtract)."""
    keys_a, keys_b = list(a.records), list(b.records)
    shapes_a, shapes_b = _result_types(a), _result_types(b)
    def structure(r: Recording, key, types):
        return (key.name, key.result, types[(key.op_index, key.result)],
                tuple(types.get(ref) if ref and isinstance(ref[0], int) else ref
                      for ref in r.operands.get(key.op_index, ())))
    matcher = difflib.SequenceMatcher(None, [structure(a, k, shapes_a) for k in keys_a],
                                      [structure(b, k, shapes_b) for k in keys_b],
                                      autojunk=False)
    pairs = []
    for tag, i0, i1, j0, j1 in matcher.get_opcodes():
        if tag == "equal" or (tag == "replace" and i1 - i0 == j1 - j0):
            pairs += [(x, y) for x, y in zip(keys_a[i0:i1], keys_b[j0:j1])
                      if shapes_a[(x.op_index, x.result)] == shapes_b[(y.op_index, y.result)]]
    return pairs


def _result_types(r: Recording) -> dict:
    """(op index, result) -> (dtype, shape) of its first recorded value."""
    return {(key.op_index, key.result): (str(values[0].dtype), tuple(values[0].shape))
            for key, values in r.records.items() if values}


def _values(r: Recording, ref, by_result: dict, execution: int):
    """The value an operand `ref` had at the op's `execution` (an operand recorded fewer
    times, e.g. made before a loop: its last value); None where it was not recorded."""
    if ref is None or ref == ("constant",):
        return None
    if ref[0] == "arg":
        return np.asarray(r.inputs[ref[1]])
    values = by_result.get(ref)
    return None if not values else values[min(execution, len(values) - 1)]


# An operand both backends read from the same constant of the one module (not recorded); a
# result's cotangent coming from the function's return (the seeded cotangent itself).
_AGREES = Errors(0.0, 0.0, 0, 0, 0, note="")


def _operand_errors(a: Recording, b: Recording, key_a, key_b, execution: int, by_result,
                    rtol, atol, max_ulp) -> list:
    """Per operand of the op: the Errors between its two values (None where not recorded; a
    constant of the one module compared on two backends agrees)."""
    refs_a = a.operands.get(key_a.op_index, ())
    refs_b = b.operands.get(key_b.op_index, ())
    if len(refs_a) != len(refs_b):
        return [None] * len(refs_a)
    errors = []
    for ref_a, ref_b in zip(refs_a, refs_b):
        if ref_a == ref_b == ("constant",) and a.source_name == b.source_name:
            errors.append(_AGREES)
            continue
        x = _values(a, ref_a, by_result[0], execution)
        y = _values(b, ref_b, by_result[1], execution)
        errors.append(None if x is None or y is None else _errors(x, y, rtol, atol, max_ulp))
    return errors


def _errors(x, y, rtol, atol, max_ulp) -> Errors:
    """array_errors, answered at once where the two are the same array (most values of two
    runs that part at one op: the figures cost a pass or several over both)."""
    x, y = np.asarray(x), np.asarray(y)
    if x.dtype == y.dtype and x.shape == y.shape and \
            np.array_equal(x, y, equal_nan=np.issubdtype(x.dtype, np.inexact)):
        return Errors(0.0, 0.0, 0 if np.issubdtype(x.dtype, np.inexact) else None, 0, x.size)
    return array_errors(x, y, rtol, atol, max_ulp)


def _reader_errors(a: Recording, key, counterpart: dict, by_result, rtol, atol,
                   max_ulp) -> list:
    """(A cotangent) the Errors of each result of each op that reads the result `key` names:
    what its cotangent is made from (None where not recorded; the function's return, the
    seeded cotangent itself, agrees)."""
    errors = []
    for reader in a.readers.get((key.op_index, key.result), ()):
        if reader == "return":
            errors.append(_AGREES)
            continue
        results = [r for (index, r) in by_result[0] if index == reader]
        if not results:
            errors.append(None)
        for r in results:
            other = counterpart.get((reader, r))
            errors.append(None if other is None else _errors(
                by_result[0][(reader, r)][0], by_result[1][other][0], rtol, atol, max_ulp))
    return errors


def _source_line(location: str) -> str:
    """The line a location names, read from its file where that file is here (a producer's
    Python source, the MLIR file the program was read from); else ""."""
    where = re.match(r"(.+?):(\d+):\d+", location)
    if where is None or not os.path.isfile(where.group(1)):
        return ""
    return linecache.getline(where.group(1), int(where.group(2))).strip()


# Ops whose results the ops inside them make, those recorded too (shlo2jax.probe): their
# operands agreeing says nothing of where a difference starts.
_HOLDING = frozenset({"func.call", "stablehlo.while", "mhlo.while", "stablehlo.if", "mhlo.if",
                      "stablehlo.case", "mhlo.case"})


def diverging_ops(a: Recording, b: Recording, rtol, atol, max_ulp, limit: int,
                  match: str = "location", backward: bool = False) -> list:
    """`limit` ops whose recorded values differ, as the fields of a Divergence (without the
    backends' names): the op, where it is, by how much it differs, and how far its operands
    already were. Those whose operands agree come first (where a difference starts: in a
    function called several times or a loop, an op early in the program may differ only at a
    later execution, downstream of one later in the program), then the others, each in
    program order; the search ends at `limit` ops once one where a difference starts is
    among them. `backward`: the values are the cotangents of the ops' results, and the ops
    are the first of the backward pass (from the outputs back)."""
    by_result = tuple({(k.op_index, k.result): v for k, v in r.records.items()} for r in (a, b))
    found, starts = [], 0
    matched = matched_ops(a, b, match)
    counterpart = {(x.op_index, x.result): (y.op_index, y.result) for x, y in matched}
    names = {k.op_index: f"{k.name} at {k.location}" for k in a.records}
    for key_a, key_b in (reversed(matched) if backward else matched):
        pairs = zip(a.records[key_a], b.records[key_b])
        for execution, (x, y) in enumerate(pairs):
            errors = _errors(x, y, rtol, atol, max_ulp)
            if not errors.ok:
                found.append(dict(
                    op_index=key_a.op_index, name=key_a.name, location=key_a.location,
                    result=key_a.result, execution=execution, errors=errors,
                    operands=_reader_errors(a, key_a, counterpart, by_result, rtol, atol,
                                            max_ulp) if backward else _operand_errors(
                        a, b, key_a, key_b, execution, by_result, rtol, atol, max_ulp),
                    holds_ops=key_a.name in _HOLDING and not backward, cotangent=backward,
                    readers=[names.get(r, "") for r in a.readers.get(
                        (key_a.op_index, key_a.result), ()) if r != "return"],
                    other_name=key_b.name, other_location=key_b.location
                    if _own_position(key_b.location, b.source_name) !=
                    _own_position(key_a.location, a.source_name) else "",
                    source_line=_source_line(key_a.location)))
                starts += _starts(found[-1])
                break
        if len(found) >= limit and starts:
            break
    return sorted(found, key=lambda d: not _starts(d))[:limit]


def error_profile(a: Recording, b: Recording, rtol, atol, max_ulp,
                  match: str = "location") -> list:
    """Every matched op's OpError at its first execution, in a's program order: the error
    along the whole program (`diverging_ops` stops at the first ops that differ). Most values
    of two runs are equal up to where they part, and those cost one comparison each."""
    worst: dict = {}
    for key_a, key_b in matched_ops(a, b, match):
        x, y = a.records[key_a], b.records[key_b]
        if not x or not y or np.shape(x[0]) != np.shape(y[0]):
            continue
        op = OpError(key_a.op_index, key_a.name, key_a.location,
                     *_figures(np.asarray(x[0]), np.asarray(y[0]), rtol, atol, max_ulp))
        seen = worst.get(key_a.op_index)
        worst[key_a.op_index] = op if seen is None else _worse(seen, op)
    return list(worst.values())


def _figures(x, y, rtol, atol, max_ulp) -> tuple:
    """(max rel, max ULP, within the tolerances) of two values: at once where they are the
    same array (see `_errors`)."""
    if x.dtype == y.dtype and np.array_equal(x, y, equal_nan=np.issubdtype(x.dtype, np.inexact)):
        return 0.0, 0 if np.issubdtype(x.dtype, np.inexact) else None, True
    return error_figures(x, y, rtol, atol, max_ulp)


def _worse(x: OpError, y: OpError) -> OpError:
    """One op's two results' errors as one: the larger of each figure."""
    ulps = [u for u in (x.max_ulp, y.max_ulp) if u is not None]
    return x._replace(max_rel=max(x.max_rel, y.max_rel), max_ulp=max(ulps) if ulps else None,
                      ok=x.ok and y.ok)


def _starts(found: dict) -> bool:
    """Whether a difference starts at this op: every operand agrees (see Divergence.culprit)."""
    return not found["holds_ops"] and all(e is not None and e.ok for e in found["operands"])
