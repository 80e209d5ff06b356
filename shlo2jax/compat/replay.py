"""Staging again the one equation a pure lax call made, without running the call: what
keeps the tracing loop at a third of a traced op's cost (`EquationReplay`). Built on jax's
tracing internals (`DynamicJaxprTrace.emit_eqn`), which differ between releases: each
difference is a compatibility point."""

from __future__ import annotations

import inspect
from typing import Optional

import numpy as np
from jax._src import core, source_info_util
from jax._src import dtypes as _dtypes
from jax._src.interpreters import partial_eval as pe

from shlo2jax.compat.points import point as _point

def _replay_variant() -> str:
    trace = getattr(pe, "DynamicJaxprTrace", None)
    frame = getattr(pe, "JaxprStackFrame", None)
    if trace is None or not hasattr(trace, "emit_eqn") or frame is None or \
            not hasattr(pe, "TracingEqn") or not hasattr(core, "trace_ctx"):
        return "none (every op binds through lax)"
    return "DynamicJaxprTrace.emit_eqn"


_REPLAY = _replay_variant()

# The jaxpr types an equation's params may hold: `core.Jaxpr` and `core.ClosedJaxpr` (jax <=
# 0.11); jax 0.12 merged ClosedJaxpr into Jaxpr (which now carries its constants).
JAXPR_TYPES = tuple(t for t in (core.Jaxpr, getattr(core, "ClosedJaxpr", None)) if t is not None)
_point("jaxpr types")(lambda: ", ".join(f"core.{t.__name__}" for t in JAXPR_TYPES))
_JaxprTracer = getattr(pe, "DynamicJaxprTracer", None)
_point("equation replay")(lambda: _REPLAY)


# Primitives whose staging rule stages what the default one would for static shapes (it
# differs for dynamic shapes only, 0.7-0.9). Other staging rules, and constant folding (decided
# by operand values), are never replayed; a forwarding rule (decided by avals and params) is
# seen in what `learn` observes: a forwarded result stages no equation and is not learned.
_STAGED_BY_AVALS = frozenset({"broadcast_in_dim", "reshape"})


def _bind_canonicalizer():
    """What `Primitive.bind` turns a numpy operand into before staging it as a constant:
    jax <= 0.8 `core.canonicalize_value(x)`, jax 0.10 `dtypes.canonicalize_value(x)` (a
    cached typed array, the same object for the same array while it lives); None where bind
    does something else (0.9: per primitive), and there constant operands are not replayed."""
    core_canon = getattr(core, "canonicalize_value", None)
    if core_canon is not None:
        params = inspect.signature(core_canon).parameters
        return core_canon if len(params) == 1 else None
    return getattr(_dtypes, "canonicalize_value", None)


_BIND_CANONICAL = _bind_canonicalizer()
_typeof = getattr(core, "typeof", None) or core.get_aval


class _Aliased(tuple):
    """An operand order (see EquationReplay._operand_order) that holds only where each
    argument j of `aliases` (j, first) is the same object as argument `first`."""

    def __new__(cls, order, aliases):
        self = super().__new__(cls, order)
        self.aliases = tuple(aliases)
        return self

    def holds(self, args) -> bool:
        return all(args[j] is args[first] for j, first in self.aliases)


class EquationReplay:
    """Stages again the one equation a pure lax call made, without running the call.

    `emit(key, args)` is the result of the call `key` stands for on `args` (tracers of the
    trace being built), or None when none was learned for their avals: then
    `learn(key, args, run)` runs it (`run()`) and, where it staged exactly one pure,
    single-result equation on exactly `args`, each once, in some order, or all but some
    constants (numpy operands, keyed by identity) (no constant folding,
    forwarding, effect, or staging rule but those of _STAGED_BY_AVALS), keeps (primitive,
    params, result aval, operand order) for those avals. What `emit` stages is
    the equation `run()` would have staged (same primitive, params, operands and result
    aval; the current source info and context), without jax's bind, abstract evaluation and
    tracer conversions: about a third of the cost of a traced elementwise op.

    `key` must determine the call given its operands' avals (a handler that is one lax call
    on its operands). Avals are looked up by identity first (jax's cached abstract
    evaluation hands out one aval object per distinct type, so chains of ops hit; the learned
    entries hold their avals, so no id is reused), then by equality. jax releases without `emit_eqn` (0.6) get
    `replay() -> None` and every op binds as before."""
    __slots__ = ("_learned", "_constant_avals", "constants_refused")

    def __init__(self):
        self._learned: dict = {}
        # id(numpy operand) -> (it, the aval of what bind stages for it)
        self._constant_avals: dict = {}
        # keys whose handler treats a numpy operand otherwise than lax does (not replayed)
        self.constants_refused: set = set()

    def emit(self, key, args):
        trace = core.trace_ctx.trace
        ids = [key]
        for arg in args:
            if type(arg) is not _JaxprTracer or arg._trace is not trace:
                return self._emit_with_constants(key, args, trace)
            ids.append(id(arg.aval))
        learned = self._learned
        entry = learned.get(tuple(ids))
        if entry is None:  # avals made afresh (broadcast_in_dim's): equal ones learned?
            entry = learned.get((key,) + tuple([a.aval for a in args]))
            if entry is None:
                return None
        order = entry[4]
        if order is not None and type(order) is _Aliased and not order.holds(args):
            return None
        return trace.emit_eqn(list(args) if order is None else [args[j] for j in order],
                              entry[2], entry[0], entry[1], core.no_effects,
                              source_info_util.current())[0]

    def _constant_aval(self, arg):
        """The aval of what bind stages for the numpy `arg`, which is kept alive from then on
        (its id is part of the keys learned for it)."""
        hit = self._constant_avals.get(id(arg))
        if hit is not None and hit[0] is arg:
            return hit[1]
        aval = _typeof(_BIND_CANONICAL(arg))
        self._constant_avals[id(arg)] = (arg, aval)
        return aval

    def _emit_with_constants(self, key, args, trace):
        """`emit` where some operands are numpy arrays (the translation's constants): learned
        per each such array (by identity: a handler may decide by a constant's value, as
        strong-zero `mul` does) and the other operands' avals, and staged as bind stages them:
        canonicalized, then made a tracer by the trace (a literal, or the constant's one
        constvar while it lives)."""
        if (_BIND_CANONICAL is None or key in self.constants_refused
                or not isinstance(trace, pe.DynamicJaxprTrace)):  # (constants only, run eagerly)
            return None
        ids = [key]
        for arg in args:
            if type(arg) is _JaxprTracer and arg._trace is trace:
                ids.append(id(arg.aval))
            elif type(arg) is np.ndarray:
                ids.append(id(arg))
            else:
                return None
        learned = self._learned
        entry = learned.get(tuple(ids))
        if entry is None:  # operand avals made afresh: equal ones learned?
            entry = learned.get(self._constants_key(key, args))
            if entry is None:
                return None
        source_info = source_info_util.current()
        order = entry[4]
        if order is not None and type(order) is _Aliased and not order.holds(args):
            return None
        tracers = [a if type(a) is _JaxprTracer else
                   trace.to_jaxpr_tracer(_BIND_CANONICAL(a), source_info)
                   for a in (args if order is None else [args[j] for j in order])]
        return trace.emit_eqn(tracers, entry[2], entry[0], entry[1], core.no_effects,
                              source_info)[0]

    @staticmethod
    def _constants_key(key, args) -> tuple:
        # a traced operand by its aval, a constant by its id (an int: never equal to an aval)
        return (key,) + tuple([a.aval if type(a) is _JaxprTracer else id(a) for a in args])

    def _operand_order(self, in_tracers, args, constants, trace) -> Optional[tuple]:
        """For each operand of the equation, the index of the argument it is (lax.select
        stages (pred, on_false, on_true)); None where some operand is no argument, or a
        traced argument is not used. One value passed several times is one of two cases,
        either replayed only where those arguments are again that one value (an `_Aliased`
        order; another call of the key on distinct values learns its own order): an equation
        of fewer operands than arguments (strong-zero `x * x` is one `square` of x) takes the
        first; one of as many (`x != x`, NaN's test) takes them in turn."""
        order = []
        aliases = []
        for t in in_tracers:
            found = [j for j, a in enumerate(args) if t is a or (
                constants and type(a) is np.ndarray and self._staged_constant(t, a, trace))]
            if len(found) > 1 and all(args[j] is args[found[0]] for j in found):
                if len(in_tracers) < len(args):
                    found = found[:1]
                else:  # (`x != x`, NaN's test: each operand takes the next copy of x)
                    aliases.extend((j, found[0]) for j in found[1:])
                    found = [j for j in found if j not in order][:1]
            if len(found) != 1:
                return None
            order.append(found[0])
        used = set(order)
        if len(used) != len(order):
            return None
        for j, a in enumerate(args):
            if j in used or type(a) is np.ndarray:
                continue  # (an unused constant is part of the key: reduce's identity init)
            first = next((u for u in order if args[u] is a), None)
            if first is None:
                return None
            aliases.append((j, first))
        return _Aliased(order, dict.fromkeys(aliases)) if aliases else tuple(order)

    def _staged_constant(self, tracer, arg, trace) -> bool:
        """Whether `tracer` (an equation's operand) is what bind staged for the numpy `arg`."""
        if type(tracer) is not _JaxprTracer or tracer._trace is not trace:
            return False
        const = _BIND_CANONICAL(arg)
        atom = tracer.val
        if isinstance(atom, core.Literal):
            return atom.val is const
        staged = trace.frame.constvar_to_val.get(atom)  # (0.7-0.8: canonical and original)
        return staged is const or getattr(staged, "original", None) is const

    def learn(self, key, args, run):
        trace = core.trace_ctx.trace
        constants = False
        if not isinstance(trace, pe.DynamicJaxprTrace):
            return run()
        for a in args:
            if type(a) is not _JaxprTracer or a._trace is not trace:
                if (type(a) is not np.ndarray or _BIND_CANONICAL is None
                        or key in self.constants_refused):
                    return run()
                constants = True
        staged = trace.frame.tracing_eqns
        before = len(staged)
        out = run()
        if len(staged) != before + 1 or type(out) is not _JaxprTracer or out._trace is not trace:
            return out
        eqn = staged[-1]  # the equation, or a weak reference or thunk to it (jax <= 0.9)
        if not isinstance(eqn, pe.TracingEqn):
            eqn = eqn()
        if not isinstance(eqn, pe.TracingEqn):
            return out
        prim = eqn.primitive
        if (eqn.effects or prim.multiple_results or len(eqn.outvars) != 1
                or eqn.outvars[0] is not out.val or len(eqn.in_tracers) > len(args)):
            return out
        order = self._operand_order(eqn.in_tracers, args, constants, trace)
        if order is None:
            return out
        avals = tuple(a.aval if type(a) is _JaxprTracer else self._constant_aval(a)
                      for a in args)
        if (any(t.aval != avals[j] for t, j in zip(eqn.in_tracers, order))
                or prim in pe.const_fold_rules
                or (prim in pe.custom_staging_rules and prim.name not in _STAGED_BY_AVALS)
                or prim.is_high(*avals, **eqn.params)
                or any(callable(v) or isinstance(v, JAXPR_TYPES)
                       for v in eqn.params.values())):
            return out
        if order == tuple(range(len(args))) and type(order) is not _Aliased:
            order = None
        entry = (prim, eqn.params, [out.aval], avals, order)
        if constants:
            self._learned[(key,) + tuple([id(a.aval) if type(a) is _JaxprTracer else id(a)
                                          for a in args])] = entry
            self._learned[self._constants_key(key, args)] = entry
            return out
        self._learned[(key,) + tuple(map(id, avals))] = entry
        self._learned[(key,) + avals] = entry
        return out


def equation_replay() -> Optional[EquationReplay]:
    """An `EquationReplay` (one per translator), or None on a jax without `emit_eqn`."""
    return EquationReplay() if _REPLAY == "DynamicJaxprTrace.emit_eqn" else None
