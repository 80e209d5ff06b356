"""The direct executable (`load(..., lowering="direct")`): a function lowers to the module's own ops.

Translating a function traces one lax primitive per op and JAX lowers each again: about
10,000-15,000 ops/s, the same per-primitive cost as JAX tracing a program written in lax.
A user who runs a program (jit, call) and transforms it only sometimes can skip that: the
function becomes one primitive (`direct_call_primitive`) whose lowering is
the module's function itself, merged into the lowered module as `Exported.call` merges an
export. The compiled program is then what XLA compiles from the module directly (no op
growth, the same compile time), and loading is the whole cost. `jax.grad`, `jvp` and `vmap`
still work: the primitive's derivative and batching rules are the translation's, traced
when a transformation asks for them.

Loading does not decode such a program: it parses, checks and walks the module once
(`scan`), and the op records the translation runs on are made when something first needs
them (`Program.module`: a transformation, another function, a tool). Problems decoding it
(an op without a rule) are reported then, all at once; calls and jit never need it.

A function lowers directly only where that is exactly what XLA would run: static tensor
types that XLA holds (no quantized or f6 values, no tokens or tuples), ops of the
stablehlo/chlo/func dialects other than side effects and collectives, custom calls only to
jax's own typed-FFI kernels (LAPACK, cuSOLVER, ...; an island, below, on a platform that
lacks the kernel), one device. An op that needs the translation and depends on nothing
but its operands (a custom call the translation maps, a composite, an integer division, an op
giving 2-bit integers, an mhlo op; with its regions where they use nothing from outside it)
is an island (shlo2jax.executables.islands): a call of its translation's lowering inside the
function, decoded at load and listed in `Function.islands`. The fusions and copies of XLA's
optimised dumps are no computation of their own: they dissolve into the module's ops (shlo2jax.transforms.dissolve),
and only @main and the functions it refers to are scanned and merged (a dump keeps each fused
computation as a function too). Anywhere else the whole function is translated, and
`Function.lowering` says which one did and `lowering_note` why.
"""

from __future__ import annotations

import functools
import weakref
from typing import Optional

import jax
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import func as func_dialect

from shlo2jax import compat
from shlo2jax import value_types as T
from shlo2jax.compat import (initialize_kernels, jit_disabled, registered_custom_call_targets,
                             stable_custom_call_targets)
from shlo2jax.errors import Shlo2JaxError
from shlo2jax.executables.islands import Islands
from shlo2jax.module import format_location
from shlo2jax.spmd.mesh import ShardingContext
from shlo2jax.transforms.dissolve import DISSOLVED, dissolvable, dissolve
from shlo2jax.transforms.outline_ops import Outline, references
from shlo2jax.transforms.outline_ops import outline as outline_islands

# Ops whose direct lowering is not what the translation gives or may not compile as-is on
# every backend: host transfers and tokens, collectives and sharding, composites (the
# translation may run a registered implementation), and the ops the translation gives
# semantics XLA's CPU backend lacks. Custom calls: see _custom_call_blocker.
_TRANSLATED_ONLY = frozenset({
    "stablehlo.infeed", "stablehlo.outfeed", "stablehlo.send",
    "stablehlo.recv", "stablehlo.after_all", "stablehlo.create_token", "stablehlo.optimization_barrier",
    "stablehlo.all_reduce", "stablehlo.all_gather", "stablehlo.reduce_scatter",
    "stablehlo.all_to_all", "stablehlo.collective_permute", "stablehlo.collective_broadcast",
    "stablehlo.replica_id", "stablehlo.partition_id", "stablehlo.composite",
    "stablehlo.get_tuple_element", "stablehlo.tuple", "stablehlo.rng",
    "stablehlo.uniform_quantize", "stablehlo.uniform_dequantize",
})
_DIALECTS = ("stablehlo.", "chlo.", "func.")
# Integer division: XLA folds a divisor that simplifies to zero (`x - x`) at compile time and
# the process dies of SIGFPE; the translation guards the divisor (XLA's own x/0 semantics).
_INTEGER_DIVISIONS = frozenset({"stablehlo.divide", "stablehlo.remainder"})
# 2-bit integers: XLA's CPU backend fails or crashes on several ops over them (concatenate,
# sort, dot, convolution); the translation computes those in a wider type.
_CRASHING_DTYPES = frozenset({"int2", "uint2"})
_FFI_API_VERSION = 4  # the typed FFI; versions 1-3 are legacy kernels with opaque descriptors


def _plain(t) -> bool:
    """A static tensor XLA holds (a quantized or f6 tensor has `quant` set) and runs as the
    translation does."""
    return type(t) is T.TensorType and t.quant is None and t.is_static and \
        t.dtype.name not in _CRASHING_DTYPES


def _island_type(t) -> bool:
    """A type an island's function may take or give: a static tensor XLA holds (2-bit integers
    included: only the ops over them need the translation)."""
    return type(t) is T.TensorType and t.quant is None and t.is_static


# Ops of other dialects than stablehlo/chlo/func that may be islands: the mhlo ops that jaxlib's
# HLO -> StableHLO conversion leaves (bitcast, copy, topk, ...), other than those whose
# translation depends on more than their operands (the ones `_TRANSLATED_ONLY` lists, by name).
_ISLAND_DIALECTS = ("mhlo.",)
_CONTEXTUAL = frozenset(name.split(".", 1)[1] for name in _TRANSLATED_ONLY) - {"composite"} | {
    "custom_call", "async_start", "async_update", "async_done", "add_dependency", "domain",
    "xla.rng_get_and_update_state"}


class DirectScan:
    """What one walk of a module found: why it cannot lower directly (None when it can: the
    first op that stops it, with its location), the custom call targets it calls, the
    `Outline` of its islands (shlo2jax.executables.islands; None where none), and that of its
    calls of jax's kernels (each an island on a platform that lacks it; None where none, or
    where one cannot be an island)."""

    def __init__(self, blocker: Optional[str], custom_call_targets: frozenset,
                 islands: Optional[Outline] = None, kernels: Optional[Outline] = None,
                 dead_functions: frozenset = frozenset(), dissolves: bool = False):
        self.blocker = blocker
        self.dead_functions = dead_functions  # functions @main never refers to
        self.dissolves = dissolves  # whether it holds fusions or copies (`dissolve`)
        self.custom_call_targets = custom_call_targets
        self.island_outline, self.kernel_outline = islands, kernels
        self._decoded: Optional[Islands] = None

    @property
    def islands(self) -> tuple:
        """An `Island` per island op, in walk order."""
        return () if self.island_outline is None else self.island_outline.records

    def decoded_islands(self, program) -> Optional[Islands]:
        """The islands of `program` decoded (once: its functions share them); None where none."""
        if self.island_outline is not None and self._decoded is None:
            names = frozenset(self.island_outline.ops)
            # the program's context while it holds its module (a new one costs ~6 ms)
            context = None if program.released_mlir_module else program.mlir_module.context
            self._decoded = Islands(self.island_outline,
                                    lambda module: _Classifier().find(module, names)[0],
                                    program.refined, context)
        return self._decoded

    def decoded_kernels(self, program) -> Optional[Islands]:
        """The kernel calls of `program` decoded (on a first lowering for a platform that
        lacks one: what the translation lacks is reported then); None where they cannot be
        islands."""
        if self.kernel_outline is None:
            return None
        # (the islands' kernels are theirs)
        names = frozenset(self.island_outline.ops if self.island_outline is not None else ())
        return Islands(self.kernel_outline, lambda module: _Classifier().find(module, names)[1],
                       program.refined)


def _custom_call_blocker(operation, stable: frozenset) -> Optional[str]:
    """None when a custom call may lower as itself: one of jax's own kernels whose ABI
    `jax.export` keeps stable, through the typed FFI, without side effects. Whether the
    platform it is lowered for has the kernel is asked at each lowering (the translation
    lowers it where not). Legacy kernels, callbacks and foreign targets run translated."""
    attrs = operation.attributes
    target = attrs["call_target_name"].value
    if target not in stable:
        return f"custom call @{target} is not one of jax's stable kernels"
    version = int(attrs["api_version"].value) if "api_version" in attrs else 1
    # A StableHLO version before the FFI's own api_version writes a typed-FFI call as the
    # original one with a dictionary `mhlo.backend_config` (XLA reads it back as the FFI).
    typed_ffi = version == _FFI_API_VERSION or (
        version == 1 and "mhlo.backend_config" in attrs
        and isinstance(attrs["mhlo.backend_config"], ir.DictAttr))
    if not typed_ffi:
        return f"custom call @{target} is a legacy kernel (api_version {version}), not the typed FFI"
    if _has_side_effect(operation):
        return f"custom call @{target} has side effects"
    return None


def _has_side_effect(operation) -> bool:
    attrs = operation.attributes
    return "has_side_effect" in attrs and bool(attrs["has_side_effect"].value)


def _of_integers(mlir_type) -> bool:
    try:
        return isinstance(ir.ShapedType(mlir_type).element_type, ir.IntegerType)
    except (TypeError, ValueError):  # not a shaped type
        return False


class _Classifier:
    """Why an op cannot lower as itself, and whether it can be an island (see the module
    docstring and shlo2jax.executables.islands)."""

    def __init__(self):
        self.stable = stable_custom_call_targets()
        # types are uniqued in their context: each is parsed and judged once
        self._types: dict = {}
        self._plain: dict = {}

    def _type(self, mlir_type):
        t = self._types.get(mlir_type, False)
        if t is False:
            try:
                t = T.parse_type(str(mlir_type))
            except Exception:  # a type the translation cannot read is not one XLA holds here
                t = None
            self._types[mlir_type] = t
        return t

    def plain(self, mlir_type) -> bool:
        ok = self._plain.get(mlir_type)
        if ok is None:
            t = self._type(mlir_type)
            ok = self._plain[mlir_type] = t is not None and _plain(t)
        return ok

    def __call__(self, operation) -> tuple:
        """(why `operation` cannot lower as itself, or None; whether it can be an island)."""
        name = operation.name
        why = None
        if name in DISSOLVED and dissolvable(operation):
            return None, False
        if name == "stablehlo.custom_call":
            why = _custom_call_blocker(operation, self.stable)
            island = not _has_side_effect(operation)
        elif name in _TRANSLATED_ONLY or not name.startswith(_DIALECTS):
            why = f"{name} runs translated"
            island = name == "stablehlo.composite" or (
                name.startswith(_ISLAND_DIALECTS) and name.split(".", 1)[1] not in _CONTEXTUAL)
        elif name in _INTEGER_DIVISIONS and _of_integers(operation.results[0].type):
            why, island = f"integer {name} runs translated (its divisor guarded)", True
        if why is None:
            for t in operation.results.types:
                if not self.plain(t):
                    why, island = f"{name} has a type the translation carries ({t})", True
                    break
        if why is None:
            return None, False
        return why, island and self.can_be_island(operation)

    def can_be_island(self, operation) -> bool:
        """An island is a call of a function of its operands: results to give, types a
        function signature can hold, and regions (a fusion's, a sort's) only of ops that use
        nothing from outside the island and depend on nothing but their operands."""
        return len(operation.results) > 0 and all(
            (t := self._type(v.type)) is not None and _island_type(t)
            for v in list(operation.operands) + list(operation.results)) and (
            not len(operation.regions) or _self_contained(operation))

    def find(self, mlir_module, names: frozenset) -> tuple:
        """(the island ops, the calls of jax's kernels outside them) of a module without a
        blocker, in the scan's order (only ops named in `names` may be islands)."""
        islands, kernels = [], []

        def visit(operation):
            name = operation.name
            if name in names or name == "stablehlo.custom_call":
                why, island = self(operation)
                if island:
                    islands.append(operation)
                    return ir.WalkResult.SKIP
                if why is None:
                    kernels.append(operation)
            return ir.WalkResult.ADVANCE

        mlir_module.operation.walk(visit, ir.WalkOrder.PRE_ORDER)
        return islands, kernels


def _target(operation) -> str:
    return operation.attributes["call_target_name"].value


def _contextual(operation) -> bool:
    """Whether an op's translation may depend on more than its operands (see `_CONTEXTUAL`)."""
    name = operation.name
    if name.endswith(".custom_call"):
        return _has_side_effect(operation)
    if name.startswith(("stablehlo.", "mhlo.")):
        return name.split(".", 1)[1] in _CONTEXTUAL
    return not name.startswith(_DIALECTS)


def _self_contained(operation) -> bool:
    """Whether the ops in `operation`'s regions use only values defined in them (or its
    regions' arguments) and none of them depends on more than its operands."""
    defined, used = set(), []

    def visit(op):
        if op != operation:
            if _contextual(op):
                used.append(None)  # (never defined: not self-contained)
                return ir.WalkResult.INTERRUPT
            defined.update(op.results)
            used.extend(op.operands)
        for region in op.regions:
            for block in region.blocks:
                defined.update(block.arguments)
        return ir.WalkResult.ADVANCE

    operation.walk(visit, ir.WalkOrder.PRE_ORDER)
    return all(value in defined for value in used)


# The ops that may refer to a function by its symbol: a call, and of StableHLO's ops only
# these (a composite's decomposition, a custom call's called computations); ops of other
# dialects (mhlo) may, and are read in full.
_REFERRING = frozenset({"func.call", "stablehlo.composite", "stablehlo.custom_call"})


def _refers(operation) -> bool:
    name = operation.name
    return name in _REFERRING or not name.startswith(("stablehlo.", "chlo.", "func."))


class _Found:
    """What the scan's walk found in one top-level op (a function) of a module: the first op
    that stops the direct lowering, the names its ops refer to, its island ops and its calls of
    jax's kernels, each with why."""

    def __init__(self):
        self.blocker, self.refs, self.islands, self.kernels = None, [], [], []
        self.dissolves = False  # whether it holds a fusion or copy to dissolve


def scan(mlir_module, source_name: str = "") -> DirectScan:
    """Walks `mlir_module` once (no decoding: a load that lowers directly skips it) for the ops
    and types only the translation handles (see the module docstring): the first that stops
    the direct lowering, else the islands. Only @main and the functions it refers to are
    walked: the others (the computations an XLA dump keeps as functions beside the fusions and
    loops that hold them inline) are dropped from the module the direct lowering merges
    (`DirectScan.dead_functions`)."""
    classify = _Classifier()
    now = None

    def visit(operation):
        if _refers(operation):
            references(operation, now.refs)
        why, island = classify(operation)
        if why is None:
            if operation.name in DISSOLVED:
                now.dissolves = True
            elif operation.name == "stablehlo.custom_call":
                now.kernels.append(
                    (operation, f"@{_target(operation)}: a kernel the platform lacks"))
            return ir.WalkResult.ADVANCE
        if island:  # (its regions' ops, if any, are the island's)
            now.islands.append((operation, why))
            return ir.WalkResult.SKIP
        now.blocker = f"{why} (at {format_location(operation.location, source_name)})"
        return ir.WalkResult.INTERRUPT

    def walk(top) -> _Found:
        nonlocal now
        now = _Found()
        top.operation.walk(visit, ir.WalkOrder.PRE_ORDER)  # (func.func lowers as itself)
        return now

    tops = list(mlir_module.body.operations)
    functions = {top.attributes["sym_name"].value: top for top in tops
                 if top.operation.name == "func.func"}
    found: dict = {}  # function name -> _Found, for @main and those it refers to
    todo = ["main"] if "main" in functions else list(functions)
    while todo:
        name = todo.pop()
        if name not in found and name in functions:
            found[name] = walk(functions[name])
            todo.extend(found[name].refs)
    dead = frozenset(functions) - frozenset(found)
    kept = [found[top.attributes["sym_name"].value] if top.operation.name == "func.func"
            else walk(top) for top in tops
            if top.operation.name != "func.func" or top.attributes["sym_name"].value in found]
    blocker = next((f.blocker for f in kept if f.blocker is not None), None)
    targets = frozenset(_target(op) for f in kept for op, _ in f.kernels)
    if blocker:
        return DirectScan(blocker, targets)

    def outlined(pairs):
        return outline_islands([op for op, _ in pairs], [why for _, why in pairs], mlir_module,
                               source_name)

    islands = [pair for f in kept for pair in f.islands]
    kernels = [pair for f in kept for pair in f.kernels]
    try:
        return DirectScan(
            None, targets, outlined(islands) if islands else None,
            outlined(kernels) if kernels and all(classify.can_be_island(op) for op, _ in kernels)
            else None, dead, any(f.dissolves for f in kept))
    except Exception as e:  # (MLIRError, ValueError: malformed input the walk let through)
        return DirectScan(f"its islands cannot be outlined ({e})", targets)


def drop_functions(mlir_module, names: frozenset) -> None:
    """Erases the functions `names` of `mlir_module` (those @main never refers to)."""
    if names:
        for top in list(mlir_module.body.operations):
            if top.operation.name == "func.func" and top.attributes["sym_name"].value in names:
                top.operation.erase()


@functools.cache
def direct_call_primitive():
    """A primitive whose lowering is a StableHLO module's function itself: the module's ops,
    merged into the module being lowered (jax's `merge_mlir_modules`, as `jax.export`'s
    `Exported.call` does), and a call of it. Binding takes the function's arguments and the
    param `callee` (a DirectCallee: `bytecode`, a module whose `@main` is the
    function; `out_avals`; `translated`, the translation of the same function;
    `custom_call_targets`, the kernels the module calls; `islands` and `kernels`, the ops
    lowered from their translation: always, and where the platform lacks the kernel).
    Derivatives and batching are the translation's: its JVP and its vmap."""
    prim = Primitive("shlo2jax_direct_call")
    prim.multiple_results = True

    def _impl(*args, callee):
        if jit_disabled():  # op by op, as jax.disable_jit asks: the translation
            return list(callee.translated(*args))
        return jax.jit(functools.partial(prim.bind, callee=callee))(*args)

    prim.def_impl(_impl)
    prim.def_abstract_eval(lambda *avals, callee: [jax.core.ShapedArray(a.shape, a.dtype)
                                                    for a in callee.out_avals])

    def _lower(ctx, *args, callee):
        mctx = ctx.module_context
        # kernels a platform being lowered for lacks (a GPU export's solver lowered for CPU):
        # their translation, which maps them to lax, lowers in their place
        lacking = frozenset().union(*(callee.custom_call_targets - registered_custom_call_targets(p)
                                      for p in mctx.platforms))
        if lacking and callee.kernels is None:  # (one cannot be an island: all translated)
            return mlir.lower_fun(lambda *a: list(callee.translated(*a)),
                                  multiple_results=True)(ctx, *args)
        if callee.custom_call_targets - lacking:
            initialize_kernels(mctx.platforms)
        submodule = ir.Module.parse(callee.bytecode, context=mctx.context)
        drop_functions(submodule, callee.scan.dead_functions)
        if callee.scan.dissolves:
            dissolve(submodule)
        if callee.islands is not None:
            callee.islands.lower_into(ctx, submodule)
        if lacking:
            callee.kernels.lower_into(ctx, submodule, lambda op: _target(op) in lacking)
        name = mlir.merge_mlir_modules(mctx.module, f"shlo2jax_{callee.name}", submodule,
                                       dst_symtab=mctx.symbol_table)
        result_types = [compat.aval_to_ir_type(mctx, a) for a in ctx.avals_out]
        call = func_dialect.CallOp(result_types, ir.FlatSymbolRefAttr.get(name), list(args))
        return call.results

    mlir.register_lowering(prim, _lower)

    def _jvp(primals, tangents, *, callee):
        tangents = [ad.instantiate_zeros(t) for t in tangents]
        outs, out_tangents = jax.jvp(callee.translated, tuple(primals), tuple(tangents))
        return list(outs), list(out_tangents)

    ad.primitive_jvps[prim] = _jvp

    def _batch(args, dims, *, callee):
        outs = jax.vmap(callee.translated, in_axes=tuple(dims), out_axes=0)(*args)
        return list(outs), [0] * len(outs)

    batching.primitive_batchers[prim] = _batch
    return prim


def why_not_direct(program, fn) -> Optional[str]:
    """None when `fn` of `program` can lower directly, else the reason it cannot."""
    return _why_not_direct(fn.module_name, tuple(fn.input_types) + tuple(fn.output_types),
                           program.sharding.num_devices, program.direct_scan)


def main_lowers_directly(signatures, *, mlir_module, scan) -> bool:
    """Whether @main of a module (its functions' `signatures`; `scan` of it) lowers directly:
    then loading it decodes nothing more (shlo2jax.assembly)."""
    main = signatures.functions.get("main")
    return main is not None and main.public and _why_not_direct(
        "main", tuple(main.input_types) + tuple(main.output_types),
        ShardingContext(signatures, mlir_module).num_devices, scan) is None


def _why_not_direct(name: str, types: tuple, num_devices: int, scan) -> Optional[str]:
    if name != "main":
        return f"only @main lowers directly (this is @{name})"
    if num_devices > 1:
        return "the program runs on several devices"
    for t in types:
        if not _plain(t):
            return f"a signature type the translation carries ({t})"
    return scan.blocker


class DirectCallee:
    """What the direct-call primitive lowers and differentiates, as its param `callee`
    (identity-hashed: one per Function): a handle holding its function's `DirectState` weakly.

    jax keeps a primitive's params in caches that outlive the program (its abstract evaluation
    cache holds 2,048 entries strongly; its jit caches hold a jaxpr while the jitted function
    lives): the handle they keep is small, and the module's bytecode (the weights baked into
    it), the islands and the translation go with the function."""

    _HELD = frozenset({"bytecode", "scan", "custom_call_targets", "islands", "kernels",
                       "translated"})

    def __init__(self, name: str, out_avals: tuple, state: "DirectState"):
        self.name, self.out_avals = name, out_avals
        self._state = weakref.ref(state)

    def __getattr__(self, attr):
        if attr not in DirectCallee._HELD:
            raise AttributeError(attr)
        state = self._state()
        if state is None:
            raise Shlo2JaxError(f"the program of @{self.name} was dropped, and a jaxpr that "
                                "calls it outlived it: it can no longer be lowered, "
                                "differentiated or batched")
        return getattr(state, attr)

    def __repr__(self):
        return f"<shlo2jax direct @{self.name}>"


class DirectState:
    """What a `DirectCallee` lowers and differentiates, held by its function's executable."""

    def __init__(self, bytecode: bytes, translate, custom_call_targets: frozenset,
                 islands: Optional[Islands] = None, kernels=lambda: None,
                 scan: Optional[DirectScan] = None):
        self.bytecode = bytecode
        self.scan = scan or DirectScan(None, frozenset())  # (functions to drop, to dissolve)
        self._translate = translate  # () -> the translation of the same function
        self.custom_call_targets = custom_call_targets
        self.islands = islands  # the ops lowered from their translation, None where none
        self._kernels = kernels  # () -> the kernel calls decoded, None where they cannot be

    @functools.cached_property
    def kernels(self) -> Optional[Islands]:
        """The calls of the module's kernels, decoded on a first lowering for a platform that
        lacks one (a program only run where it has them never decodes them)."""
        return self._kernels()

    @functools.cached_property
    def translated(self):
        """The translation of the function (JVP, vmap, a platform without one of the module's
        kernels): made on first use, so a program only called or jitted is never decoded."""
        return self._translate()


class Direct:
    """Calls and jit lower the function to the module's own ops, through one direct-call
    primitive (see the module docstring); derivatives and vmap trace the translation."""
    lowering = "direct"

    def __init__(self, function):
        self.function = function
        program = function.program
        # The islands are decoded now, at load: what the translation lacks is reported here.
        self._islands = program.direct_scan.decoded_islands(program)

    @property
    def islands(self) -> tuple:
        """An `Island` for each op lowered from its translation inside the function."""
        return () if self._islands is None else self._islands.records

    @functools.cached_property
    def state(self) -> DirectState:
        """What the primitive lowers: the module's bytecode as the program holds it (the loader
        wrote it once and let the parsed module go: `Program.__init__`), so a
        program whose weights are baked in holds them once until the first call's lowering."""
        fn = self.function
        program = fn.program
        return DirectState(program.mlir_bytecode,
                           lambda: program.translator.function_body(fn.definition),
                           program.direct_scan.custom_call_targets, self._islands,
                           lambda: program.direct_scan.decoded_kernels(program),
                           program.direct_scan)

    @functools.cached_property
    def callee(self) -> DirectCallee:
        fn = self.function
        results = tuple(jax.ShapeDtypeStruct(t.shape, t.dtype) for t in fn.output_types)
        return DirectCallee(fn.module_name, results, self.state)

    @functools.cached_property
    def jitted(self):
        callee = self.callee
        prim = direct_call_primitive()

        def body(*args):
            return prim.bind(*args, callee=callee)
        return jax.jit(self.function.taking_storage_integers(body))

    def __call__(self, *args) -> tuple:
        with compat.enable_x64():
            return tuple(self.jitted(*args))
