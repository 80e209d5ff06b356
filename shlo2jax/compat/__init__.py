"""Every use of a jax internal, and every difference between jax releases, lives in this
package, so a JAX upgrade touches one place; with them the MLIR context those internals make,
completed with the `quant` dialect jaxlib leaves out.

- this module: the release differences and jax's primitive machinery as shlo2jax uses it
  (rule tables, lowering helpers, contexts, kernels);
- `replay`: staging again an equation a lax call made, without the call (the tracing loop);
- `points`: the registry of compatibility points;
- `selfcheck` (`python -m shlo2jax.compat`): how each point resolves on the installed jax,
  and a smoke translation that fails by name when a release breaks one.

The features built on jax's primitive machinery (`shlo2jax.gradients`, `shlo2jax.primitives`,
`shlo2jax.executables.direct`) reach its rule tables and lowering helpers through the names
below, never through `jax._src` themselves.
"""

from __future__ import annotations

from typing import Callable, Optional

import contextlib
import dataclasses
import inspect

import jax
import numpy as np
from jax._src import compiler, core, dispatch, source_info_util, xla_bridge
from jax._src import linear_util as lu
from jax._src import config as _config
from jax._src import dtypes as _dtypes
from jax._src import effects as _effects
from jax._src.export import _export
from jax._src.interpreters import ad, batching, mlir
from jax._src.interpreters import partial_eval as pe
from jax._src.lax import lax as lax_internal
from jax._src.lax import linalg as lax_linalg
from jax._src.lax.control_flow import loops as _loops
from jax._src.lib import xla_client
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

__all__ = ["core", "dispatch", "ad", "batching", "mlir", "lax_internal"]


# ------------------------------------------------------------------ differences between releases
#
# Each difference between the jax releases shlo2jax supports (pyproject.toml's range) is one
# entry here, chosen once at import by asking jax for the feature (an attribute, a parameter),
# never by comparing version numbers: a release outside the tested range gets whichever variant
# it has, and the self-check (`python -m shlo2jax.compat`) says which entry resolved how.
# docs/guides/jax_versions.md lists them with the releases each variant belongs to.

from shlo2jax.compat.points import POINTS as _POINTS, params as _params, point as _point  # noqa: E402


# `core.auto_insert_reshard` was `core.standard_insert_pvary` (jax <= 0.9).
_insert_reshard = getattr(core, "auto_insert_reshard", None) or getattr(
    core, "standard_insert_pvary", None)
_point("auto_insert_reshard")(lambda: _insert_reshard.__name__)

# lax.mul's primitive binds `out_dtype` (jax >= 0.10); earlier it binds nothing.
MUL_PARAMS: dict = {"out_dtype": None} if "out_dtype" in _params(jax.lax.mul) else {}
_point("mul_p params")(lambda: repr(MUL_PARAMS))

# `mlir.aval_to_ir_type(ctx, aval)` (jax >= 0.10) was `aval_to_ir_type(aval)`.
_AVAL_TO_IR_TYPE_TAKES_CTX = "ctx" in _params(mlir.aval_to_ir_type)
_point("aval_to_ir_type")(
    lambda: "aval_to_ir_type(ctx, aval)" if _AVAL_TO_IR_TYPE_TAKES_CTX else "aval_to_ir_type(aval)")


def aval_to_ir_type(module_context, aval):
    """The MLIR type of `aval` inside a lowering (`module_context`: the rule's module context)."""
    if _AVAL_TO_IR_TYPE_TAKES_CTX:
        return mlir.aval_to_ir_type(module_context, aval)
    return mlir.aval_to_ir_type(aval)


# `jax.enable_x64` (jax >= 0.8) was `jax.experimental.enable_x64`.
def _find_enable_x64():
    if hasattr(jax, "enable_x64"):
        return jax.enable_x64
    from jax import experimental
    return experimental.enable_x64


_enable_x64 = _find_enable_x64()
_point("enable_x64")(lambda: f"{_enable_x64.__module__}.enable_x64")


def enable_x64() -> contextlib.AbstractContextManager:
    """A context in which 64-bit types stay 64-bit (the user's `jax_enable_x64` left alone)."""
    return _enable_x64(True)


# Every equation jax stages records where it was staged (`source_info_util.current()`: a
# SourceInfo with the Python traceback, captured per equation unless the context holds one),
# and lowering reads each one's innermost frame outside jax as its location (a cache of 64
# tracebacks, so every fresh one is a miss). A translation stages tens of thousands from the
# same few lines of shlo2jax, so one traceback, where the trace began (the caller's line), is
# pinned for the whole trace: `current()` then hands out the context's SourceInfo as it is.
_source_info_context = getattr(source_info_util, "_source_info_context", None)
_point("pinned traceback")(lambda: "source_info_util._source_info_context"
                           if _source_info_context is not None else "none (one per equation)")


class pinned_traceback:
    """Equations staged in this context record the traceback of where it was entered (the
    name stacks jax pushes inside it are kept), unless an enclosing context pinned one
    already; on a jax without the context, each equation captures its own as before.
    Exceptions pass through unchanged (jax's `user_context` would chain one to them)."""
    __slots__ = ("_previous",)

    def __enter__(self):
        context = _source_info_context
        if context is None or context.context.traceback:
            self._previous = None
        else:
            self._previous = context.context
            context.context = source_info_util.current()
        return self

    def __exit__(self, *exc):
        if self._previous is not None:
            _source_info_context.context = self._previous
        return False


# The attributes of an operation: iterating `op.attributes` yields names (jaxlib >= 0.8) or
# `NamedAttribute`s (<= 0.7). Reading a complex-valued dense attribute raises a TypeError on the
# newer bindings, and kills the process (std::terminate inside the bindings) on the older ones,
# through indexing and `NamedAttribute.attr` alike: there its presence is found in the printed
# form (large elements elided, so the cost does not grow with constants) and it is never read.
def _iteration_yields_names() -> bool:
    with make_ir_context(), ir.Location.unknown():
        probe = ir.Operation.create("shlo2jax.probe", attributes={"a": ir.UnitAttr.get()})
        return isinstance(next(iter(probe.attributes)), str)


_NAMES_ITERATE = None


def attribute_names(operation) -> list:
    """The names of `operation`'s attributes (none of them read)."""
    return [n if isinstance(n, str) else n.name for n in operation.attributes]


def attribute_items(operation) -> list:
    """`(name, attribute)` for each attribute of `operation`, the attribute None where the
    bindings cannot read it (a complex-valued dense attribute: decode it from the op's printed
    form)."""
    global _NAMES_ITERATE
    if _NAMES_ITERATE is None:
        _NAMES_ITERATE = _iteration_yields_names()
    attributes = operation.attributes
    if _NAMES_ITERATE:
        items = getattr(attributes, "items", None)
        if items is not None:
            try:  # (one call for them all: most ops of a large model hold no unreadable one)
                return items()
            except TypeError:  # one of them cannot be read: one by one below
                pass
        found = []
        for name in attributes:
            try:
                found.append((name, attributes[name]))
            except TypeError:
                found.append((name, None))
        return found
    named = list(attributes)
    unreadable = _complex_dense_names(operation, [n.name for n in named]) if named else ()
    return [(item.name, None if item.name in unreadable else item.attr) for item in named]


def walked_operations(operation) -> Optional[list]:
    """`operation` and every op nested in it, in program order (an op before the ops of its
    regions), each an `ir.Operation` (a block's operation list gives op views, a Python
    object of the op's class made for each); None where the bindings cannot walk."""
    walk = getattr(operation, "walk", None)
    result = getattr(ir, "WalkResult", None)
    if walk is None or result is None:
        return None
    found = []
    append, advance = found.append, result.ADVANCE

    def visit(op):
        append(op)
        return advance
    walk(visit, ir.WalkOrder.PRE_ORDER)
    return found


def declares_no_regions(operation) -> bool:
    """Whether no op of `operation`'s name has a region: a registered op (verified when parsed
    or built) whose definition declares none (its generated op view class's
    `_ODS_REGIONS`, `(count, whether exact)`); False where that is not known."""
    try:
        if not operation.context.is_registered_operation(operation.name):
            return False
        # (the generic OpView, the view of an op without a class of its own, says (0, True))
        view = type(operation.opview)
        return view is not ir.OpView and view.__dict__.get("_ODS_REGIONS") == (0, True)
    except Exception:  # noqa: BLE001 - not known: the op's regions are read
        return False


def _complex_dense_names(operation, names) -> frozenset:
    """The names of `operation`'s complex-valued dense attributes, read from its printed form
    (its regions and large elements left out): `name = dense<...> : tensor<...complex<...>>`."""
    text = operation.get_asm(print_generic_op_form=True, large_elements_limit=1,
                             skip_regions=True)
    if "complex<" not in text:
        return frozenset()
    found = set()
    for name in names:
        at = text.find(f"{name} = ")
        value = text[at + len(name) + 3:] if at >= 0 else ""
        if not value.startswith(("dense<", "dense_resource<")):
            continue
        rest = value[angle_bracket_end(value):].lstrip()
        if rest.startswith(":"):
            type_text = rest[1:].lstrip()
            if "complex<" in type_text[:angle_bracket_end(type_text)]:
                found.add(name)
    return frozenset(found)


def angle_bracket_end(text: str) -> int:
    """Index just past the `>` that closes the first `<` of `text` (0 when there is none)."""
    depth = 0
    for i, ch in enumerate(text):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
            if depth == 0:
                return i + 1
    return 0


_point("op.attributes iteration")(
    lambda: "names" if _iteration_yields_names() else "NamedAttribute (complex dense read from text)")


# Children that import jaxlib's MLIR bindings only (no jax: a fraction of the start-up) build
# their context with the dialects jax registers; this source, run first in such a child, binds
# `ir`, `chlo`, `mhlo`, `sdy`, `stablehlo`, `mpmd` (None before jaxlib 0.8, which lacks the
# dialect) and `register_jax_dialects(registry)` (`_jax_mlir_ext.register_dialects`, jaxlib >=
# 0.7; the `register_jax_dialects` extension module in 0.6).
CHILD_DIALECTS_SOURCE = """
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import chlo, mhlo, sdy, stablehlo
try:
    from jaxlib.mlir.dialects import mpmd
except ImportError:
    mpmd = None
try:
    from jaxlib.mlir._mlir_libs._jax_mlir_ext import register_dialects as register_jax_dialects
except ImportError:
    from jaxlib.mlir._mlir_libs.register_jax_dialects import (
        register_dialects as register_jax_dialects)
"""


def _child_dialects() -> str:
    namespace: dict = {}
    exec(CHILD_DIALECTS_SOURCE, namespace)
    return (f"mpmd {'present' if namespace['mpmd'] else 'absent'}, "
            f"{namespace['register_jax_dialects'].__module__}.register_dialects")


_point("child process dialects")(_child_dialects)


def integer_value(attr) -> int:
    """An `IntegerAttr`'s value, unsigned types read as unsigned: jaxlib <= 0.7 reads every
    integer attribute as signed (a `ui64` splat of 2**64 - 1 is -1 there)."""
    value = attr.value
    if value < 0:
        try:
            kind = ir.IntegerType(attr.type)
        except ValueError:  # an index: signed
            return value
        if kind.is_unsigned:
            value += 1 << kind.width
    return value


# ------------------------------------------------------------------ jax's primitive machinery

def auto_insert_reshard(*args):
    """The arguments of an n-ary primitive with their shard_map varying axes made to agree."""
    return _insert_reshard(*args)


def unbroadcast(aval, x):
    """`x` summed down to `aval`'s shape where batching broadcast size-1 dimensions."""
    return lax_internal._unbroadcast(aval, x)


def cotangent_aval(aval):
    """The abstract value of a cotangent of a value of `aval` (`to_ct_aval`, jax >= 0.9; the
    tangent's before)."""
    return aval.to_ct_aval() if hasattr(aval, "to_ct_aval") else aval.to_tangent_aval()


_point("cotangent aval")(lambda: "to_ct_aval" if hasattr(core.ShapedArray, "to_ct_aval")
                         else "to_tangent_aval")


def _lowering_entry(entry):
    """(rule, inline) of a lowering table entry: a `LoweringRuleEntry` (jax >= 0.7) or the bare
    rule (0.6, always inlined)."""
    if hasattr(entry, "rule"):
        return entry.rule, entry.inline
    return entry, True


_point("mlir._lowerings entries")(
    lambda: type(mlir._lowerings[lax_internal.add_p]).__name__)


def lowering_rule(prim):
    """`prim`'s default lowering rule, `rule(ctx, *args, **params)`."""
    return _lowering_entry(mlir._lowerings[prim])[0]


def copy_lowerings(source, prim) -> None:
    """Registers `source`'s lowering rules (the default and the platform-specific ones) as
    `prim`'s, with the same inlining."""
    rule, inline = _lowering_entry(mlir._lowerings[source])
    mlir.register_lowering(prim, rule, **_inline(inline))
    for platform, table in list(mlir._platform_specific_lowerings.items()):
        if source in table:
            rule, inline = _lowering_entry(table[source])
            mlir.register_lowering(prim, rule, platform=platform, **_inline(inline))


def _inline(inline: bool) -> dict:
    # `register_lowering(..., inline=)` (jax >= 0.7); 0.6 always inlines.
    return {"inline": inline} if "inline" in _params(mlir.register_lowering) else {}


# A primitive's direct linearization (`ad.primitive_linearizations`, what reverse mode uses
# where `jax_use_direct_linearize` is on: the default from 0.7, off in 0.6, where the rules
# are registered but only the JVP runs) is called by `LinearizeTrace.process_primitive` as
# `rule(is_vjp, nonzeros, *primals, **params)` (jax >= 0.9) or `rule(nonzeros, *primals,
# **params)` (0.6-0.8); both return `(primal_out, out_nonzero, residuals, linearized)` and
# call `linearized(residuals, *tangents)` under the tangent trace (jax 0.12: `(primal_out,
# out_nonzero, residuals, structured_residuals, linearized)`, and `linearized(residuals,
# structured_binders, *tangents)`). Which one is read from the
# positional parameters of jax's own fallback rule (`fallback_linearize_rule(prim, [is_vjp,]
# nonzeros, *primals)`), which `process_primitive` calls the same way; with neither (a jax
# that moved them) nothing is registered and the JVPs run.
def _linearize_convention():
    table = getattr(ad, "primitive_linearizations", None)
    fallback = getattr(ad, "fallback_linearize_rule", None)
    if not isinstance(table, dict) or fallback is None:
        return None
    positional = [p for p in inspect.signature(fallback).parameters.values()
                  if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD]
    convention = {3: "is_vjp", 2: "nonzeros"}.get(len(positional))
    # jax 0.12's rules also return structured residuals (None: none) before `linearized`,
    # which takes their binders after the residuals; the trace declares where it keeps them.
    trace = getattr(ad, "LinearizeTrace", None)
    if convention == "is_vjp" and "structured_residuals" in getattr(trace, "__annotations__", {}):
        return "structured"
    return convention


_LINEARIZE = _linearize_convention()


def _linearize_point() -> str:
    if _LINEARIZE is None:
        raise AttributeError("no ad.primitive_linearizations convention known: JVPs run")
    return {"structured": "rule(is_vjp, nonzeros, *primals) -> 5 values, structured "
                          "residuals (>= 0.12)",
            "is_vjp": "rule(is_vjp, nonzeros, *primals) (0.9-0.11)",
            "nonzeros": "rule(nonzeros, *primals) (<= 0.8)"}[_LINEARIZE]


_point("linearization rules")(_linearize_point)


def register_linearization(prim, rule) -> None:
    """Registers `rule(nonzeros, *primals, **params) -> (primal_out, out_nonzero, residuals,
    linearized)` as `prim`'s direct linearization: jax's reverse mode calls it with the
    primals under the primal trace, then `linearized(residuals, *tangents)` under the tangent
    trace (a tangent whose flag in `nonzeros` is False arrives as `ad.Zero`), where without it
    jax traces `prim`'s JVP into a jaxpr and partially evaluates it at every equation."""
    if _LINEARIZE == "structured":
        def structured(is_vjp, nonzeros, *primals, **params):
            primal_out, out_nonzero, residuals, linearized = rule(nonzeros, *primals, **params)
            return (primal_out, out_nonzero, residuals, None,
                    lambda res, _structured, *tangents: linearized(res, *tangents))
        ad.primitive_linearizations[prim] = structured
    elif _LINEARIZE == "is_vjp":
        ad.primitive_linearizations[prim] = (
            lambda is_vjp, nonzeros, *primals, **params: rule(nonzeros, *primals, **params))
    elif _LINEARIZE == "nonzeros":
        ad.primitive_linearizations[prim] = rule


def lower_jaxpr(ctx, jaxpr, consts, *args):
    """Lowers `jaxpr` (with its constants' IR values) at the insertion point of a lowering
    rule's context `ctx`: the outputs' IR values."""
    extra = {}
    if "const_lowering" in _SUBCOMP_PARAMS:  # jax >= 0.7
        extra["const_lowering"] = ctx.const_lowering
    if "outer_traceback" in _SUBCOMP_PARAMS:  # jax >= 0.9
        extra["outer_traceback"] = ctx.traceback
    outs, _ = mlir.jaxpr_subcomp(
        ctx.module_context, jaxpr, ctx.name_stack, mlir.TokenSet(), consts, *args,
        dim_var_values=ctx.dim_var_values, **extra)
    return outs


_SUBCOMP_PARAMS = _params(mlir.jaxpr_subcomp)
_point("jaxpr_subcomp keywords")(
    lambda: ", ".join(sorted(_SUBCOMP_PARAMS & {"const_lowering", "outer_traceback"})) or "none")


def jit_disabled() -> bool:
    """Whether `jax.disable_jit` is in force."""
    return _config.disable_jit.value


def stablehlo_versions() -> tuple:
    """(oldest, newest) StableHLO versions, as (major, minor, patch), of the VHLO portable
    artifacts this jaxlib reads (it reads an artifact of its own version and older ones
    back to its minimum; a newer one only where every op it uses exists here)."""
    def parse(text):
        return tuple(int(p) for p in text.split("."))
    return parse(stablehlo.get_minimum_version()), parse(stablehlo.get_current_version())


def make_ir_context():
    """An MLIR context with every dialect jax registers (func, stablehlo, chlo, sdy, mhlo, ...)."""

    context = _new_jax_context()
    # The conformance `check` and `interpreter` dialects are not registered in jaxlib.
    context.allow_unregistered_dialects = True
    load_quant_dialect(context)  # `!quant.uniform` types must parse
    return context


# jax after 0.11 reuses one MLIR context per thread from `mlir.make_ir_context` (jax-ml/jax
# commit 044efe820d, "one MLIR context per Python thread"), building it in `_create_ir_context`.
# The contexts made above are shlo2jax's own (unregistered dialects allowed, `quant` loaded,
# modules held past a call): they must not be jax's shared one, so they come from the builder
# where jax has split it out. (Read from jax's source; no such release installs here.)
_new_jax_context = getattr(mlir, "_create_ir_context", None) or mlir.make_ir_context
_point("MLIR context")(lambda: f"mlir.{_new_jax_context.__name__}")


_QUANT_ARTIFACT: Optional[bytes] = None
QUANT_WARMUP = """func.func @q(%a: tensor<1x!quant.uniform<i8:f32, 1.0>>) -> tensor<1xf32> {
  %d = stablehlo.uniform_dequantize %a : (tensor<1x!quant.uniform<i8:f32, 1.0>>) -> tensor<1xf32>
  return %d : tensor<1xf32>
}"""


def load_quant_dialect(context) -> None:
    """Loads MLIR's `quant` dialect into `context` so `!quant.uniform` types parse.

    jaxlib registers no `quant` dialect with its Python contexts; the StableHLO
    portable-artifact reader loads it as a dependency, so reading a tiny artifact
    with a quantized type (made once by jaxlib's own serializer) brings it in."""
    global _QUANT_ARTIFACT
    if _QUANT_ARTIFACT is None:
        _QUANT_ARTIFACT = bytes(stablehlo.serialize_portable_artifact_str(
            QUANT_WARMUP, stablehlo.get_minimum_version()))
    with context:
        stablehlo.deserialize_portable_artifact(context, _QUANT_ARTIFACT)


def refine_polymorphic_shapes(module):
    """jax's shape refinement of an exported module (StableHLO refinement plus inlining,
    shape assertions and jax.export's dynamic custom calls)."""
    return mlir.refine_polymorphic_shapes(module)


def with_serialized_module(exported, module):
    """`exported` (a `jax.export.Exported`) with `module` serialized as its module bytes, the
    way `jax.export` serializes a module it lowered (a VHLO artifact, jax's target version)."""
    with module.context:
        serialized = _export._module_to_bytecode(module)
    return dataclasses.replace(exported, mlir_module_serialized=serialized)


def hlo_sharding_from_proto(data: bytes):
    """The `HloSharding` of a serialized `OpSharding` proto (as jax.export writes it)."""
    proto = xla_client.OpSharding()
    proto.ParseFromString(data)
    return xla_client.HloSharding.from_proto(proto)


def effect_from_type_name(type_name: str):
    """The effect whose class prints as `type_name` (how jax.export serializes an effect),
    made with its nullary constructor, or None where no registered effect type has that name."""
    for effect_type in _effects.lowerable_effects._effect_types:
        if str(effect_type) == type_name:
            return effect_type()
    return None


def compile_mlir_module(module_text, platform: str = "cpu", num_replicas: int = 1,
                        num_partitions: int = 1):
    """Compiles a StableHLO module with XLA directly (no translation) on one device.

    Returns `run(*arrays) -> list of arrays`. This is the oracle for translated
    programs: the same module, compiled as-is by the XLA that jax uses.
    """

    backend = xla_bridge.get_backend(platform)
    initialize_kernels((platform,))
    devices = backend.devices()[:num_replicas * num_partitions]
    options = compiler.get_compile_options(num_replicas=num_replicas,
                                           num_partitions=num_partitions)
    executable = backend.compile_and_load(module_text, executable_devices=xla_client.DeviceList(
        tuple(devices)), compile_options=options)

    def run(*arrays):
        with enable_x64():
            args = [jax.device_put(a, devices[0]) for a in arrays]
            results = executable.execute_sharded(args)
            return [per_device[0] for per_device in
                    results.disassemble_into_single_device_arrays()]
    return run


# The primitive `lax.while_loop` binds: params cond_jaxpr, body_jaxpr (closed jaxprs),
# cond_nconsts, body_nconsts; operands: cond's constants, body's, then the carry.
WHILE_P = _loops.while_p
jaxpr_as_fun = core.jaxpr_as_fun


# What `pe.trace_to_jaxpr_dynamic` closed over comes back beside the jaxpr, bound to its
# `constvars` (jax <= 0.11) or to its leading `invars` (jax 0.12, where every jaxpr is closed
# and `constvars` is empty): [*constvars, *invars] pairs with [*consts, *args] in both.
_point("staged jaxpr constants")(lambda: "leading invars (jaxprs closed)"
                                 if not hasattr(core, "ClosedJaxpr") else "constvars")


def trace_jaxpr(fn, args, name: str):
    """(jaxpr, env): `fn(*args)` (a list of arrays) staged into a jaxpr as lax's control flow
    stages a body, and `env` mapping the jaxpr's binders to their values (what it closed
    over, which may be the enclosing trace's tracers, then `args`). Its debug info names no
    argument: jax.make_jaxpr's reads every argument's name and source, about as long again
    as staging a small loop."""
    debug = lu.DebugInfo(name, name, None, None)
    jaxpr, _, consts = pe.trace_to_jaxpr_dynamic(lu.wrap_init(fn, debug_info=debug),
                                                 [core.typeof(a) for a in args])
    return jaxpr, dict(zip([*jaxpr.constvars, *jaxpr.invars], [*consts, *args]))


def closed_jaxpr(jaxpr, env: dict, args) -> tuple:
    """(closed jaxpr, consts): `trace_jaxpr`'s jaxpr as a control-flow primitive's param takes
    it, what it closed over taken as its leading arguments (`consts`, their values), `args`
    then; as `lax.while_loop` passes its cond and body (jax <= 0.11: the constvars made
    leading invars of a ClosedJaxpr with no constants; jax 0.12: the jaxpr as it is)."""
    binders = [*jaxpr.constvars, *jaxpr.invars]
    consts = [env[v] for v in binders[:len(binders) - len(args)]]
    if _CLOSED_JAXPR is None:
        return jaxpr, consts
    return _CLOSED_JAXPR(pe.convert_constvars_jaxpr(jaxpr), ()), consts


_CLOSED_JAXPR = getattr(core, "ClosedJaxpr", None)


def set_batching_rule(prim, rule):
    """Registers `rule(args, dims, **params) -> (outs, out_dims)` as prim's vmap rule."""
    batching.primitive_batchers[prim] = rule


def lax_geqrf(a):
    """jax's QR factorisation step (Householder reflectors and their taus, LAPACK's geqrf
    format), which `jax.lax.linalg` does not export."""
    return lax_linalg.geqrf(a)


def lax_geqp3(a, jpvt):
    """jax's column-pivoted QR (LAPACK's geqp3), which `jax.lax.linalg` does not export."""
    return lax_linalg.geqp3(a, jpvt)


def lax_ormqr(a, taus, c, *, left: bool, transpose: bool):
    """Q (Q^H with `transpose`) of the Householder reflectors `(a, taus)` applied to `c`, on the
    left or the right (LAPACK's ormqr/unmqr): `jax.lax.linalg.ormqr` (jax >= 0.10), before it
    the full Q built by `householder_product` and multiplied."""
    if _HAS_ORMQR:
        return jax.lax.linalg.ormqr(a, taus, c, left=left, transpose=transpose)
    import jax.numpy as jnp
    rows, k = a.shape[-2], taus.shape[-1]
    # Reflectors past the k-th have tau 0 (the identity): pad to a square, so Q is all of Q.
    square = jnp.pad(a[..., :k], [(0, 0)] * (a.ndim - 1) + [(0, rows - k)])
    q = jax.lax.linalg.householder_product(
        square, jnp.pad(taus, [(0, 0)] * (taus.ndim - 1) + [(0, rows - k)]))
    if transpose:
        q = jnp.conj(jnp.swapaxes(q, -1, -2))
    precision = jax.lax.Precision.HIGHEST
    return jnp.matmul(q, c, precision=precision) if left else jnp.matmul(c, q, precision=precision)


_HAS_ORMQR = hasattr(jax.lax.linalg, "ormqr")
_point("lax.linalg.ormqr")(lambda: "jax.lax.linalg.ormqr" if _HAS_ORMQR
                           else "householder_product and a product")


def lax_tridiagonal_solve_perturbed(dl, d, du, b):
    """The tridiagonal solve with tiny pivots perturbed, so a singular system still gets an
    answer (`perturb_singular=True`, jax >= 0.10). Before it jax had no such solve: the plain
    one, whose answer to a singular system is not finite."""
    if _PERTURBED_SOLVE:
        return jax.lax.linalg.tridiagonal_solve(dl, d, du, b, perturb_singular=True)
    return jax.lax.linalg.tridiagonal_solve(dl, d, du, b)


_PERTURBED_SOLVE = "perturb_singular" in _params(jax.lax.linalg.tridiagonal_solve)
_point("tridiagonal_solve(perturb_singular=)")(
    lambda: "perturb_singular=True" if _PERTURBED_SOLVE else "plain solve (singular: not finite)")


def stable_custom_call_targets() -> frozenset:
    """The custom call targets whose ABI `jax.export` guarantees stable (jax's own kernels:
    LAPACK, cuSOLVER, ... FFI handlers)."""
    return frozenset(_export._CUSTOM_CALL_TARGETS_GUARANTEED_STABLE)


def registered_custom_call_targets(platform: str) -> frozenset:
    """The custom call targets XLA's `platform` ("cpu", "cuda", ...) implements in this process
    (a few dozen names: asked at each lowering, so a kernel registered later counts)."""
    try:
        return frozenset(xla_client.custom_call_targets(platform))
    except Exception:  # a platform XLA does not know here
        return frozenset()


def initialize_kernels(platforms) -> None:
    """Binds jaxlib's kernels for `platforms` to their libraries before a module that calls them
    is compiled: the CPU LAPACK kernels are registered with XLA at import, but until jax
    initializes them (its linalg lowerings do, and `Exported.call`) they call through null
    function pointers, and the process dies. Before jax 0.10 jaxlib initialized them when
    `jaxlib.lapack` was imported, which jax does at its own import: nothing is left to do."""
    if _ENSURE_BACKENDS is not None:
        _ENSURE_BACKENDS(tuple(platforms))


_ENSURE_BACKENDS = getattr(_export, "_ensure_backends_initialized", None)
_point("kernel initialization")(
    lambda: "_export._ensure_backends_initialized" if _ENSURE_BACKENDS is not None
    else "at jaxlib.lapack's import")


# The program a child process runs to turn HLO into StableHLO (`shlo2jax.sources.hlo`): jaxlib's
# HLO text parser aborts the process on some malformed input, so it never runs in ours. It
# imports jaxlib only (0.4 s, not jax's 1.3 s); the parser and `hlo_to_stablehlo` moved between
# jaxlib releases (`jaxlib._hlo` / `jaxlib._jax` / `jaxlib.xla_extension`). argv[1]: "text"
# (HLO text) or "proto" (a serialized HloModuleProto) on stdin; StableHLO bytecode on stdout;
# exit status 3: a Python exception, its message on stdout.
HLO_TO_STABLEHLO_CHILD = """
import importlib, sys
def find(name):
    for module in ("jaxlib._hlo", "jaxlib._jax", "jaxlib.xla_extension"):
        try:
            found = getattr(importlib.import_module(module), name, None)
        except ImportError:
            continue
        if found is not None:
            return found
    raise ImportError(f"this jaxlib has no {name}")
data = sys.stdin.buffer.read()
try:
    hlo_module = find("HloModule")
    if sys.argv[1] == "text":
        proto = find("hlo_module_from_text")(data.decode("utf-8")).as_serialized_hlo_module_proto()
    else:
        proto = hlo_module.from_serialized_hlo_module_proto(data).as_serialized_hlo_module_proto()
    stablehlo = find("mlir").hlo_to_stablehlo(proto)
except Exception as e:
    sys.stdout.write(f"{type(e).__name__}: {e}")
    sys.exit(3)
sys.stdout.buffer.write(bytes(stablehlo))
"""


def monoid_reduce(x, init, computation, dimensions):
    """`lax.reduce(x, init, computation, dimensions)` of one operand, the same equations,
    without the debug info lax.reduce builds for the computation before it sees that a
    monoid reduction (reduce_sum, reduce_max, ...) needs none (inspecting the function: 2/3
    of a reduce's trace time)."""
    reducer = lax_internal._get_monoid_reducer(computation, [init])
    if not reducer:
        return jax.lax.reduce(x, init, computation, dimensions)
    weak_type = _dtypes.is_weakly_typed(x) and _dtypes.is_weakly_typed(init)
    return lax_internal._convert_element_type(reducer(x, dimensions), weak_type=weak_type)


# The jax internals used above that are the same across the supported range: a newer jax that
# moves one fails here by name rather than at a program's first call.
_INTERNALS = (
    (lax_internal, "_unbroadcast"), (lax_internal, "mul_p"), (lax_internal, "add_p"),
    (lax_internal, "_get_monoid_reducer"), (lax_internal, "_convert_element_type"),
    (lax_linalg, "geqrf"), (lax_linalg, "geqp3"), (mlir, "register_lowering"),
    (mlir, "lower_fun"), (mlir, "merge_mlir_modules"), (pe, "trace_to_jaxpr_dynamic"),
    (pe, "convert_constvars_jaxpr"),
    (lu, "wrap_init"), (lu, "DebugInfo"), (core, "jaxpr_as_fun"), (core, "typeof"), (mlir, "refine_polymorphic_shapes"),
    (mlir, "_platform_specific_lowerings"), (mlir, "make_ir_context"), (mlir, "TokenSet"),
    (batching, "primitive_batchers"), (ad, "defbilinear"), (dispatch, "apply_primitive"),
    (_export, "_module_to_bytecode"), (_export, "_CUSTOM_CALL_TARGETS_GUARANTEED_STABLE"),
    (xla_client, "custom_call_targets"), (xla_client, "DeviceList"),
    (compiler, "get_compile_options"), (_config, "disable_jit"),
    (stablehlo, "serialize_portable_artifact_str"), (stablehlo, "get_minimum_version"),
    (stablehlo, "get_current_version"),
)


def _internals() -> str:
    missing = [f"{owner.__name__}.{name}" for owner, name in _INTERNALS
               if not hasattr(owner, name)]
    if missing:
        raise AttributeError("missing: " + ", ".join(missing))
    return f"{len(_INTERNALS)} present"


_point("jax internals used")(_internals)


from shlo2jax.compat.replay import EquationReplay, equation_replay  # noqa: E402,F401
