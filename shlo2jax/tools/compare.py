"""Cross-backend comparison: one module, several backends, differences located op by op.

    result = shlo2jax.compare("model.mlir", backends=["cpu", "interpreter", "xla-direct", "f64"])
    print(result.table())
    result.ok          # every pair of backends agrees within the tolerances

Backends:
  cpu, gpu, tpu  the translated program under jax.jit on the first device of that kind
  interpreter    jaxlib's StableHLO reference interpreter (in a child process)
  xla-direct     the module compiled directly by XLA through jaxlib, no translation (@main)
  f64            the translated program with every floating-point type widened to f64
                 (complex to complex128): a high-precision reference for float32 results
A `Backend` object adds another (e.g. a perturbed module, or a callable).

Every backend gets the same inputs: the user's, or seeded ones. Each pair of backends is
compared per output: max absolute error, max relative error |a-b|/max(|a|,|b|), max ULP
distance (in the narrower type of the two), and whether every element is within
`atol + rtol * max(|a|, |b|)` (or within `max_ulp` ULP when given). Integers and booleans
must be equal. Non-finite values must match (any NaN equals any NaN).

`locate=True`: for each pair that disagrees and whose both backends run the translation,
both are rerun recording every op's results (`shlo2jax.probe`) and the first ops, in program
order, whose results differ beyond the tolerances are reported with their locations.
"""

from __future__ import annotations

import dataclasses
import functools
import html
import itertools
import json
import time
from typing import Callable, Optional, Sequence

import jax
import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import func as func_dialect

from shlo2jax import value_types as T
from shlo2jax.compat import make_ir_context
from shlo2jax.errors import BackendUnavailable
from shlo2jax.executables.polymorphic import specialise
from shlo2jax.loader import load
from shlo2jax.module import format_location
from shlo2jax.options import LoadOptions
from shlo2jax.probes import ProbeKey, probe
from shlo2jax.program import Program
from shlo2jax.tools import reference
from shlo2jax.tools.inputs import seeded_inputs
from shlo2jax.tools.numerics import Errors, array_errors
from shlo2jax.transforms.inline_calls import inline_calls
from shlo2jax.transforms.upcast import upcast_module_text, widen
from shlo2jax import compat

BUILTIN_BACKENDS = ("cpu", "gpu", "tpu", "interpreter", "xla-direct", "f64")
DEFAULT_BACKENDS = ("cpu", "interpreter", "xla-direct", "f64")


# ------------------------------------------------------------------------------ backends

class Backend:
    """One way of running a function of a module.

    Subclasses implement `run_program(program, function, inputs) -> list[np.ndarray]`, which
    runs exactly the Program given; `effective_program(program)` says which program a
    backend runs for the one compared (itself by default; the f64 backend's widened copy; a
    perturbed source). Backends that run the translation also implement
    `probe(program, function, inputs) -> (outputs, ProbeRecords)`. `run_program` raises
    BackendUnavailable when the backend cannot run the module (it is then reported as
    skipped, with the reason).
    """

    name: str = "?"
    probe = None

    def effective_program(self, program):
        """None: this backend cannot run other programs (it overrides `run` only)."""
        return program if type(self).run_program is not Backend.run_program else None

    def run_program(self, program, function: str, inputs: list) -> list:
        raise NotImplementedError

    def run(self, program, function: str, inputs: list) -> list:
        return self.run_program(self.effective_program(program), function, inputs)


class CallableBackend(Backend):
    """Any function of the inputs returning the outputs (e.g. the original JAX function)."""

    def __init__(self, name: str, fn: Callable):
        self.name, self.fn = name, fn

    def effective_program(self, program):
        return None  # opaque: it cannot run an instrumented module either

    def run(self, program, function, inputs):
        return _as_list(self.fn(*inputs))


class TranslatedBackend(Backend):
    """The translated program on the first JAX device of `platform`. With `source`, a
    different module is translated (same signature): e.g. a deliberately perturbed copy."""

    def __init__(self, platform: str = "cpu", name: Optional[str] = None, source=None,
                 options: Optional[LoadOptions] = None):
        self.platform = platform
        self.name = name or platform
        self.source = source
        self.options = options  # None: the compared program's
        self._programs: dict = {}

    def device(self):
        try:
            devices = jax.devices(self.platform)
        except RuntimeError as e:
            raise BackendUnavailable(f"no {self.platform} device: {str(e).splitlines()[0]}") from None
        return devices[0]

    def effective_program(self, program):
        if self.source is None:
            return program
        if "source" not in self._programs:
            self._programs["source"] = load(self.source, self.options or program.options)
        return self._programs["source"]

    def inputs_for(self, inputs: list) -> list:
        return inputs

    def _call(self, program, function, inputs, call):
        device = self.device()
        fn = program[function]
        with compat.enable_x64():  # or device_put would narrow 64-bit inputs
            args = [jax.device_put(x, device) for x in self.inputs_for(inputs)]
            with jax.default_device(device):
                return call(fn, args)

    def run_program(self, program, function, inputs):
        return self._call(program, function, inputs,
                          lambda fn, args: [np.asarray(o) for o in _as_list(fn(*args))])

    def probe(self, program, function, inputs, values="all"):
        return self._call(self.effective_program(program), function, inputs,
                          lambda fn, args: probe(fn, *args, values=values))


class Float64Backend(TranslatedBackend):
    """The translated program with every floating-point type widened to f64 on CPU."""

    def __init__(self, platform: str = "cpu"):
        super().__init__(platform, name="f64")

    def effective_program(self, program):
        key = id(program)
        if key not in self._programs:
            self._programs[key] = (program, load(upcast_module_text(program),
                                                 program.options,
                                                 source_name=program.source_name))
        return self._programs[key][1]

    def inputs_for(self, inputs):
        return [widen(x) for x in inputs]


class InterpreterBackend(Backend):
    name = "interpreter"

    def __init__(self, timeout: float = 600.0, server=None):
        self.timeout = timeout
        self.server = server  # a reference.InterpreterServer to reuse, or None: a child per run

    def run_program(self, program, function, inputs):
        fn = program[function]
        if not all(isinstance(t, T.TensorType) and t.is_static and t.quant is None
                   for t in fn.input_types + fn.output_types):
            raise BackendUnavailable("the reference interpreter backend runs functions of "
                                     "static, non-quantized tensors only")
        text = reference.interpreter_module_text(program, fn, list(fn.input_types), 0, 0)
        text = reference.legalize_all_chlo(text)  # the interpreter has no chlo op
        try:
            outs = reference.run_interpreter(text, reference.split_complex(list(inputs)),
                                             timeout=self.timeout, server=self.server)
        except reference.InterpreterUnsupported as e:
            raise BackendUnavailable(str(e)) from None
        return reference.join_complex(outs, fn.output_types)


# Ops only a module converted from an after-optimizations HLO dump holds (sources/hlo.py).
_AFTER_OPTIMIZATIONS = frozenset({"mhlo.fusion", "mhlo.copy", "mhlo.bitcast"})


class XlaDirectBackend(Backend):
    name = "xla-direct"

    def __init__(self, platform: str = "cpu"):
        self.platform = platform

    def run_program(self, program, function, inputs):
        if function != "main":
            raise BackendUnavailable(f"XLA compiles the module's @main; @{function} is not it")
        try:
            jax.devices(self.platform)
        except RuntimeError:
            raise BackendUnavailable(f"no {self.platform} device") from None
        laid_out = sorted(set(program.module.op_histogram()) & _AFTER_OPTIMIZATIONS)
        if laid_out:
            raise BackendUnavailable(
                f"the module holds XLA's post-optimization ops ({', '.join(laid_out)}: an "
                "after-optimizations HLO dump), which XLA aborts on when it compiles them "
                "again without their layouts; compare the before_optimizations dump")
        run = reference.xla_direct(program, self.platform)
        return [np.asarray(o) for o in run(*inputs)]


def backend(spec, interpreter_timeout: float = 600.0) -> Backend:
    """A Backend from its name (see BUILTIN_BACKENDS) or a Backend / (name, callable)."""
    if isinstance(spec, Backend):
        return spec
    if isinstance(spec, tuple) and len(spec) == 2 and callable(spec[1]):
        return CallableBackend(*spec)
    if spec in ("cpu", "gpu", "tpu"):
        return TranslatedBackend(spec)
    if spec == "interpreter":
        return InterpreterBackend(interpreter_timeout)
    if spec == "xla-direct":
        return XlaDirectBackend()
    if spec == "f64":
        return Float64Backend()
    raise ValueError(f"unknown backend {spec!r}; choose from {', '.join(BUILTIN_BACKENDS)} "
                     "or pass a shlo2jax.tools.compare.Backend")


# ------------------------------------------------------- recording by extra outputs

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


# --------------------------------------------------------------------------- results

@dataclasses.dataclass
class BackendRun:
    name: str
    status: str                   # ok / skipped / error
    seconds: float = 0.0
    reason: str = ""
    outputs: Optional[list] = None


@dataclasses.dataclass
class PairResult:
    a: str
    b: str
    output: int
    errors: Errors


@dataclasses.dataclass
class Divergence:
    """An op whose results differ between two backends beyond the tolerances."""
    a: str
    b: str
    op_index: int
    name: str
    location: str
    result: int
    execution: int               # which execution of the op (ops in loops run many times)
    errors: Errors


@dataclasses.dataclass
class Comparison:
    function: str
    inputs: str                   # "seeded (seed N)" or "given"
    tolerances: dict
    runs: dict
    pairs: list
    located: list = dataclasses.field(default_factory=list)
    locate_notes: list = dataclasses.field(default_factory=list)

    @property
    def compared(self) -> bool:
        """Whether at least two backends produced results, not all NaN (else nothing was
        compared)."""
        return sum(r.status == "ok" for r in self.runs.values()) >= 2 and \
            self.vacuous != "nan"

    @functools.cached_property
    def vacuous(self) -> Optional[str]:
        """"nan" where every backend's every output element is NaN, "constant" where every
        output of every backend is one repeated value (agreeing then says little: the inputs
        may not reach the outputs, or they may be out of the model's range); else None."""
        outputs = [o for r in self.runs.values() if r.status == "ok" and r.outputs
                   for o in r.outputs]
        if not outputs:
            return None
        def all_nan(o):
            return o.size > 0 and np.issubdtype(o.dtype, np.inexact) and np.isnan(o).all()
        if all(all_nan(o) for o in outputs):
            return "nan"
        def constant(o):
            flat = o.reshape(-1)
            return o.size > 1 and bool((flat == flat[0]).all())
        if all(constant(o) for o in outputs):
            return "constant"
        return None

    @property
    def ok(self) -> bool:
        """At least two backends ran, every one agrees with every other, and none failed with
        an error: agreement is never reported on fewer than two."""
        return self.compared and all(r.status != "error" for r in self.runs.values()) and \
            all(p.errors.ok for p in self.pairs)

    def disagreeing(self) -> list:
        return [p for p in self.pairs if not p.errors.ok]

    def _repr_html_(self) -> str:
        """In a notebook: the backends, the error figures of each pair per output (the pairs
        beyond the tolerances in red), the diverging ops located, and the verdict."""
        e_ = html.escape
        runs = "".join(f"<tr><td>{e_(r.name)}</td><td>{e_(r.status)}</td><td>"
                       f"{f'{r.seconds:.3f} s' if r.status == 'ok' else e_(r.reason or '')}"
                       "</td></tr>" for r in self.runs.values())
        def pair_row(p):
            e = p.errors
            ulp = "-" if e.max_ulp is None else e.max_ulp
            verdict = e.note or (f"{e.mismatched}/{e.size}" if e.mismatched else "ok")
            return (f"<tr style=\"{'' if e.ok else 'color:#c00'}\"><td>{p.output}</td>"
                    f"<td>{e_(p.a)} vs {e_(p.b)}</td><td>{e.max_abs:.3g}</td>"
                    f"<td>{e.max_rel:.3g}</td><td>{ulp}</td><td>{e_(verdict)}</td></tr>")
        pairs = "".join(pair_row(p) for p in self.pairs)
        located = "".join(f"<li>{e_(d.a)} vs {e_(d.b)}: op #{d.op_index} <code>{e_(d.name)}"
                          f"</code> at <code>{e_(d.location)}</code>: max rel "
                          f"{d.errors.max_rel:.3g}, {d.errors.mismatched}/{d.errors.size} "
                          "beyond tolerance</li>" for d in self.located)
        notes = "".join(f"<li>{e_(n)}</li>" for n in self.locate_notes)
        return (f"<div><b>@{e_(self.function)}</b>, inputs {e_(self.inputs)}"
                "<table><tr><th>backend</th><th>status</th><th></th></tr>" + runs + "</table>"
                "<table><tr><th>output</th><th>pair</th><th>max abs</th><th>max rel</th>"
                "<th>max ulp</th><th>mismatched</th></tr>" + pairs + "</table>"
                + (f"<p>first diverging ops:</p><ul>{located}{notes}</ul>"
                   if located or notes else "")
                + f"<p><b>{e_(self.verdict)}</b></p></div>")

    def __repr__(self):  # (the outputs are many arrays: `table()` shows them as figures)
        return (f"<Comparison @{self.function}: {', '.join(self.runs)}; {self.verdict}"
                + (f"; {len(self.located)} diverging ops located" if self.located else "")
                + ">")

    @property
    def verdict(self) -> str:
        """The table's last line."""
        if self.disagreeing():
            return "backends DISAGREE"
        if self.vacuous == "nan":
            return ("nothing compared: every output is NaN on every backend (give inputs the "
                    "model expects: --inputs)")
        if not self.compared:
            return "nothing compared: fewer than two backends produced results"
        if self.ok and self.vacuous == "constant":
            return ("backends agree, but every output is one repeated value on every backend "
                    "(do the inputs reach the outputs? --inputs gives others)")
        return "backends agree" if self.ok else "backends DISAGREE"  # a backend failed

    def table(self) -> str:
        lines = [f"@{self.function}  inputs: {self.inputs}  tolerances: "
                 + ", ".join(f"{k}={v}" for k, v in self.tolerances.items() if v is not None)]
        width = max(len(n) for n in self.runs) if self.runs else 8
        for run in self.runs.values():
            detail = f"{run.seconds:8.3f} s" if run.status == "ok" else f"  {run.reason}"
            lines.append(f"  {run.name:<{width}}  {run.status:<7}{detail}")
        outputs = sorted({p.output for p in self.pairs})
        for index in outputs:
            sample = next(r.outputs[index] for r in self.runs.values() if r.outputs is not None)
            lines.append(f"output {index}: {sample.dtype}{list(sample.shape)}")
            lines.append(f"  {'pair':<{2 * width + 4}}  {'max abs':>10}  {'max rel':>10}  "
                         f"{'max ulp':>10}  {'mismatched':>12}")
            for p in (p for p in self.pairs if p.output == index):
                e = p.errors
                ulp = "-" if e.max_ulp is None else str(e.max_ulp)
                verdict = e.note or (f"{e.mismatched}/{e.size}" if e.mismatched else "ok")
                lines.append(f"  {p.a + ' vs ' + p.b:<{2 * width + 4}}  {e.max_abs:10.3g}  "
                             f"{e.max_rel:10.3g}  {ulp:>10}  {verdict:>12}")
        if self.located or self.locate_notes:
            lines.append("first diverging ops:")
            for d in self.located:
                e = d.errors
                ulp = "" if e.max_ulp is None else f", max ulp {e.max_ulp}"
                run = f" (execution {d.execution})" if d.execution else ""
                lines.append(f"  {d.a} vs {d.b}: op #{d.op_index} {d.name} result {d.result}{run} "
                             f"at {d.location}: max abs {e.max_abs:.3g}, max rel {e.max_rel:.3g}"
                             f"{ulp}, {e.mismatched}/{e.size} beyond tolerance")
            lines += [f"  {note}" for note in self.locate_notes]
        lines.append(self.verdict)
        return "\n".join(lines)

    def to_json(self) -> dict:
        def errors(e: Errors) -> dict:
            d = dataclasses.asdict(e)
            d["ok"] = e.ok
            return d
        return {
            "function": self.function, "inputs": self.inputs, "tolerances": self.tolerances,
            "ok": self.ok,
            "backends": {n: {"status": r.status, "seconds": r.seconds, "reason": r.reason}
                         for n, r in self.runs.items()},
            "pairs": [{"a": p.a, "b": p.b, "output": p.output, **errors(p.errors)}
                      for p in self.pairs],
            "located": [{**{k: v for k, v in dataclasses.asdict(d).items() if k != "errors"},
                         **errors(d.errors)} for d in self.located],
            "locate_notes": list(self.locate_notes),
        }

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2)


# --------------------------------------------------------------------------- compare

def _as_list(outs) -> list:
    if isinstance(outs, (tuple, list)):
        return [np.asarray(o) for o in outs]
    return [np.asarray(outs)]


def compare(source, backends: Sequence = DEFAULT_BACKENDS, *, function: Optional[str] = None,
            inputs: Optional[Sequence] = None, seed: int = 0, rtol: float = 1e-4,
            atol: float = 1e-6, max_ulp: Optional[int] = None, locate: bool = False,
            locate_limit: int = 3, locate_values="all", interpreter_timeout: float = 600.0,
            options: Optional[LoadOptions] = None, **option_values) -> Comparison:
    """Runs one function of a module on each backend with the same inputs and compares
    every pair of backends' outputs. `source`: anything `shlo2jax.load` accepts, or a
    loaded Program. See the module docstring for the backends and the error figures.

    `locate_values`: which ops the probes record when locating ("all", or op names, indices
    or locations as `shlo2jax.probe` takes them); recording every op of a large model holds
    all its intermediate values in memory at once, twice."""
    program = source if isinstance(source, Program) else load(source, options, **option_values)
    fn = program[function] if function else program.entry
    if inputs is None:
        inputs, how = seeded_inputs(fn, seed), f"seeded (seed {seed})"
    else:
        inputs, how = [np.asarray(x) for x in inputs], "given"
    fn.check_arguments(inputs)
    if fn.params or fn.constants:  # (values the source binds: a PyTorch/XLA bundle's) every
        # backend runs the module's own function, with the bound values among its arguments
        inputs = [np.asarray(x) for x in fn.convention.module_arguments(inputs)]
        name, program = fn.module_name, program.refined(program.mlir_module)
        fn = program[name]
    if fn.is_polymorphic:  # every backend runs the module refined to these inputs' shapes
        fn = specialise(fn, inputs)
        program = fn.program
    chosen = [backend(b, interpreter_timeout) for b in backends]
    names = [b.name for b in chosen]
    if len(set(names)) != len(names):
        raise ValueError(f"backend names repeat: {names}")
    runs = {}
    for b in chosen:
        start = time.perf_counter()
        try:
            outs = b.run(program, fn.name, list(inputs))
            runs[b.name] = BackendRun(b.name, "ok", time.perf_counter() - start, outputs=outs)
        except BackendUnavailable as e:
            runs[b.name] = BackendRun(b.name, "skipped", reason=str(e))
        except Exception as e:  # a backend failing is a result to report, not a crash
            message = " | ".join(ln.strip() for ln in str(e).strip().splitlines()[:3])
            runs[b.name] = BackendRun(b.name, "error", time.perf_counter() - start,
                                      reason=f"{type(e).__name__}: {message}")
    tolerances = {"rtol": rtol, "atol": atol, "max_ulp": max_ulp}
    pairs = []
    ran = [r for r in runs.values() if r.status == "ok"]
    for ra, rb in itertools.combinations(ran, 2):
        if len(ra.outputs) != len(rb.outputs):
            note = f"{len(ra.outputs)} vs {len(rb.outputs)} outputs"
            pairs.append(PairResult(ra.name, rb.name, 0, Errors(0, 0, None, 1, 1, None, note)))
            continue
        for i, (x, y) in enumerate(zip(ra.outputs, rb.outputs)):
            pairs.append(PairResult(ra.name, rb.name, i, array_errors(x, y, rtol, atol, max_ulp)))
    result = Comparison(fn.name, how, tolerances, runs, pairs)
    if locate:
        _locate(result, program, fn.name, list(inputs), {b.name: b for b in chosen},
                rtol, atol, max_ulp, locate_limit, locate_values)
    return result


def _locate(result: Comparison, program, function: str, inputs: list, by_name: dict,
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
