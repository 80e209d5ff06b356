"""Probes: the intermediate values of a run, recorded.

    outputs, records = probe(program, *args, values="all")

records every tensor result of the chosen ops during a run: `records[ProbeKey(op_index,
result, name, location, probe_id)]` is the list of its values, one per execution, in execution
order (an op in a loop body, or in a function called twice, has several). Values of ops at a
function's top level (callees are inlined while probing) come back as extra outputs of the
jitted run; values inside `while`/`if`/`case` bodies come back through ordered callbacks;
values inside other regions (reduction bodies, comparators, scatter updates) cannot leave
their computation and are listed in `records.skipped` instead. A top-level op that only moves
data (a reshape, transpose, broadcast or slice) of a value recorded at the top level is not an
output: its value is made from that value after the run, in numpy (`REBUILT`).
"""

from __future__ import annotations

import functools
import itertools
from typing import NamedTuple, Optional

import jax
import numpy as np
from jax.experimental import io_callback

from shlo2jax import compat
from shlo2jax import value_types as T
from shlo2jax.translate import Translator, TranslatorMode


# Every op's value is an output of the probed run, so XLA fuses little and generates a kernel
# per op: with LLVM's optimizations that compile took 26 s for a 1,564-op model (hf_whisper)
# where the plain run's took 3.5 s; without them 11 s. They only schedule the instructions
# (no fast-math: results are the same IEEE operations), and a probed run executes once.
PROBE_COMPILER_OPTIONS = {"xla_backend_optimization_level": 0,
                          "xla_llvm_disable_expensive_passes": True}

# XLA CPU's elemental emitters instead of its MLIR fusion emitters, where the jaxlib still
# has the choice (jax 0.7.2 and 0.10.2 do; 0.12.0.1 has only the latter): the fusion emitters
# build an MLIR pipeline per kernel, and a probed run has a kernel per op: hf_whisper's probe
# compile 4.0 s -> 1.2 s. Its 1,743 values (hf_bart's 1,637) are the same bit for bit, on cpu
# and f64; some transcendental ops (a power, a log1p, a tanh inside a loop) may differ by an
# ulp or so, which did not change the ops located on the corpus models checked
# (tests/tools/compare/test_locate.py checks one).
_ELEMENTAL_EMITTERS = {"xla_cpu_use_fusion_emitters": False}


@functools.cache
def probe_compiler_options() -> dict:
    """The options a probed run compiles with: PROBE_COMPILER_OPTIONS, and XLA CPU's
    elemental emitters where this jaxlib's XLA knows the option (one tiny compile says)."""
    options = {**PROBE_COMPILER_OPTIONS, **_ELEMENTAL_EMITTERS}
    try:
        jax.jit(lambda x: x + 1).lower(np.float32(0)).compile(options)
    except Exception as e:  # (jax's XlaRuntimeError/JaxRuntimeError, named per version)
        if "No such compile option" not in str(e):
            raise
        return dict(PROBE_COMPILER_OPTIONS)
    return options


class ProbeKey(NamedTuple):
    op_index: int
    result: int
    name: str
    location: str
    probe_id: Optional[str] = None


class ProbeRecords(dict):
    """ProbeKey -> list of values (one per execution, in order); `skipped`: keys whose values
    live inside a region that cannot hand them out (e.g. a reduction body)."""

    def __init__(self):
        super().__init__()
        self.skipped: set = set()

    def by_probe_id(self, probe_id: str) -> list:
        """The values recorded by `interpreter.probe` ops with this probe_id, in order."""
        return [v for k, vs in self.items() if k.probe_id == probe_id for v in vs]


# Regions of these ops become lax control flow, where ordered callbacks may run.
_CALLBACK_REGIONS = frozenset({"stablehlo.while", "mhlo.while", "stablehlo.if", "mhlo.if",
                               "stablehlo.case", "mhlo.case", "func.call"})


def _reshaped(op, x):
    return x.reshape(op.result_types[0].shape)


def _transposed(op, x):
    return x.transpose(op.params)


def _broadcast_in_dim(op, x):
    # (the operand's dimensions may land in any order: put them in increasing order first)
    order = sorted(range(len(op.params)), key=lambda i: op.params[i])
    x, shape = x.transpose(order), list(op.result_types[0].shape)
    expanded = [1] * len(shape)
    for d, size in zip(sorted(op.params), x.shape):
        expanded[d] = size
    return np.broadcast_to(x.reshape(expanded), shape)


def _sliced(op, x):
    starts, limits, strides = op.params
    return x[tuple(map(slice, starts, limits, strides))]


# Op name -> (op, operand's value) -> the op's value, in numpy, for ops that only move data:
# the same elements, bit for bit, as the run's (no arithmetic: nothing to round). Every op's
# value an output, XLA CPU compiles a kernel per output (with jax 0.12's fusion emitters, an
# MLIR pipeline each); these are about half of a transformer's ops (hf_whisper: 568 of 1,564).
REBUILT = {"stablehlo.reshape": _reshaped, "mhlo.reshape": _reshaped,
           "stablehlo.transpose": _transposed, "mhlo.transpose": _transposed,
           "stablehlo.broadcast_in_dim": _broadcast_in_dim,
           "mhlo.broadcast_in_dim": _broadcast_in_dim,
           "stablehlo.slice": _sliced, "mhlo.slice": _sliced}


def _shape_of(value) -> np.ndarray:
    """A stand-in of the value's shape and dtype that holds one element (a broadcast view)."""
    return np.broadcast_to(np.zeros((), value.dtype), value.shape)


class _Prober:
    def __init__(self, module, selected: frozenset, rebuilt: dict):
        self.module = module
        self.selected = selected
        self.rebuilt = rebuilt
        self.stack: list = []
        self.top: list = []          # (seq, key, traced value): extra outputs
        self.made: list = []         # (seq, key, values -> value): top-level values made after
        self.at_top: dict = {}       # value id -> (seq, stand-in): its latest top-level value
        self.arguments: dict = {}    # seq -> argument number: the run's arguments
        self.nested: dict = {}       # seq -> (key, [values]): filled by callbacks at run time
        self.skipped: set = set()
        self.seq = itertools.count()

    def reset(self, arguments: tuple, types: list, values: tuple):
        """Before a trace of the function whose body's arguments are `arguments` (ids)."""
        for collection in (self.stack, self.top, self.made, self.at_top, self.arguments,
                           self.nested, self.skipped):
            collection.clear()
        for n, (vid, rtype, value) in enumerate(zip(arguments, types, values)):
            if type(rtype) is not T.TensorType or rtype.quant is not None:
                continue
            seq = next(self.seq)
            self.arguments[seq] = n
            self.at_top[vid] = (seq, _shape_of(value))

    def __call__(self, op, results):
        if results is None:
            self.stack.append(op)
            if op.name == "func.call":
                self._enter(op)
            return
        self.stack.pop()
        for vid in op.results:  # (an inlined callee's values: this call's, from here on)
            self.at_top.pop(vid, None)
        if op.index not in self.selected:
            return
        owners = [o.name for o in self.stack if o.name != "func.call"]
        for i, (value, rtype) in enumerate(zip(results, op.result_types)):
            if type(rtype) is T.TokenType:
                continue
            key = _key(op, i)
            seq = next(self.seq)
            if type(rtype) is not T.TensorType or rtype.quant is not None:
                self.skipped.add(key)  # tuples and quantized values are not plain arrays
            elif not owners:
                self._at_top(op, i, seq, key, value)
            elif all(name in _CALLBACK_REGIONS for name in owners):
                self.nested[seq] = (key, [])
                io_callback(functools.partial(self._record, seq), None, value, ordered=True)
            else:
                self.skipped.add(key)

    def _enter(self, call):
        """A callee's arguments (evaluated inline: probes see its ops) are its call's operands."""
        callee = self.module.functions.get(call.attrs.get("callee"))
        if callee is None:
            return
        for vid, operand in zip(callee.body.args, call.operands):
            source = self.at_top.get(operand)
            if source is None:
                self.at_top.pop(vid, None)
            else:
                self.at_top[vid] = source

    def _at_top(self, op, result: int, seq: int, key, value):
        """An extra output of the run, unless the value is known without it: a constant's (a
        numpy array while tracing), or one `REBUILT` makes from a value recorded at the top
        level (checked on the stand-ins of both: the op's shape and dtype)."""
        rule = self.rebuilt.get(op.name)
        source = self.at_top.get(op.operands[0]) if rule is not None and op.operands else None
        stand_in = _shape_of(value)
        if not self.rebuilt:  # (every value an output: what the tests compare with)
            self.top.append((seq, key, value))
        elif isinstance(value, (np.ndarray, np.generic)):
            self.made.append((seq, key, lambda values, value=value: np.asarray(value)))
        elif source is not None and _fits(rule, op, source[1], stand_in):
            self.made.append((seq, key, lambda values, rule=rule, op=op, source=source[0]:
                              rule(op, values[source])))
        else:
            self.top.append((seq, key, value))
        self.at_top[op.results[result]] = (seq, stand_in)

    def _record(self, seq, value):
        self.nested[seq][1].append(np.array(value))

    def records(self, top_values, arguments) -> ProbeRecords:
        values = {seq: np.asarray(arguments[n]) for seq, n in self.arguments.items()}
        values.update((seq, np.asarray(v)) for (seq, _, _), v in zip(self.top, top_values))
        for seq, _, make in self.made:  # (in program order: a value's source made first)
            values[seq] = make(values)
        entries = [(seq, key, [values[seq]]) for seq, key, *_ in self.top + self.made]
        entries += [(seq, key, values) for seq, (key, values) in self.nested.items() if values]
        records = ProbeRecords()
        for _, key, values in sorted(entries, key=lambda e: e[0]):
            records.setdefault(key, []).extend(values)
        records.skipped = set(self.skipped)
        return records


def _fits(rule, op, operand: np.ndarray, result: np.ndarray) -> bool:
    """Whether the rule, on a stand-in of the operand, makes the op's result's shape and dtype
    (params it does not read as it expects: the op is recorded instead)."""
    try:
        made = rule(op, operand)
    except (TypeError, ValueError, IndexError):
        return False
    return made.shape == result.shape and made.dtype == result.dtype


def _in_opaque_regions(module) -> dict:
    """Op index -> key of ops nested in regions whose values cannot leave (reduction bodies,
    comparators...), whether or not the translation evaluates those regions."""
    found = {}

    def walk(region, opaque):
        for op in region.ops:
            if opaque:
                for i, rtype in enumerate(op.result_types):
                    if type(rtype) is T.TensorType:
                        found.setdefault(op.index, []).append(_key(op, i))
            for inner in op.regions:
                walk(inner, opaque or op.name not in _CALLBACK_REGIONS)
    for fdef in module.functions.values():
        walk(fdef.body, False)
    return found


def _key(op, result: int) -> ProbeKey:
    return ProbeKey(op.index, result, op.name, op.location, op.attrs.get("probe_id"))


def _select(module, values) -> frozenset:
    if isinstance(values, str) and values == "all":
        return frozenset(op.index for op in module.ops)
    if isinstance(values, str) and values == "probes":
        return frozenset(op.index for op in module.ops if op.name == "interpreter.probe")
    if isinstance(values, (str, int)):
        values = [values]
    chosen, unmatched = set(), []
    for selector in values:
        if isinstance(selector, (int, np.integer)):
            hits = [op.index for op in module.ops if op.index == selector]
        else:
            hits = [op.index for op in module.ops if selector in (
                op.name, op.location, op.attrs.get("probe_id") if isinstance(op.attrs, dict)
                else None)]
        if not hits:
            unmatched.append(selector)
        chosen.update(hits)
    if unmatched:
        raise ValueError(f"probe: no op matches {unmatched!r} (give op indices, op names, "
                         "locations or interpreter.probe ids, or 'all' / 'probes')")
    return frozenset(chosen)


def _statically_skipped(module, selected) -> set:
    return {key for index, keys in _in_opaque_regions(module).items() if index in selected
            for key in keys}


def probe(target, *args, values="all"):
    """Runs a Program (its entry) or Function under jax.jit, recording intermediate values.

    `values`: "all", "probes" (the `interpreter.probe` ops), or a list of op indices
    (`Op.index`), op names, locations or probe ids. Returns `(outputs, ProbeRecords)`.
    """
    fn = target.entry if hasattr(target, "entry") else target
    fn.check_arguments(args)
    if not all(t.is_static for t in fn.input_types if isinstance(t, T.TensorType)):
        raise NotImplementedError(f"probe: @{fn.name} has dynamic input shapes")
    prober = _Prober(fn.program.module, _select(fn.program.module, values), REBUILT)
    body = Translator(fn.program.module, fn.program.options, TranslatorMode(observer=prober)).function_body(
        fn.definition)

    def run(*call_args):
        prober.reset(fn.definition.body.args, fn.input_types, call_args)
        outs = body(*call_args)
        return outs, [value for _, _, value in prober.top]

    with compat.enable_x64():
        compiled = jax.jit(run).lower(*args).compile(probe_compiler_options())
        outs, top_values = compiled(*args)
        jax.block_until_ready((outs, top_values))
        jax.effects_barrier()
    outputs = outs[0] if len(outs) == 1 else tuple(outs)
    records = prober.records(top_values, args)
    records.skipped |= _statically_skipped(fn.program.module, prober.selected)
    return outputs, records
