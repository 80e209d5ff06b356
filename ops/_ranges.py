"""Value ranges read from the module at plan time: which factors of a product (divisors of a
quotient, operands of rsqrt/sqrt/log/exp) are finite everywhere, so that their derivative
needs no strong-zero guard (shlo2jax.gradients.strong_zero_ops).

`value_range(vid, producer, translator)` is an interval (lo, hi) of float64 bounds that holds
every element of the value, or None (unknown: any value, NaN included). The claim is made
for programs whose arguments hold no NaN ("NaN aside": a NaN argument makes NaN values and NaN
derivatives in the producer's own program too); infinite arguments are allowed, so a public
function's argument is (-inf, inf), a captured value is what it is where it is defined, and
a loop-carried value (but a counted loop's counters, below) or any op without a rule here is
unknown. Every rule is conservative: a range that could hold a NaN made
from non-NaN operands (inf - inf, 0 * inf, 0 / 0, the square root of a negative number,
sin(inf)) is unknown, a function bounded for every number (tanh, logistic) is unknown on an
unknown operand (it may be NaN: a fully masked attention row's x - max(x)), bounds are
widened by a few ulp of the element type (rounding), past its largest finite value they
become infinite, and a positive bound below its smallest normal becomes 0 (XLA on CPU
flushes subnormals).

The values of a function's arguments are known where it is private and every use of its
name is a `func.call` (the union over those calls' operands: chess's `_var(x, ddof)` takes
the constant 0 at every call), and a call's result is its callee's returned value. In the
body of a counted loop (`for (i = a; i < b; i += 1)`: a while op whose prepared `counted`
says so, what `fori_loop` and `scan` export), the counter is in [a, b - 1].
"""

from __future__ import annotations

import math
import weakref
from typing import Optional

import ml_dtypes
import numpy as np

from shlo2jax import value_types as T
from shlo2jax.attributes import is_splat_view
from shlo2jax.ops._common import enum_value, ints, op_names, reduce_body_op, value_type

Range = Optional[tuple]  # (lo, hi) floats, or None: unknown

_INF = math.inf
_DEPTH = 48              # ops followed back from a query (deeper: unknown)
_CONSTANT_LIMIT = 1 << 16  # constants with more elements are not scanned

_SAME = op_names("broadcast_in_dim", "broadcast", "reshape", "transpose", "slice", "reverse",
                 "dynamic_slice", "copy", "optimization_barrier")


def finite(r: Range) -> bool:
    return r is not None and -_INF < r[0] and r[1] < _INF


def away_from_zero(r: Range) -> bool:
    return r is not None and (r[0] > 0 or r[1] < 0)


def finite_factors(op, producer, translator) -> tuple:
    """(x finite everywhere, y finite everywhere) for a real floating product x * y."""
    x = value_range(op.operands[0], producer, translator)
    if op.operands[1] == op.operands[0]:
        return (finite(x),) * 2
    return finite(x), finite(value_range(op.operands[1], producer, translator))


def finite_quotient(op, producer, translator) -> tuple:
    """(1 / y finite everywhere, x / y / y finite everywhere) for a real floating quotient
    x / y: the local derivatives of its numerator and (up to sign) its denominator."""
    dtype = op.result_types[0].dtype
    y = value_range(op.operands[1], producer, translator)
    if not away_from_zero(y):
        return False, False
    x = value_range(op.operands[0], producer, translator)
    return (finite(_bounded(_div((1.0, 1.0), y), dtype)),
            finite(_bounded(_div(_bounded(_div(x, y), dtype), y), dtype)))


def finite_derivative(op, producer, translator) -> bool:
    """Whether a real floating exp, log, sqrt or rsqrt has a finite local derivative
    everywhere, its derivative's own too (lax's rules then give the strong-zero values)."""
    dtype = op.result_types[0].dtype
    x = value_range(op.operands[0], producer, translator)
    if x is None:
        return False
    kind = op.name.split(".", 1)[1]
    if kind == "exponential":  # d = exp(x)
        return finite(_bounded((_exp(x[0]), _exp(x[1])), dtype))
    if not x[0] > 0:
        return False
    reciprocal = _bounded(_div((1.0, 1.0), x), dtype)  # 1 / x
    if kind == "log":  # d = 1 / x, d' = -1 / x^2
        return finite(_bounded(_mul(reciprocal, reciprocal), dtype))
    root = _bounded((math.sqrt(x[0]), math.sqrt(x[1])), dtype)
    if kind == "sqrt":  # d = 0.5 / sqrt(x), d' = -0.25 / sqrt(x)^3
        inverse = _bounded(_div((1.0, 1.0), root), dtype)
        return finite(_bounded(_mul(_mul(inverse, inverse), inverse), dtype))
    if kind == "rsqrt":  # d = -0.5 rsqrt(x) / x, d' = 0.75 rsqrt(x) / x^2
        d = _bounded(_mul(_div((1.0, 1.0), root), reciprocal), dtype)
        return (finite(_bounded(_mul(d, reciprocal), dtype))
                and finite(_bounded(_mul(reciprocal, reciprocal), dtype)))
    return False


def value_range(vid, producer, translator) -> Range:
    """The range of the value `vid` of the region `producer` maps (a `planned` view's
    `producer`, ops._common.planned), or None."""
    return _query(_analysis(translator), vid, producer)


def exact_range(vid, producer, translator) -> Range:
    """As `value_range`, for every argument value, NaN included: a public function's
    arguments are unknown. What a view may rely on to change values (not only derivatives):
    a range found here depends on constants (through private functions' calls) alone."""
    return _query(_analysis(translator).exact(), vid, producer)


def _query(analysis, vid, producer) -> Range:
    region = getattr(producer, "region", None)
    try:
        if region is None:  # (a bare producer function: no memo across queries)
            return _Scope(analysis, None, producer).range(vid, 0)
        return analysis.scope(region, producer).range(vid, 0)
    except (KeyError, IndexError, TypeError, ValueError, AttributeError):
        return None  # (an op whose attributes these rules misread: unknown, guards stay)


def region_range(translator, region, vid) -> Range:
    """The range of the value `vid` defined in (or an argument of) `region`."""
    return _analysis(translator).range(region, vid)


_ANALYSES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


# The last analysis asked for (a translator plans its regions in a row), held weakly: a
# dropped program's module must not stay alive here.
_LAST = [lambda: None]


def _analysis(translator) -> "_Analysis":
    last = _LAST[0]()
    if last is not None and last.owner() is translator:
        return last
    found = _ANALYSES.get(translator)
    if found is None:
        found = _ANALYSES[translator] = _Analysis(translator)
    _LAST[0] = weakref.ref(found)
    return found


class _Analysis:
    """Per translator: each region's known ranges, and the module's call sites."""

    def __init__(self, translator, public_arguments: Range = (-_INF, _INF)):
        # (the module, not the translator: the translator keys this analysis weakly)
        self.owner, self.module = weakref.ref(translator), translator.module
        # a public function's argument: any value, NaN aside (value_range), or unknown
        # (exact_range)
        self.public_arguments = public_arguments
        self._exact = None
        # constants lifted into parameters hold the call's values, not the module's
        self.lifted = translator.mode.lifted is not None
        self.scopes = {}    # id(region) -> _Scope
        self._last = None
        self._sites = None  # function name -> [(region, call op)], or None where it escapes
        self._bodies = None  # id(body region) -> function name
        self._holders = None  # id(a nested region) -> (the region holding its op, the op)
        # functions whose argument ranges / returned value are being computed (a call
        # reached again meanwhile is unknown)
        self.arguments_active, self.results_active = set(), set()

    def exact(self) -> "_Analysis":
        """The analysis of the same translator in which a public function's arguments are
        unknown (exact_range's), made when first asked for."""
        if self._exact is None:
            self._exact = _Analysis(self.owner(), public_arguments=None)
        return self._exact

    def scope(self, region, producer=None) -> "_Scope":
        """The region's scope; `producer`, where given, is the region's own value id ->
        producer map (a planned view's: translate._Producers), used rather than a copy."""
        last = self._last
        if last is not None and last.region is region:
            return last
        scope = self.scopes.get(id(region))
        if scope is None or scope.region is not region:
            scope = self.scopes[id(region)] = _Scope(self, region, producer)
        self._last = scope  # (a region's ops are planned one after another)
        return scope

    def range(self, region, vid) -> Range:
        return self.scope(region).range(vid, 0)

    def _scan(self):
        """Which private functions are used only by func.call, and their calls (a walk
        over every op of the module: made once, where a private function's argument is
        first asked for)."""
        functions = self.module.functions
        sites = {name: [] for name, f in functions.items() if not f.public}
        pending = [f.body for f in functions.values()]
        while pending:
            region = pending.pop()
            for op in region.ops:
                if op.regions:
                    pending.extend(op.regions)
                attrs = op.attrs
                if not attrs:
                    continue
                callee = attrs.get("callee") if op.name == "func.call" else None
                if callee is not None and sites.get(callee) is not None:
                    sites[callee].append((region, op))
                    continue
                for value in attrs.values():  # a symbol named otherwise: escapes
                    if type(value) is str and value in sites:
                        sites[value] = None
        self._sites = sites

    def argument_range(self, region, vid) -> Range:
        """A block argument's range: a public function's is any value (NaN aside), a
        private function's the union over its calls' operands, any other unknown."""
        if self._bodies is None:
            self._bodies = {id(f.body): name for name, f in self.module.functions.items()}
        name = self._bodies.get(id(region))
        if name is None:  # (a nested region's: a loop's carry, a reduction's operands)
            return self.counter_range(region, vid)
        if self.module.functions[name].public:
            return self.public_arguments
        if self._sites is None:
            self._scan()
        sites = self._sites[name]
        if not sites:
            return None
        if name in self.arguments_active:
            return None
        index = region.args.index(vid)
        self.arguments_active.add(name)
        try:
            found = None
            for caller, op in sites:
                r = self.range(caller, op.operands[index])
                if r is None:
                    return None
                found = r if found is None else _union(found, r)
            return found
        finally:
            self.arguments_active.discard(name)

    def counter_range(self, region, vid) -> Range:
        """A counted loop's counter in its body, [a, b - 1] where the ranges of its start a
        and bound b are known (a + 1 never wraps: the body runs only while i < b), and any
        other carried value the body adds 1 to, [c, c + trips - 1] from its start c (a
        `fori_loop` exported as a scan carries its own index beside the scan's); any other
        argument of a nested region is unknown."""
        holder, op = self.holder(region)
        counted = getattr(op, "params", None) if op is not None and op.name in _WHILES else None
        counted = getattr(counted, "counted", None)
        if counted is None or op.regions[-1] is not region or \
                _source_range(self, holder, counted.step) != (1.0, 1.0):
            return None
        start = self.range(holder, op.operands[counted.counter])
        bound = _source_range(self, holder, counted.bound)
        if start is None or bound is None or start[0] > bound[1] - 1:
            return None
        k = region.args.index(vid)
        if k == counted.counter:
            return (start[0], bound[1] - 1)
        if not self._adds_one(region, region.outputs[k], vid):
            return None
        first = self.range(holder, op.operands[k])
        kind = _kind(region.arg_types[k].dtype)
        if first is None or kind[0] != "int":
            return None
        last = first[1] + (bound[1] - start[0]) - 1  # (at most this many trips)
        return (first[0], last) if last <= kind[1][1] else None

    def holder(self, region) -> tuple:
        """(the region holding the op whose region `region` is, that op), or (None, None)
        for a function's body (a walk over the module's regions, made once)."""
        if self._holders is None:
            holders = self._holders = {}
            pending = [f.body for f in self.module.functions.values()]
            while pending:
                holder = pending.pop()
                for op in holder.ops:
                    if op.regions:
                        pending.extend(op.regions)
                        for inner in op.regions:
                            holders[id(inner)] = (holder, op)
        found = self._holders.get(id(region))
        return found if found is not None and region in found[1].regions else (None, None)

    def captured_range(self, region, vid) -> Range:
        """A value a nested region captures: its range where it is defined (SSA: the same
        value), found through the regions holding this one; else unknown."""
        holder, _ = self.holder(region)
        return None if holder is None else self.range(holder, vid)

    def _adds_one(self, region, out, vid, calls: int = 2) -> bool:
        """Whether `out` is `vid + 1` in `region`, the sum made there or in a function it
        calls with `vid` (jax exports a scan's body as a call: `closed_call`)."""
        update = self.scope(region).producer(out) or next(  # (a call of several results)
            (op for op in region.ops if out in op.results), None)
        if update is None:
            return False
        if update.name in _ADDS and len(update.operands) == 2:
            a, b = update.operands
            return (a == vid and self.range(region, b) == (1.0, 1.0)) or \
                (b == vid and self.range(region, a) == (1.0, 1.0))
        if update.name != "func.call" or not calls:
            return False
        callee = self.module.functions.get(update.attrs.get("callee"))
        if callee is None or vid not in update.operands:
            return False
        body = callee.body
        inner = body.outputs[update.results.index(out)]
        return any(self._adds_one(body, inner, body.args[m], calls - 1)
                   for m, v in enumerate(update.operands) if v == vid)

    def call_range(self, op) -> Range:
        fdef = self.module.functions.get(op.attrs.get("callee"))
        if fdef is None or len(fdef.body.outputs) != 1:
            return None
        if fdef.name in self.results_active:
            return None
        self.results_active.add(fdef.name)
        try:
            return self.range(fdef.body, fdef.body.outputs[0])
        finally:
            self.results_active.discard(fdef.name)


_MISSING = object()
_WHILES = op_names("while")
_ADDS = op_names("add")


def _source_range(analysis, holder, source) -> Range:
    """The range of a loop's bound or step (ops.control_flow's `_constant_source`: a
    constant of the condition or body, or a value they capture from the region `holder`
    holding the loop), or None."""
    kind, payload = source
    if kind == "env":
        return analysis.range(holder, payload)
    value = np.asarray(payload)
    if value.shape != () or not np.issubdtype(value.dtype, np.integer):
        return None
    return (float(value), float(value))


class _Scope:
    """One region: its producers and the ranges found so far. A walk back from a value
    keeps what it finds for the region, a walk cut short (depth, a call reached again)
    included: unknown at the cut is sound, only less precise, and each value is then walked
    once per region."""
    __slots__ = ("analysis", "region", "producer", "known")

    def __init__(self, analysis, region, producer):
        # (a proxy: the analysis holds its scopes, and a cycle would keep a dropped
        # program's module alive until the cyclic collector's next full pass)
        self.analysis, self.region = weakref.proxy(analysis), region
        if producer is None:
            producer = {op.results[0]: op for op in region.ops if len(op.results) == 1}.get
        self.producer = producer
        self.known = {}  # vid -> Range, found without the depth bound

    def range(self, vid, depth) -> Range:
        # (the hot path of the analysis: one memo lookup per operand reached, and per value
        # one rule; its rules call this directly)
        known = self.known
        found = known.get(vid, _MISSING)
        if found is not _MISSING:
            return found
        op = self.producer(vid)
        if op is None:
            region = self.region
            if region is None:
                return None
            if vid in region.args:
                found = self.analysis.argument_range(region, vid)
            else:
                found = self.analysis.captured_range(region, vid)
        elif depth >= _DEPTH:
            return None  # (not kept: a later walk from nearer may find it)
        else:
            dtype = op.result_types[0].dtype  # (a token's or tuple's: AttributeError)
            kind = _KINDS.get(dtype) or _kind(dtype)
            rule = _RULES.get(op.name) if kind[0] is not None else None
            found = None
            if rule is not None:
                found = rule(self, op, depth + 1)
                if found is not None:
                    found = _fit(found, kind)
        known[vid] = found
        return found


_KINDS: dict = {}  # dtype -> ("bool" | "int" | "float" | None, its limits)


def _kind(dtype) -> tuple:
    found = _KINDS.get(dtype)
    if found is None:
        if dtype == np.bool_:
            found = ("bool", None)
        elif T.is_integer(dtype):
            info = ml_dtypes.iinfo(dtype)
            found = ("int", (float(info.min), float(info.max)))
        elif T.is_float(dtype):
            info = ml_dtypes.finfo(dtype)
            found = ("float", (4 * float(info.eps), float(info.max),
                               float(info.smallest_normal)))
        else:
            found = (None, None)
        _KINDS[dtype] = found
    return found


def _bounded(r: Range, dtype) -> Range:
    """r widened to what the element type `dtype` can hold after rounding."""
    return _fit(r, _kind(dtype))


def _fit(r: Range, kind: tuple) -> Range:
    """r widened to what an element type of `kind` (_kind's) can hold after rounding."""
    if r is None:
        return None
    lo, hi = r
    if lo != lo or hi != hi:  # (NaN)
        return None
    kind, limits = kind
    if kind == "float":
        slack, biggest, tiny = limits
        if -_INF < lo < _INF:
            lo = lo - abs(lo) * slack
        if -_INF < hi < _INF:
            hi = hi + abs(hi) * slack
        lo = -_INF if lo < -biggest else (_INF if lo > biggest else lo)
        hi = _INF if hi > biggest else (-_INF if hi < -biggest else hi)
        if 0 < lo < tiny:
            lo = 0.0
        if -tiny < hi < 0:
            hi = 0.0
        return (lo, hi)
    if kind == "bool":
        return (max(lo, 0.0), min(hi, 1.0))
    if kind == "int":
        return (lo, hi) if limits[0] <= lo and hi <= limits[1] else None  # (wraps: unknown)
    return None


def _constant_range(value) -> Range:
    if type(value) is not np.ndarray or value.size == 0 or value.size > _CONSTANT_LIMIT:
        return None
    if not (T.is_float(value.dtype) or T.is_integer(value.dtype) or value.dtype == np.bool_):
        return None
    if is_splat_view(value):  # (one element at every index: its range is that element's)
        value = value.reshape(-1)[:1]
    with np.errstate(all="ignore"):
        values = value.astype(np.float64)
    if np.isnan(values).any():
        return None
    return (float(values.min()), float(values.max()))


def _union(a: Range, b: Range) -> Range:
    if a is None or b is None:
        return None
    return (min(a[0], b[0]), max(a[1], b[1]))


def _checked(*bounds) -> Range:
    for b in bounds:
        if b != b:  # (NaN)
            return None
    return (min(bounds), max(bounds))


def _mul(a: Range, b: Range) -> Range:
    if a is None or b is None:
        return None
    if _holds_zero(a) and math.isinf(max(-b[0], b[1])) or \
            _holds_zero(b) and math.isinf(max(-a[0], a[1])):
        return None  # (0 * inf)
    return _checked(*[x * y for x in a for y in b])


def _holds_zero(r) -> bool:
    return r[0] <= 0 <= r[1]


def _div(a: Range, b: Range) -> Range:
    if a is None or not away_from_zero(b):
        return None
    return _checked(*[x / y for x in a for y in b])  # (b's bounds are nonzero)


def _add(a: Range, b: Range) -> Range:
    if a is None or b is None:
        return None
    return _checked(a[0] + b[0], a[1] + b[1]) if not _opposite_infinities(a, b) else None


def _opposite_infinities(a, b):
    return (a[0] == -_INF and b[1] == _INF) or (a[1] == _INF and b[0] == -_INF)


def _neg(a: Range) -> Range:
    return None if a is None else (-a[1], -a[0])


def _monotone(fn, lo_ok=-_INF):
    """A rule for an increasing function defined on [lo_ok, inf]: unknown where the operand
    may lie outside."""
    def rule(scope, op, depth):
        r = scope.range(op.operands[0], depth)
        if r is None or r[0] < lo_ok:
            return None
        return _checked(fn(r[0]), fn(r[1]))
    return rule


def _exp(v):
    return math.exp(v) if v < 710 else _INF


def _log(v):
    return -_INF if v == 0 else math.log(v)


def _logistic(v):
    return 0.0 if v == -_INF else (1.0 if v == _INF else 1 / (1 + _exp(-v)))


def _rsqrt(scope, op, depth):
    r = scope.range(op.operands[0], depth)
    if r is None or not r[0] > 0:  # (rsqrt(-0) is -inf)
        return None
    return (1 / math.sqrt(r[1]) if r[1] < _INF else 0.0, 1 / math.sqrt(r[0]))


def _binary(fn):
    def rule(scope, op, depth):
        a = scope.range(op.operands[0], depth)
        return None if a is None else fn(a, scope.range(op.operands[1], depth))
    return rule


def _multiply(scope, op, depth):
    a = scope.range(op.operands[0], depth)
    if op.operands[0] == op.operands[1]:  # a square: >= 0
        if a is None:
            return (0.0, _INF)
        squares = (a[0] * a[0], a[1] * a[1])
        return (0.0 if a[0] <= 0 <= a[1] else min(squares), max(squares))
    return None if a is None else _mul(a, scope.range(op.operands[1], depth))


def _divide(scope, op, depth):
    if T.is_integer(op.result_types[0].dtype):
        return None  # (XLA's x / 0 and truncation: not followed)
    a = scope.range(op.operands[0], depth)
    return None if a is None else _div(a, scope.range(op.operands[1], depth))


def _subtract(scope, op, depth):
    # (no relational rule: a softmax's shift x - max(x) is NaN on a row all -inf, a fully
    # masked attention row, which the producer's program then selects away)
    a = scope.range(op.operands[0], depth)
    return None if a is None else _add(a, _neg(scope.range(op.operands[1], depth)))


def _reduce(scope, op, depth):
    if len(op.operands) != 2:
        return None
    body = reduce_body_op(op)
    x, init = scope.range(op.operands[0], depth), scope.range(op.operands[1], depth)
    if x is None or init is None:
        return None
    if body in _MAXIMUM or body in _MINIMUM:  # (each result is the init or an element)
        return _union(x, init)
    dtype = op.result_types[0].dtype
    if body in _ADD and T.is_float(dtype):
        n = _reduced_count(scope, op)
        if n is None:
            return None
        # n terms in [lo, hi] sum to within [n lo, n hi], give or take n roundings
        slack = 1 + 2 * n * float(ml_dtypes.finfo(dtype).eps)
        low, high = (x[0] * n, x[1] * n) if n else (0.0, 0.0)
        low = low * slack if low < 0 else low / slack
        high = high * slack if high > 0 else high / slack
        return _add(init, (low, high))
    return None


def _reduced_count(scope, op):
    """How many elements each result element of a reduce sums."""
    dims = ints(op.attrs["dimensions"])
    shape = getattr(value_type(op.operands[0], scope.producer, scope.region), "shape", None)
    if shape is None or None in shape:
        return None
    return math.prod(shape[d] for d in dims)


def _convert(scope, op, depth):
    r = scope.range(op.operands[0], depth)
    out = op.result_types[0].dtype
    dtype = _operand_dtype(scope, op)
    exact = dtype is not None and (T.is_integer(dtype) or dtype == np.bool_)
    if r is None and exact:  # an integer's range is its type's
        info = ml_dtypes.iinfo(dtype) if dtype != np.bool_ else None
        r = (0.0, 1.0) if info is None else (float(info.min), float(info.max))
    if T.is_float(out) and (exact or dtype is not None and T.is_float(dtype)):
        return r  # (rounded monotonically: _bounded widens it)
    if T.is_integer(out) and exact:
        return r  # (_bounded: unknown where it would wrap)
    return None  # (float -> int: XLA's own saturation, not followed)


def _operand_dtype(scope, op):
    return getattr(value_type(op.operands[0], scope.producer, scope.region), "dtype", None)


def _same(scope, op, depth):
    return scope.range(op.operands[0], depth)


def _union_all(scope, op, depth):
    found = scope.range(op.operands[0], depth)
    for i in range(1, len(op.operands)):
        found = _union(found, scope.range(op.operands[i], depth))
    return found


def _pad(scope, op, depth):
    return _union(scope.range(op.operands[0], depth), scope.range(op.operands[1], depth))


def _select(scope, op, depth):
    pred = scope.range(op.operands[0], depth)
    if pred is not None and pred[0] >= 1:
        return scope.range(op.operands[1], depth)
    if pred is not None and pred[1] <= 0:
        return scope.range(op.operands[2], depth)
    return _union(scope.range(op.operands[1], depth), scope.range(op.operands[2], depth))


def _compare(scope, op, depth):
    a, b = scope.range(op.operands[0], depth), scope.range(op.operands[1], depth)
    if a is None or b is None:
        return (0.0, 1.0)
    direction = enum_value(op.attrs.get("comparison_direction"))
    if direction in ("LT", "GT"):
        if direction == "GT":
            a, b = b, a
        return (1.0, 1.0) if a[1] < b[0] else ((0.0, 0.0) if a[0] >= b[1] else (0.0, 1.0))
    if direction in ("LE", "GE"):
        if direction == "GE":
            a, b = b, a
        return (1.0, 1.0) if a[1] <= b[0] and not (a[1] == b[0] == 0) else (
            (0.0, 0.0) if a[0] > b[1] else (0.0, 1.0))
    if direction in ("EQ", "NE") and (a[1] < b[0] or b[1] < a[0]):
        return (0.0, 0.0) if direction == "EQ" else (1.0, 1.0)
    return (0.0, 1.0)


def _abs(scope, op, depth):
    r = scope.range(op.operands[0], depth)
    if r is None or T.is_integer(op.result_types[0].dtype):
        return None
    return (0.0 if r[0] <= 0 <= r[1] else min(abs(r[0]), abs(r[1])), max(abs(r[0]), abs(r[1])))


def _extreme(pick):
    def rule(scope, op, depth):
        a, b = scope.range(op.operands[0], depth), scope.range(op.operands[1], depth)
        return None if a is None or b is None else (pick(a[0], b[0]), pick(a[1], b[1]))
    return rule


def _clamp(scope, op, depth):
    lo, x, hi = (scope.range(op.operands[i], depth) for i in range(3))
    if lo is None or x is None or hi is None:
        return None
    low = min(max(x[0], lo[0]), hi[0])
    high = min(max(x[1], lo[1]), hi[1])
    return (min(low, high), max(low, high))


def _bounded_by(lo, hi, finite_operand=False):
    def rule(scope, op, depth):
        r = scope.range(op.operands[0], depth)
        if r is None or finite_operand and not finite(r):
            return None  # (sin(inf) is NaN)
        return (lo, hi)
    return rule


_CONSTANT = op_names("constant")
_MAXIMUM = op_names("maximum")
_MINIMUM = op_names("minimum")
_ADD = op_names("add")
_REDUCE = op_names("reduce")

def _constant(scope, op, depth):
    # (constants lifted into parameters hold the call's values, not the module's)
    return None if scope.analysis.lifted else _constant_range(op.params)


def _call(scope, op, depth):
    return scope.analysis.call_range(op)


_RULES = {
    **{name: _constant for name in _CONSTANT},
    "func.call": _call,
    **{name: _same for name in _SAME},
    **{name: _union_all for name in op_names("concatenate")},
    **{name: _pad for name in op_names("pad")},
    **{name: _convert for name in op_names("convert")},
    **{name: _select for name in op_names("select")},
    **{name: _compare for name in op_names("compare")},
    **{name: _binary(_add) for name in _ADD},
    **{name: _subtract for name in op_names("subtract")},
    **{name: lambda s, op, d: _neg(s.range(op.operands[0], d)) for name in op_names("negate")},
    **{name: _multiply for name in op_names("multiply")},
    **{name: _divide for name in op_names("divide")},
    **{name: _abs for name in op_names("abs")},
    **{name: _extreme(max) for name in _MAXIMUM},
    **{name: _extreme(min) for name in _MINIMUM},
    **{name: _clamp for name in op_names("clamp")},
    **{name: _reduce for name in _REDUCE},
    **{name: _monotone(_exp) for name in op_names("exponential")},
    **{name: _monotone(_log, 0.0) for name in op_names("log")},
    **{name: _monotone(math.sqrt, 0.0) for name in op_names("sqrt")},
    **{name: _rsqrt for name in op_names("rsqrt")},
    **{name: _monotone(_logistic) for name in op_names("logistic")},
    **{name: _bounded_by(-1.0, 1.0) for name in op_names("tanh")},
    **{name: _bounded_by(-1.0, 1.0, True) for name in op_names("sine", "cosine")},
}
