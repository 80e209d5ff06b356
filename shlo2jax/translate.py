"""The translation loop: run a decoded region on JAX values.

An environment maps value ids to JAX values; each op's handler maps its operand
values to result values; every result is checked against the declared type.
Regions become Python callables handed to lax; func.call targets are traced once
(as `jax.jit` callees) and reused at every call site. The per-op loop is the translation's
hot path: what it needs per op is precomputed once per region (`_plan`), results are checked
by one shape/dtype comparison, and the cyclic garbage collector is paused while tracing.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import itertools
import types
from typing import Any, Callable, Optional, Protocol

import jax
from jax import lax
import numpy as np

from shlo2jax import compat
from shlo2jax import value_types as T
from shlo2jax.errors import Shlo2JaxError, TranslationError, UnlocatedError, UnsupportedError
from shlo2jax.module import FunctionDef, ModuleDef, Op, Region
from shlo2jax.gradients import strong_zero_ops
from shlo2jax.memory import gc_paused, on_fresh_stack_chunk
from shlo2jax.options import LoadOptions


class Token:
    """A `!stablehlo.token` value: carries ordering only, no data."""
    __slots__ = ()

    def __repr__(self):
        return "Token()"


TOKEN = Token()

# A token is a pytree with no leaves: it passes through jax.jit arguments/results, loop carries
# and cond branches untouched. Side effects are ordered by JAX's ordered effects (program order),
# a valid linearisation of the token dataflow, so the token itself needs no runtime value.
jax.tree_util.register_pytree_node(Token, lambda token: ((), None), lambda aux, children: TOKEN)


# The ops whose derivative rules differ between the gradient modes.
LAX_MATH = types.SimpleNamespace(
    mul=lax.mul, div=lax.div, exp=lax.exp, expm1=lax.expm1, log=lax.log, log1p=lax.log1p,
    sqrt=lax.sqrt, rsqrt=lax.rsqrt, cbrt=lax.cbrt, tan=lax.tan, atan2=lax.atan2, pow=lax.pow)


def math_for(options: LoadOptions):
    return LAX_MATH if options.gradients == "lax" else strong_zero_ops()


class Recorder(Protocol):
    """Where check ops record `(op, check, operands)` (the conformance runner's list)."""

    def append(self, record: tuple) -> None: ...


class Observer(Protocol):
    """Called as `observer(op, None)` before and `observer(op, results)` after every op
    (shlo2jax.probe)."""

    def __call__(self, op: Op, results: Optional[tuple]) -> None: ...


class Grid(Protocol):
    """The grid of processes being traced (shlo2jax.spmd.grid.ProcessGrid)."""
    num_replicas: int
    num_partitions: int
    in_mesh: bool
    process: tuple


class Sharding(Protocol):
    """A program's sharding context while it runs on its device mesh
    (shlo2jax.spmd.mesh.ShardingContext)."""
    num_replicas: int
    num_partitions: int
    num_devices: int

    def named(self, sharding, rank: int, open_dims: bool = False): ...

    def tiling(self, sharding, rank: int, axes: Optional[set] = None): ...


class LiftedConstants(Protocol):
    """A constant op -> the value of its parameter in the call being traced, or None
    (shlo2jax.params)."""

    def __call__(self, op: Op) -> Any: ...


@dataclasses.dataclass(frozen=True, slots=True, eq=False)
class TranslatorMode:
    """How a translator traces, fixed when it is made.

    recorder: a list each check op appends `(op, check, operands)` to (the conformance runner).
    observer: called before and after every op, in program order (shlo2jax.probe).
    While either is set, callees are inlined rather than jitted, so that their checks and
    values stay in the caller's trace.
    grid: the grid of processes being traced: an SPMD run, or the per-device code of a manual
        region. Collectives and replica/partition ids read it.
    sharding: the program's sharding context while it runs on its device mesh; sharding
        markers become constraints on that mesh.
    lifted: for constants lifted into parameters (shlo2jax.params): the constant rule reads
        their values through it.
    """
    recorder: Optional[Recorder] = None
    observer: Optional[Observer] = None
    grid: Optional[Grid] = None
    sharding: Optional[Sharding] = None
    lifted: Optional[LiftedConstants] = None


_DEFAULT_MODE = TranslatorMode()


class Translator:
    """Per-program translation state: its mode, the traced callees and the region plans."""

    def __init__(self, module: ModuleDef, options: LoadOptions,
                 mode: TranslatorMode = _DEFAULT_MODE):
        self.module = module
        self.mode = mode
        self.options = options
        # mul, div, exp, ...: lax's, or with strong-zero derivatives (`options.gradients`)
        self.math = math_for(self.options)
        self._callees: dict[str, Callable] = {}
        # id(region) -> (region, plan): the per-op work of `evaluate` decided once per region.
        self._plans: dict[int, tuple] = {}
        self._derived: dict[tuple, "Translator"] = {}
        # The equations of replayable handlers (one lax call on their operands), learned per
        # operand avals and staged again without binding (compat.EquationReplay); None on a
        # jax that cannot (every op binds).
        self.replay = compat.equation_replay()
        self._replay_keys: dict = {}

    def derived(self, **changes) -> "Translator":
        """The translator of the same module in this mode with `changes`, made once per
        distinct change (its traced callees are kept). The values must be hashable."""
        key = tuple(sorted(changes.items(), key=lambda item: item[0]))
        translator = self._derived.get(key)
        if translator is None:
            translator = self.in_mode(dataclasses.replace(self.mode, **changes))
            self._derived[key] = translator
        return translator

    def in_mode(self, mode: TranslatorMode) -> "Translator":
        """A new translator like this one in `mode` (a subclass keeps its own state)."""
        return Translator(self.module, self.options, mode)

    def callee(self, name: str) -> Callable:
        """A func.call target: traced once per signature, reused at every call site."""
        fn = self._callees.get(name)
        if fn is None:
            fdef = self.module.functions.get(name)
            if fdef is None:
                raise KeyError(f"func.call to undefined function @{name}")
            fn = self.function_body(fdef)
            if self.mode.recorder is None and self.mode.observer is None:
                fn = jax.jit(fn)
            self._callees[name] = fn
        return fn

    def function_body(self, fdef: FunctionDef) -> Callable:
        def body(*args):
            with gc_paused(), compat.pinned_traceback():
                return tuple(evaluate(self, fdef.body, args, {}))
        # jax names the callee's lowered function after it; XLA's Shardy import reserves
        # `xla.sdy.*` names, so dots go.
        body.__name__ = body.__qualname__ = fdef.name.replace(".", "_")
        return body


class Scope:
    """What a handler may need beyond its operands: regions as callables, the translator,
    and `shared`: values a rule computes once per region evaluation and reuses (e.g. the
    broadcast of a constant), keyed as the rule chooses. It lives as long as the evaluation,
    under one trace, so no tracer outlives its trace. `seen`: (replay key, operand ids) ->
    (the value, the operands) of the replayable ops evaluated in this trace (see evaluate)."""
    __slots__ = ("translator", "env", "shared", "seen")

    def __init__(self, translator: Translator, env: dict, seen: Optional[dict] = None):
        self.translator, self.env, self.shared = translator, env, {}
        self.seen = {} if seen is None else seen

    @property
    def options(self) -> LoadOptions:
        """The program's load options."""
        return self.translator.options

    def region(self, region: Region) -> Callable:
        """The region as a function of its block arguments returning a list of outputs."""
        translator, env = self.translator, self.env

        def run(*args):
            return evaluate(translator, region, args, env)
        return run


def _expected(rtype):
    """(shape, dtype) when a result of type `rtype` can be checked by a plain comparison."""
    if type(rtype) is T.TensorType and rtype.quant is None and None not in rtype.shape:
        return rtype.shape, rtype.dtype
    return None


def _plan(translator: Translator, region: Region) -> tuple:
    """Per op: (op, operand ids, result id or None, expected (shape, dtype) or None, its
    handler where its equation can be replayed or None).

    A result id of None means a multi-result op; expected None means the full check_value.
    A handler marked `replayable` is one lax call whose equation depends only on its
    operands' avals, the translator and what its mark reads from the op (see
    ops._common.replayable, compat.EquationReplay).
    """
    plans = translator._plans
    entry = plans.get(id(region))
    if entry is not None and entry[0] is region:
        return entry[1]
    refused = _refused(translator.module)
    producers = _Producers(region)
    ops = list(map(functools.partial(_planned, translator, producers), region.ops))
    if translator.mode.observer is None:
        ops = _live(ops, region)
    plan = tuple(
        (_refusing(op, refused) if refused else op, op.operands,
         op.results[0] if len(op.results) == 1 else None,
         _expected(op.result_types[0]) if len(op.results) == 1 else None,
         _replay_key(translator, op))
        for op in ops)
    plans[id(region)] = (region, plan)
    return plan


def _live(ops: list, region: Region) -> list:
    """The planned ops less those whose result nothing reads where staging it has no effect
    (a `replayable` handler: one lax call): what a view left dead (the inner one of two
    composed broadcasts) is not traced, differentiated and transposed for nothing. Observed
    translations (shlo2jax.probe) keep every op."""
    read = set(region.outputs)
    update = read.update
    kept = []
    keep = kept.append
    for op in reversed(ops):
        results = op.results
        if (len(results) == 1 and results[0] not in read
                and getattr(op.handler, "replayable", None) is not None):
            continue
        keep(op)
        update(op.operands)
        if op.regions:
            for inner in op.regions:
                update(inner.captures)
    kept.reverse()
    return kept


class _Producers:
    """value id -> the op of the region that defines it, or None (an argument, a captured
    value, a multi-result op's result); the map is built at the first lookup. `reads`: how
    often a value is read; `memo`: what a view decides once per region, keyed as it
    chooses."""
    __slots__ = ("region", "memo", "_map", "_reads")

    def __init__(self, region: Region):
        self.region, self.memo, self._map, self._reads = region, {}, None, None

    def __call__(self, vid) -> Optional[Op]:
        if self._map is None:
            self._map = {op.results[0]: op for op in self.region.ops if len(op.results) == 1}
        return self._map.get(vid)

    def reads(self, vid) -> int:
        """How many operands of the region's ops, outputs of the region and captures of
        its nested regions the value `vid` is (the module's ops, not their planned views:
        a view reads no more than its op)."""
        if self._reads is None:
            ops = self.region.ops
            reads = collections.Counter(itertools.chain.from_iterable(
                [op.operands for op in ops]))
            reads.update(self.region.outputs)
            for op in ops:
                if op.regions:
                    for inner in op.regions:
                        reads.update(inner.captures)
            self._reads = reads
        return self._reads[vid]


def _planned(translator: Translator, producers: _Producers, op: Op) -> Op:
    """`op`, or where its handler is marked `planned` (ops._common.planned), the view of it
    the mark makes from the ops that produce its operands, decided once per region."""
    mark = getattr(op.handler, "planned", None)
    if mark is None:
        return op
    try:
        return mark(op, producers, translator)
    except Exception as e:  # (as in evaluate: a rule's failure is reported against its op)
        if _says_where(e):
            raise
        raise TranslationError(op.name, op.location, f"{type(e).__name__}: {e}") from e


def _replay_key(translator: Translator, op: Op):
    """What a replayed equation of `op` is learned under (with its operands' avals), or None
    where its handler is not replayable: the handler itself, or where the handler reads the
    op, a token standing for (handler, what it reads), one per distinct value, so that the
    per-op lookup hashes a small int rather than the params."""
    handler = op.handler
    mark = getattr(handler, "replayable", None)
    if mark is None or translator.replay is None or len(op.results) != 1:
        return None
    if mark is True:
        key = handler
    else:
        try:
            key = translator._replay_keys.setdefault((handler, mark(op)),
                                                     len(translator._replay_keys))
        except (TypeError, ValueError):  # params that cannot be hashed: bound every time
            return None
    if not getattr(handler, "replayable_constants", True):
        translator.replay.constants_refused.add(key)
    return key


def _refused(module: ModuleDef) -> dict:
    """op index, or (op name, location) for a problem that names no op, -> that problem: the
    constructs the decoder found it cannot run (loaded anyway with strict=False)."""
    refused = {}
    for problem in list(module.problems) + list(module.dormant_problems):
        index = getattr(problem, "op_index", -1)
        refused.setdefault(index if index >= 0 else (problem[0], problem[1]), problem)
    return refused


def _refusing(op: Op, refused: dict) -> Op:
    """`op`, or where the decoder reported it cannot run, a view of it whose handler raises
    the UnsupportedError naming it (instead of its rule failing on what it could not
    prepare, or no rule at all)."""
    problem = refused.get(op.index) or refused.get((op.name, op.location))
    if problem is None:
        return op

    def unsupported(ctx, op, *operands):
        raise UnsupportedError([problem])
    return op.replaced(handler=unsupported)


def evaluate(translator: Translator, region: Region, args, outer_env: dict,
             seen: Optional[dict] = None) -> list:
    """Runs `region` on `args`; `outer_env` provides the values it captures. `seen`: the
    values replayable ops computed so far in the same trace (Scope.seen; a callee inlined
    into its caller shares the caller's), else a new table."""
    # (its per-op calls never cross the end of CPython's frame stack chunk: see memory.py)
    return on_fresh_stack_chunk(_evaluate, translator, region, args, outer_env, seen)


def _evaluate(translator: Translator, region: Region, args, outer_env: dict,
              seen: Optional[dict]) -> list:
    env = {vid: outer_env[vid] for vid in region.captures}
    if len(args) != len(region.args):
        raise TypeError(f"region takes {len(region.args)} arguments, got {len(args)}")
    env.update(zip(region.args, args))
    scope = Scope(translator, env, seen)
    if translator.mode.observer is not None:
        _evaluate_observed(translator, region, scope, env)
        return [env[i] for i in region.outputs]
    get = env.__getitem__
    replay = translator.replay
    seen = scope.seen
    # The hot loop of translation: one handler call (or the replay of its equation), one dict
    # store and a shape/dtype comparison per op; everything else was decided in _plan.
    for op, operands, result, expected, replay_key in _plan(translator, region):
        try:
            if replay_key is None:
                out = op.handler(scope, op, *map(get, operands))
            else:
                args = tuple(map(get, operands))
                # A replayable op is one lax call decided by its key and its operands: on the
                # same operand values it is the same value (what the producer's own program
                # computed once, e.g. a mean an inlined callee computes again), so it is
                # staged once; the table keeps the operands alive, so their ids stay theirs.
                cse_key = (replay_key, *map(id, args))
                hit = seen.get(cse_key)
                if hit is not None:
                    out = hit[0]
                else:
                    out = replay.emit(replay_key, args)
                    if out is None:
                        out = replay.learn(replay_key, args,
                                           functools.partial(op.handler, scope, op, *args))
                    seen[cse_key] = (out, args)
        except Exception as e:  # any failure inside a handler is reported against its op
            if _says_where(e):
                raise
            raise TranslationError(op.name, op.location, f"{type(e).__name__}: {e}") from e
        if result is None:
            _store_results(op, out, env)
            continue
        if expected is None:
            check_value(op, 0, out, op.result_types[0])
        else:
            try:
                ok = out.shape == expected[0] and out.dtype == expected[1]
            except (AttributeError, TypeError):
                ok = False
            if not ok:
                check_value(op, 0, out, op.result_types[0])
        env[result] = out
    return [env[i] for i in region.outputs]


def _evaluate_observed(translator: Translator, region: Region, scope: Scope, env: dict) -> None:
    observer = translator.mode.observer
    for op, *_ in _plan(translator, region):
        observer(op, None)
        try:
            out = op.handler(scope, op, *[env[i] for i in op.operands])
        except Exception as e:
            if _says_where(e):
                raise
            raise TranslationError(op.name, op.location, f"{type(e).__name__}: {e}") from e
        if len(op.results) == 1:
            check_value(op, 0, out, op.result_types[0])
            env[op.results[0]] = out
            observer(op, (out,))
        else:
            observer(op, _store_results(op, out, env))


def _says_where(error: Exception) -> bool:
    """Whether a handler's error already says where it happened (the library's own errors,
    except UnlocatedErrors); any other becomes a TranslationError of the op."""
    return isinstance(error, Shlo2JaxError) and not isinstance(error, UnlocatedError)


def _store_results(op: Op, out, env: dict) -> tuple:
    out = tuple(out)
    results = op.results
    if len(out) != len(results):
        raise TranslationError(op.name, op.location,
                               f"produced {len(out)} results, declared {len(results)}")
    for i, (vid, value, rtype) in enumerate(zip(results, out, op.result_types)):
        check_value(op, i, value, rtype)
        env[vid] = value
    return out


def check_value(op: Op, index: int, value, rtype) -> None:
    """A result must have exactly its declared shape and dtype: a slip is a bug, not a warning."""
    if type(rtype) is T.TensorType:
        shape = getattr(value, "shape", None)
        dtype = getattr(value, "dtype", None)
        if rtype.quant is not None:
            _check_carried(op, index, value, rtype)
            return
        if shape is None or dtype is None:
            raise TranslationError(op.name, op.location,
                                   f"result #{index} is {type(value).__name__}, declared {rtype}")
        if dtype != rtype.dtype or len(shape) != len(rtype.shape) or any(
                d is not None and d != s for d, s in zip(rtype.shape, shape)):
            raise TranslationError(
                op.name, op.location,
                f"result #{index} has type {_describe(value)}, declared {rtype}")
    elif type(rtype) is T.TokenType:
        if not isinstance(value, Token):
            raise TranslationError(op.name, op.location,
                                   f"result #{index} is {type(value).__name__}, declared a token")
    elif type(rtype) is T.TupleType:
        if not isinstance(value, tuple) or len(value) != len(rtype.elements):
            raise TranslationError(op.name, op.location,
                                   f"result #{index} is not a {len(rtype.elements)}-tuple")
        for element, etype in zip(value, rtype.elements):
            check_value(op, index, element, etype)


def _describe(value) -> str:
    try:
        return str(T.tensor_type(value.shape, value.dtype))
    except KeyError:
        return f"{value.dtype}{list(value.shape)}"


def _check_carried(op: Op, index: int, value, rtype) -> None:
    """A quantized or f6 result is a carried value (a shlo2jax.quant.QArray or F6Array:
    storage integers and the type they carry) of exactly its declared type."""
    qtype, storage = getattr(value, "qtype", None), getattr(value, "storage", None)
    ok = (qtype is not None and storage is not None and qtype == rtype.quant
          and value.dtype == rtype.dtype and len(value.shape) == len(rtype.shape)
          and all(d is None or d == s for d, s in zip(rtype.shape, value.shape))
          and np.dtype(storage.dtype) == rtype.quant.storage_dtype)
    if not ok:
        raise TranslationError(op.name, op.location,
                               f"result #{index} is {_describe_carried(value)}, declared {rtype}")


def _describe_carried(value) -> str:
    qtype = getattr(value, "qtype", None)
    if type(qtype) is T.Float6Type:
        return f"{qtype}{list(value.shape)} (F6Array)"
    if qtype is not None:
        return f"quantized {value.shape} of {qtype}"
    shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
    if shape is None or dtype is None:
        return type(value).__name__
    return f"{np.dtype(dtype)}{list(shape)}"
