"""`compare(..., grad=True)`: the gradients of one seeded scalar loss compared across backends.

The loss is the sum of the outputs times fixed seeded cotangents, `sum_i sum(out_i * ct_i)`
(the real part where complex); each translated backend runs `jax.grad` of it with respect to
every floating-point input, and those gradients are what is compared.

With `locate`, the backward pass is recorded op by op: a copy of the function (callees
inlined) subtracts a zero argument from every floating-point result of its top-level ops, so
that the gradient of the loss with respect to that argument is minus the cotangent of the op's
result, read on both backends. The ops whose results' cotangents differ are reported from the
outputs back (the backward pass's order), those whose readers' cotangents agree first: there
the backward pass parts, at the derivative of the forward ops that read the result.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from shlo2jax import value_types as T
from shlo2jax.errors import BackendUnavailable
from shlo2jax.loader import load
from shlo2jax.module import format_location
from shlo2jax.probes import ProbeKey
from shlo2jax.tools.compare.backends import Backend, TranslatedBackend
from shlo2jax.tools.compare.locate import (Recording, diverging_ops, inlined_body,
                                           timed_recording)
from shlo2jax.tools.compare.report import Comparison, Divergence


def seeded_cotangents(fn, seed: int) -> list:
    """One seeded standard-normal array per floating-point output of `fn` (None for others):
    the weights of the loss, the same on every backend."""
    rng = np.random.default_rng([seed, 1])  # (not the inputs' stream)
    cotangents = []
    for t in fn.output_types:
        if not (isinstance(t, T.TensorType) and np.issubdtype(t.dtype, np.inexact)):
            cotangents.append(None)
            continue
        ct = rng.standard_normal(t.shape)
        if np.issubdtype(t.dtype, np.complexfloating):
            ct = ct + 1j * rng.standard_normal(t.shape)
        cotangents.append(ct.astype(t.dtype))
    return cotangents


def _loss(outputs, cotangents):
    outputs = outputs if isinstance(outputs, (tuple, list)) else (outputs,)
    return sum(jnp.real(jnp.sum(o * ct)) for o, ct in zip(outputs, cotangents)
               if ct is not None)


def differentiated(inputs: list) -> list:
    """The positions of the floating-point inputs: those the gradients are taken for."""
    return [i for i, x in enumerate(inputs) if np.issubdtype(np.asarray(x).dtype, np.inexact)]


class GradientBackend(Backend):
    """A translated backend whose outputs are the gradients of the loss with respect to the
    floating-point inputs (in their order)."""

    def __init__(self, inner: Backend, cotangents: list):
        self.inner, self.cotangents, self.name = inner, cotangents, inner.name

    def effective_program(self, program):
        return self.inner.effective_program(program)

    def run_program(self, program, function, inputs):
        if not isinstance(self.inner, TranslatedBackend):
            raise BackendUnavailable("gradients are compared on the translated backends (cpu, "
                                     "gpu, tpu, f64) only")
        wrt = differentiated(inputs)
        if not wrt or all(ct is None for ct in self.cotangents):
            raise BackendUnavailable("the loss needs a floating-point input and output")

        def grads(fn, args):
            def loss(*chosen):
                full = list(args)
                for i, x in zip(wrt, chosen):
                    full[i] = x
                return _loss(fn(*full), self.cotangents)
            return [np.asarray(g) for g in
                    jax.grad(loss, argnums=tuple(range(len(wrt))))(*[args[i] for i in wrt])]
        return self.inner.on_device(program, function, inputs, grads)

    def cotangent_recording(self, program, function: str, inputs: list) -> Recording:
        """The cotangent of every floating-point result of the function's top-level ops
        (callees inlined) on this backend, as a Recording."""
        effective = self.effective_program(program)
        text, keys, types, readers = cotangent_module_text(effective, function)
        copy = load(text, effective.options)
        zeros = [np.zeros(shape, dtype) for shape, dtype in types]
        n = len(inputs)

        def grads(fn, args):
            def loss(*points):
                return _loss(fn(*args[:n], *points), self.cotangents)
            return jax.grad(loss, argnums=tuple(range(len(zeros))))(*args[n:]) if zeros else ()
        values = self.inner.on_device(copy, function, list(inputs) + zeros, grads)
        records = {key: [-np.asarray(g)] for key, g in zip(keys, values)}
        return Recording(records, effective.source_name, inputs, {}, readers)


def cotangent_module_text(program, function: str):
    """The module with its callees inlined into `function`, which takes one more argument per
    floating-point result of its top-level ops and subtracts it from that result (x - 0 is x,
    -0 included). Returns (text, keys, types, readers): the ProbeKey and (shape, dtype) of each
    added argument, in order, and which ops read each result (see `Recording`)."""
    with inlined_body(program, function) as (module, target, ops):
        block = target.regions[0].blocks[0]
        readers = _readers(ops)
        keys, types = [], []
        for index, op in enumerate(ops[:-1]):
            for i, result in enumerate(op.results):
                ttype = _float_tensor(result.type)
                if ttype is None:
                    continue
                point = block.add_argument(result.type, op.location)
                with ir.InsertionPoint(ops[index + 1]), op.location:
                    moved = stablehlo.SubtractOp(result, point)
                result.replace_all_uses_except(moved.result, moved.operation)
                keys.append(ProbeKey(index, i, op.name,
                                     format_location(op.location, program.source_name)))
                types.append((ttype.shape, ttype.dtype))
        old = ir.FunctionType(ir.TypeAttr(target.attributes["function_type"]).value)
        target.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(
            [a.type for a in block.arguments], list(old.results)))
        if "arg_attrs" in target.attributes:
            del target.attributes["arg_attrs"]
        return module.operation.get_asm(large_elements_limit=None, enable_debug_info=True), \
            keys, types, readers


def _readers(ops: list) -> dict:
    """(op index, result) -> the indices of the ops of the block that read it, in order
    ("return" for the terminator)."""
    position = {op: index for index, op in enumerate(ops)}
    readers: dict = {}
    for index, op in enumerate(ops):
        reader = "return" if index == len(ops) - 1 else index
        for value in op.operands:
            if isinstance(value, ir.BlockArgument):
                continue
            owner = value.owner
            source = position.get(getattr(owner, "operation", owner))
            if source is not None:
                entry = readers.setdefault((source, value.result_number), [])
                if reader not in entry:
                    entry.append(reader)
    return readers


def _float_tensor(mlir_type):
    try:
        ttype = T.parse_type(str(mlir_type))
    except Exception:  # tokens, tuples, types the library does not model
        return None
    if isinstance(ttype, T.TensorType) and ttype.is_static and ttype.quant is None and \
            np.issubdtype(ttype.dtype, np.inexact):
        return ttype
    return None


def _cotangents(backend, program, function: str, inputs: list):
    """The backend's cotangent Recording, or a str saying why it failed."""
    try:
        return backend.cotangent_recording(program, function, inputs)
    except Exception as e:  # reported; the comparison itself stands
        first = (str(e).strip().splitlines() or [""])[0]
        return f"{backend.name}: {type(e).__name__}: {first}"


def locate_backward(result: Comparison, program, function: str, inputs: list, by_name: dict,
                    rtol, atol, max_ulp, limit: int, match: str = "location",
                    progress=lambda text: None) -> None:
    """For each pair whose gradients disagree: the first ops of the backward pass whose
    results' cotangents differ (see the module docstring); `progress`: as `locate`'s."""
    recorded: dict = {}
    for pair in result.disagreeing():
        if (pair.a, pair.b) in recorded:
            continue
        recordings = []
        for name in (pair.a, pair.b):
            if name not in recorded:
                recorded[name] = timed_recording(progress, name, lambda: _cotangents(
                    by_name[name], program, function, inputs))
            recordings.append(recorded[name])
        recorded[(pair.a, pair.b)] = True
        if any(isinstance(r, str) for r in recordings):
            why = "; ".join(r for r in recordings if isinstance(r, str))
            result.locate_notes.append(f"{pair.a} vs {pair.b}: recording the backward pass "
                                       f"failed: {why}")
            continue
        found = diverging_ops(*recordings, rtol, atol, max_ulp, limit, match, backward=True)
        result.located += [Divergence(pair.a, pair.b, **d) for d in found]
        if not found:
            result.locate_notes.append(f"{pair.a} vs {pair.b}: every recorded cotangent "
                                       "agrees; only the gradients differ")
