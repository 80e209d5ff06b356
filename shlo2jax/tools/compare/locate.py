"""`compare(..., locate=True)`: where two backends part, op by op.

Translated backends record every op's results through `shlo2jax.probe`; the others run a copy
of the module whose extra outputs are the results of its ops (`instrumented_module_text`).
The two records are matched by location (line and column) and the first ops whose values
differ beyond the tolerances are reported.
"""

from __future__ import annotations

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import func as func_dialect

from shlo2jax import value_types as T
from shlo2jax.compat import make_ir_context
from shlo2jax.loader import load
from shlo2jax.module import format_location
from shlo2jax.probes import ProbeKey
from shlo2jax.tools.compare.backends import Backend
from shlo2jax.tools.compare.report import Comparison, Divergence
from shlo2jax.tools.numerics import array_errors
from shlo2jax.transforms.inline_calls import inline_calls


def instrumented_module_text(program, function: str, max_elements: int = 20_000_000):
    """For backends that cannot record intermediate values (the reference interpreter, XLA
    directly): the module with its callees inlined into `function` and the tensor result of
    every op of `function`'s body appended to its outputs. Returns (text, keys, n_outputs):
    `keys[i]` names the op behind extra output i (a ProbeKey). Constants are not recorded;
    recording stops after `max_elements` elements (the later ops are then not located)."""
    text = program.mlir_module.operation.get_asm(large_elements_limit=None, enable_debug_info=True)
    with make_ir_context(), ir.Location.unknown():
        module = ir.Module.parse(text)
        inline_calls(module, function)
        target = next(op.operation for op in module.body.operations
                      if op.operation.name == "func.func"
                      and op.operation.attributes["sym_name"].value == function)
        block = target.regions[0].blocks[0]
        ops = [op.operation for op in block.operations]
        terminator, body = ops[-1], ops[:-1]
        recorded, keys, total = [], [], 0
        for index, op in enumerate(body):
            if op.name in ("stablehlo.constant", "mhlo.constant"):
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
            keys, n_outputs


def _instrumented_records(backend: Backend, program, function: str, inputs: list):
    """ProbeRecords-like {key: [value]} from one run of the instrumented module."""
    text, keys, n_outputs = instrumented_module_text(program, function)
    instrumented = load(text, program.options)
    outputs = backend.run_program(instrumented, function, inputs)
    return {key: [value] for key, value in zip(keys, outputs[n_outputs:])}



def locate(result: Comparison, program, function: str, inputs: list, by_name: dict,
            rtol, atol, max_ulp, limit: int, values="all") -> None:
    """Probes where both backends run the translation (values inside called functions and
    loops included); otherwise the instrumented module, whose extra outputs are the results
    of the function's ops after inlining, runs on both."""
    recorded: dict = {}
    for pair in result.disagreeing():
        a, b = by_name[pair.a], by_name[pair.b]
        how = "probe" if a.probe is not None and b.probe is not None else "outputs"
        if (a.name, b.name, how) in recorded:
            continue
        records = []
        for x in (a, b):
            if (x.name, how) not in recorded:
                effective = x.effective_program(program)
                try:
                    if effective is None:
                        recorded[(x.name, how)] = None
                    elif how == "probe":
                        recorded[(x.name, how)] = (x.probe(program, function, inputs,
                                                           values=values)[1],
                                                   effective.source_name)
                    else:
                        recorded[(x.name, how)] = (_instrumented_records(x, effective, function,
                                                                         inputs),
                                                   effective.source_name)
                except Exception as e:  # reported; the comparison itself stands
                    first = (str(e).strip().splitlines() or [""])[0]
                    recorded[(x.name, how)] = f"{x.name}: {type(e).__name__}: {first}"
            records.append(recorded[(x.name, how)])
        recorded[(a.name, b.name, how)] = True
        if any(r is None for r in records):
            missing = ", ".join(x.name for x, r in zip((a, b), records) if r is None)
            result.locate_notes.append(f"{pair.a} vs {pair.b}: not located ({missing} cannot "
                                       "record intermediate values)")
            continue
        if any(isinstance(r, str) for r in records):
            why = "; ".join(r for r in records if isinstance(r, str))
            result.locate_notes.append(f"{pair.a} vs {pair.b}: recording failed: {why}")
            continue
        (records_a, name_a), (records_b, name_b) = records
        found = diverging_ops(records_a, records_b, rtol, atol, max_ulp, limit,
                              source_names=(name_a, name_b))
        result.located += [Divergence(a.name, b.name, *d) for d in found]
        if not found:
            result.locate_notes.append(f"{pair.a} vs {pair.b}: every recorded intermediate "
                                       "value agrees; only the outputs differ")


def _positions(records, source_name: str = "") -> dict:
    """(location, result, k) -> values, k counting repeats of the first two in program
    order: aligns the records of two programs whose op indices or op names differ (a
    perturbed copy; the f64 reference, which builds complex constants from two parts). A
    location in the program's own text is keyed by its line and column whatever name the
    program was loaded under (a file's path, or `-` for text given as a string)."""
    seen: dict = {}
    out = {}
    own = f"{source_name}:" if source_name else None
    for key, values in records.items():
        location = key.location
        if own is not None and location.startswith(own):
            location = "-:" + location[len(own):]
        pair = (location, key.result)
        k = seen[pair] = seen.get(pair, -1) + 1
        out[pair + (k,)] = (key, values)
    return out


def diverging_ops(records_a, records_b, rtol, atol, max_ulp, limit: int,
                  source_names=("", "")) -> list:
    """The first `limit` ops, in program order, whose recorded values differ:
    (op_index, name, location, result, execution, Errors) tuples. `source_names`: the names
    the two programs were loaded under (their own locations are matched by position)."""
    by_position = _positions(records_b, source_names[1])
    found = []
    for position, (key, values_a) in _positions(records_a, source_names[0]).items():
        other = by_position.get(position)
        if other is None:
            continue
        for execution, (x, y) in enumerate(zip(values_a, other[1])):
            errors = array_errors(x, y, rtol, atol, max_ulp)
            if not errors.ok:
                found.append((key.op_index, key.name, key.location, key.result, execution, errors))
                break
        if len(found) >= limit:
            break
    return found
