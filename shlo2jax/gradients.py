"""Derivatives the translation needs that lax does not give: strong-zero rules for the ops whose
local derivative can be infinite, linear maps with a custom transpose, and ops with a forward
but no reverse-mode derivative.

Built on jax's primitive machinery, reached through `shlo2jax.compat`.
"""

from __future__ import annotations

import functools
import types
import weakref
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.extend.core import Primitive

from shlo2jax.compat import (MUL_PARAMS, ad, auto_insert_reshard, batching, copy_lowerings,
                             core, cotangent_aval, dispatch, lax_internal, mlir,
                             register_linearization, unbroadcast)
from shlo2jax.errors import TranslationError


# ------------------------------------------------------------------ JVPs and their linearizations

def define_jvp(prim, *rules) -> None:
    """Defines `prim`'s JVP and its direct linearization from one rule per operand,
    `(residual, tangent)`: the operand's tangent `t` contributes
    `tangent(t, residual(ans, *primals, **params), **params)`, `ans` being `prim`'s value,
    `residual` a function of the primals only and `tangent` linear in `t`; the contributions
    of the nonzero tangents are added (as jax's `defjvp2` adds them).

    The JVP computes both at once. Reverse mode (jax's `LinearizeTrace`) calls the
    linearization instead: the residuals with the value, under the primal trace, and the
    tangents later, under the tangent trace. Without it jax finds that split itself at every
    equation, tracing the JVP into a jaxpr and partially evaluating it (0.2-0.5 ms an
    equation; on the chess gradient, about 0.07 s of its 0.27 s trace went to these primitives).
    The two run the same ops on the same values, so gradients, transposes and higher orders
    are the JVP's. Uses `ad.defjvp2` and `compat.register_linearization`."""
    ad.defjvp2(prim, *[_jvp_rule(residual, tangent) for residual, tangent in rules])
    tangents = [tangent for _, tangent in rules]

    def linearize(nonzeros, *primals, **params):
        ans = prim.bind(*primals, **params)
        # (jax's fallback rule treats a float0 tangent, an integer operand's, as zero)
        nonzeros = [nz and _has_tangent(p) for nz, p in zip(nonzeros, primals)]
        residuals = [residual(ans, *primals, **params) if nz else None
                     for (residual, _), nz in zip(rules, nonzeros)]
        zero = None if any(nonzeros) else ad.Zero(jax.typeof(ans).to_tangent_aval())

        def linearized(residuals, *tangents_in):
            out = [tangent(t, r, **params) for tangent, nz, t, r
                   in zip(tangents, nonzeros, tangents_in, residuals) if nz]
            return functools.reduce(ad.add_tangents, out) if out else zero
        return ans, zero is None, residuals, linearized

    register_linearization(prim, linearize)


def _jvp_rule(residual, tangent):
    return lambda g, ans, *primals, **params: tangent(
        g, residual(ans, *primals, **params), **params)


def _has_tangent(x) -> bool:
    return jnp.issubdtype(jax.typeof(x).dtype, jnp.inexact)


# Residuals: the value, the first operand, the second operand.
def _value(ans, *_, **__):
    return ans


def _first(ans, x, *_, **__):
    return x


def _second(ans, x, y, **_):
    return y


# ------------------------------------------------------------------ strong-zero derivatives

@functools.cache
def strong_zero_ops():
    """The element-wise ops whose local derivative can be infinite, with strong-zero
    derivatives: a zero tangent or cotangent times an infinite (or NaN) local derivative
    contributes 0, as it does in the producer's own derivative of the function the module
    was exported from.

    Exporters decompose erf, erf_inv, lgamma, Bessel functions, ... into polynomial branches
    chosen by `select`; the unselected branch can overflow (`1/x` at 0, `exp` of a large
    value), and reverse mode multiplies its exactly-zero cotangent by that infinite local
    derivative: 0 * inf = NaN. Here every such op is a primitive of its own whose values and
    lowering are exactly the lax primitive's (the same StableHLO op), and whose JVP multiplies
    tangents with `sz_mul`/`sz_div`: linear primitives with 0 * anything = 0, their own
    transposes and batching rules, whose derivatives are strong-zero too (to every order).
    A first-order product tests only the tangent for zero (one compare and a select in the
    backward, where testing both factors took two compares and an `or` more): a zero local
    derivative times a finite tangent is zero anyway, and times a non-finite one is what the
    producer's own rule gives (NaN); the products of higher orders test both factors. A
    square `x * x` (one value twice) makes one guarded product `t * x` and doubles it, where
    `mul`'s rule makes `t * x` twice and adds them: the same values.

    Returns a namespace: `mul div exp expm1 log log1p sqrt rsqrt cbrt tan atan2 pow` (the
    primal ops), `mul_finite div_finite` (a product or quotient whose local derivatives are
    finite on some sides, from the module's value ranges: ops._ranges) and `sz_mul sz_div`
    (the tangent products). Uses jax's primitive rule tables
    (ad, batching, mlir lowering), `core.auto_insert_reshard` (shard_map's varying axes) and
    lax's own abstract evaluation and lowering rules of the wrapped primitives.

    The steps, each a function below: the tangent products (`_tangent_products`, the square's
    `_twice_tangent_mul` among them), the primal ops (`_primal_ops`) and their derivatives
    (`_define_primal_derivatives`), the square (`_square`), the products and quotients by
    constants (`_by_constants`) and the partly finite ones (`_partly_finite`).
    """
    products = _tangent_products()
    primal = _primal_ops()
    _define_primal_derivatives(primal, products)
    mul, div = _by_constants(primal, _square(products))
    mul_finite, div_finite = _partly_finite(products, primal, mul, div)
    binds = {name: bind for name, (_, bind) in primal.items()}
    return types.SimpleNamespace(
        **{**binds, "mul": mul, "div": div}, sz_mul=products.sz_mul, sz_div=products.sz_div,
        mul_finite=mul_finite, div_finite=div_finite)


def _const(x, value):
    return np.array(value, dtype=np.dtype(x.dtype))


def _new_primitive(name, like, nary):
    prim = Primitive(name)
    prim.def_impl(functools.partial(dispatch.apply_primitive, prim))
    prim.def_effectful_abstract_eval(like.abstract_eval)
    (batching.defbroadcasting if nary else batching.defvectorized)(prim)
    return prim


def _numerator_transpose(name, divide):
    def transpose(ct, x, y):
        if ad.is_undefined_primal(y):
            raise ValueError(f"{name} is linear in its numerator only")
        if type(ct) is ad.Zero:
            return [ad.Zero(cotangent_aval(x.aval)), None]
        return [unbroadcast(x.aval, divide(ct, y)), None]
    return transpose


def _zero_where(mask, value, zero):
    return lax.select(jnp.broadcast_to(mask, value.shape), zero, value)


def _sz_mul_value(a, b, out_dtype=None, guard="both"):
    product = lax.mul(a, b)
    zero = lax.full_like(product, 0)  # one zero for the test and the result
    mask = lax.eq(a, zero)
    if guard == "both":
        mask = lax.bitwise_or(mask, lax.eq(b, zero))
    return _zero_where(mask, product, zero)


def _sz_div_value(t, x):
    quotient = lax.div(t, x)
    zero = lax.full_like(quotient, 0)
    return _zero_where(lax.eq(t, zero), quotient, zero)


class _TangentProducts(NamedTuple):
    sz_mul: Callable             # (a, b, guard="both"): a * b, 0 where a tested factor is 0
    sz_div: Callable             # (t, x): t / x, linear in t, 0 where t is 0
    tangent_mul: Callable        # (t, x): t * x, linear in t, 0 where t is 0
    twice_tangent_mul: Callable  # (t, x): t * x + t * x, linear in t, 0 where t is 0


def _tangent_products() -> _TangentProducts:
    """The tangent products: 0 * x = 0 for every x, inf and NaN included. A product a
    tangent (or cotangent) makes with a local derivative tests that factor only
    (guard="first": its first operand); the products the derivatives of these products
    make (second order) test both factors (guard="both")."""
    sz_mul_p = _new_primitive("strong_zero_mul", lax_internal.mul_p, True)
    sz_div_p = _new_primitive("strong_zero_div", lax_internal.div_p, True)
    sz_mul_p.def_effectful_abstract_eval(
        lambda *avals, guard, **params: lax_internal.mul_p.abstract_eval(*avals, **params))

    def sz_mul(a, b, guard="both"):
        return sz_mul_p.bind(*auto_insert_reshard(a, b), guard=guard, **MUL_PARAMS)

    def tangent_mul(t, x):
        """t * x, linear in t, 0 where t is 0."""
        return sz_mul(t, x, "first")

    def sz_div(t, x):
        """t / x, linear in t, 0 where t is 0."""
        return sz_div_p.bind(*auto_insert_reshard(t, x))

    mlir.register_lowering(sz_mul_p, mlir.lower_fun(_sz_mul_value, multiple_results=False))
    mlir.register_lowering(sz_div_p, mlir.lower_fun(_sz_div_value, multiple_results=False))
    ad.defbilinear(sz_mul_p,
                   lambda ct, a, b, guard, **_: unbroadcast(a.aval, sz_mul(ct, b, guard)),
                   lambda ct, a, b, **_: unbroadcast(b.aval, sz_mul(a, ct)))
    define_jvp(sz_mul_p, (_second, lambda g, b, **_: sz_mul(g, b)),
               (_first, lambda g, a, **_: sz_mul(a, g)))
    define_jvp(sz_div_p, (_second, lambda dt, x: sz_div(dt, x)),
               (lambda ans, t, x: sz_div(sz_div(t, x), x),
                lambda dx, r: lax.neg(sz_mul(dx, r))))
    ad.primitive_transposes[sz_div_p] = _numerator_transpose("strong_zero_div", sz_div)
    return _TangentProducts(sz_mul, sz_div, tangent_mul, _twice_tangent_mul(sz_mul))


def _twice_tangent_mul(sz_mul):
    """A square's tangent product: t * x + t * x, the first-order rule of `mul(x, x)`,
    with one guarded product doubled (g + g == 2 * g exactly, overflow to inf included)
    where `mul`'s rule makes two. Its transpose doubles after the product too: doubling
    the cotangent first would overflow where t * x + t * x does not. Its derivatives are
    the two products `mul`'s rule has (second order: the same values, term for term)."""
    sz_twice_p = _new_primitive("strong_zero_twice_mul", lax_internal.mul_p, True)

    def twice_tangent_mul(t, x):
        """t * x + t * x, linear in t, 0 where t is 0."""
        return sz_twice_p.bind(*auto_insert_reshard(t, x), **MUL_PARAMS)

    def twice_value(t, x, **_):
        product = _sz_mul_value(t, x, guard="first")
        return lax.add(product, product)

    mlir.register_lowering(sz_twice_p, mlir.lower_fun(twice_value, multiple_results=False))
    define_jvp(sz_twice_p, (_second, lambda g, x, **_: lax.add(sz_mul(g, x), sz_mul(g, x))),
               (_first, lambda g, t, **_: lax.add(sz_mul(t, g), sz_mul(t, g))))
    twice_transpose = _numerator_transpose("strong_zero_twice_mul", twice_tangent_mul)
    ad.primitive_transposes[sz_twice_p] = lambda ct, t, x, **_: twice_transpose(ct, t, x)
    return twice_tangent_mul


# The primal ops with strong-zero derivatives: lax's primitive -> whether it takes two operands
_PRIMAL_OPS = {"mul": True, "div": True, "exp": False, "expm1": False, "log": False,
               "log1p": False, "sqrt": False, "rsqrt": False, "cbrt": False, "tan": False,
               "atan2": True, "pow": True}


def _primal_ops() -> dict:
    """Name -> (primitive, bind) of each of `_PRIMAL_OPS`: lax's values and lowering (the
    same StableHLO op), a primitive of its own for the strong-zero JVP."""
    return {name: _wrap(getattr(lax_internal, f"{name}_p"), nary)
            for name, nary in _PRIMAL_OPS.items()}


def _wrap(source, nary: bool):
    params = _LAX_PARAMS.get(source.name, {})  # what lax's own function binds
    prim = _new_primitive(f"{source.name}_strong_zero", source, nary)
    copy_lowerings(source, prim)

    def bind(*args):
        return prim.bind(*auto_insert_reshard(*args), **params)
    bind.__name__ = source.name
    return prim, bind


def _define_primal_derivatives(primal: dict, products: _TangentProducts) -> None:
    """The primal ops' JVPs (and `mul`'s transposes, `div`'s numerator transpose). The
    formulas are lax's own (jax/_src/lax/lax.py), with every product of a tangent
    strong-zero and every residual computed by these ops (so higher orders are too)."""
    tangent_mul, sz_div = products.tangent_mul, products.sz_div
    prim = {name: p for name, (p, _) in primal.items()}
    mul, div, log, pow_ = (primal[name][1] for name in ("mul", "div", "log", "pow"))
    one = lambda x: _const(x, 1)
    ad.defbilinear(prim["mul"],
                   lambda ct, x, y, **_: unbroadcast(x.aval, tangent_mul(ct, y)),
                   lambda ct, x, y, **_: unbroadcast(y.aval, tangent_mul(ct, x)))

    # (each rule: the local derivative, computed with the value, and the tangent's product
    # with it, `times` (t * d) or `over` (t / d))
    def times(g, d, **_):
        return tangent_mul(g, d)

    def over(g, d, **_):
        return sz_div(g, d)

    define_jvp(prim["mul"], (_second, times), (_first, times))
    define_jvp(prim["div"], (_second, over),
               (lambda ans, x, y: div(ans, y), lambda g, d: lax.neg(tangent_mul(g, d))))
    ad.primitive_transposes[prim["div"]] = _numerator_transpose("division", sz_div)
    # the one-operand ops: op -> (its local derivative from (ans, x), its product)
    unary = {
        "exp": (_value, times),
        "expm1": (lambda ans, x, **_: lax.add(ans, one(ans)), times),
        "log": (_first, over),
        "log1p": (lambda ans, x, **_: lax.add(x, one(x)), over),
        "sqrt": (lambda ans, x, **_: div(_const(x, 0.5), ans), times),
        "rsqrt": (lambda ans, x, **_: mul(_const(x, -0.5), div(ans, x)), times),
        "cbrt": (lambda ans, x, **_: div(_const(x, 1 / 3), mul(ans, ans)), times),
        "tan": (lambda ans, x, **_: lax.add(one(x), mul(ans, ans)), times),
    }
    for name, rule in unary.items():
        define_jvp(prim[name], rule)

    def atan2_denominator(x, y):
        return lax.add(mul(x, x), mul(y, y))
    define_jvp(prim["atan2"], (lambda ans, x, y: div(y, atan2_denominator(x, y)), times),
               (lambda ans, x, y: div(lax.neg(x), atan2_denominator(x, y)), times))

    def pow_base_derivative(ans, x, y):
        return mul(y, pow_(x, lax.sub(y, one(y))))

    def pow_exponent_derivative(ans, x, y):
        # lax's rule: log(x) with x = 0 replaced by 1 (the exponent's derivative is 0 there)
        safe_x = lax.select(x == _const(x, 0), lax.full_like(x, 1), x)
        return mul(log(safe_x), ans)
    define_jvp(prim["pow"], (pow_base_derivative, times), (pow_exponent_derivative, times))


def _square(products: _TangentProducts):
    """x * x (a multiply whose operands are one value): `mul`'s value and derivatives, its
    first-order tangent one guarded product doubled (`twice_tangent_mul`)."""
    L = lax_internal
    square_p = _new_primitive("square_strong_zero", L.mul_p, False)
    square_p.def_effectful_abstract_eval(
        lambda x, **params: L.mul_p.abstract_eval(x, x, **params))
    mlir.register_lowering(square_p, mlir.lower_fun(
        lambda x, **params: lax.mul(x, x), multiple_results=False))
    define_jvp(square_p, (_first, lambda g, x, **_: products.twice_tangent_mul(g, x)))

    def square(x):
        return square_p.bind(x, **MUL_PARAMS)
    return square


def _by_constants(primal: dict, square):
    """The product and quotient the translation calls: lax's own where a factor is a
    constant finite and nonzero everywhere, `square` for x * x, else the strong-zero op."""
    mul, div = primal["mul"][1], primal["div"][1]

    def mul_by_constants(x, y):
        """x * y; lax's product where one factor is a constant that is finite and nonzero
        everywhere (its local derivative is finite: lax's derivative is the strong-zero one,
        up to the sign of a zero); `square` where x and y are one value."""
        if finite_nonzero_constant(x) or finite_nonzero_constant(y):
            return lax.mul(x, y)
        if x is y:  # (one value: the translation passes a repeated operand as one object)
            return square(x)
        return mul(x, y)

    def div_by_constants(x, y):
        """x / y; lax's quotient where y is a constant whose reciprocal is finite and
        nonzero everywhere (as for `mul_by_constants`)."""
        if finite_nonzero_constant(y, reciprocal=True):
            return lax.div(x, y)
        return div(x, y)
    return mul_by_constants, div_by_constants


def _partly_finite(products: _TangentProducts, primal: dict, mul_by_constants,
                   div_by_constants):
    """A product (quotient) where some factors are finite everywhere (decided from the
    module, ops._ranges): the products with those factors take lax's rule, no zero test;
    the others stay strong-zero. `finite` = (x's, y's): for a product, x finite makes the
    y side's t * x plain; for a quotient, (1 / y finite: the numerator's t / y plain,
    x / y / y finite: the denominator's t * (ans / y) plain). Values and second order as
    `mul`/`div`. Returns (mul_finite, div_finite)."""
    L = lax_internal
    tangent_mul, sz_div = products.tangent_mul, products.sz_div
    div = primal["div"][1]

    def finite_product(t, factor, finite):
        return lax.mul(t, factor) if finite else tangent_mul(t, factor)

    def partly_finite(name, like, value):
        prim = _new_primitive(name, like, True)
        prim.def_effectful_abstract_eval(
            lambda x, y, finite, **params: like.abstract_eval(x, y, **params))
        mlir.register_lowering(prim, mlir.lower_fun(
            lambda x, y, finite, **_: value(x, y), multiple_results=False))
        return prim

    mul_finite_p = partly_finite("strong_zero_mul_finite", L.mul_p, lax.mul)
    ad.defbilinear(
        mul_finite_p,
        lambda ct, x, y, finite, **_: unbroadcast(x.aval, finite_product(ct, y, finite[1])),
        lambda ct, x, y, finite, **_: unbroadcast(y.aval, finite_product(ct, x, finite[0])))
    define_jvp(mul_finite_p,
               (_second, lambda g, y, finite, **_: finite_product(g, y, finite[1])),
               (_first, lambda g, x, finite, **_: finite_product(g, x, finite[0])))

    div_finite_p = partly_finite("strong_zero_div_finite", L.div_p, lax.div)
    define_jvp(div_finite_p,
               (_second, lambda g, y, finite: (lax.div if finite[0] else sz_div)(g, y)),
               (lambda ans, x, y, finite: div(ans, y),
                lambda g, r, finite: lax.neg(finite_product(g, r, finite[1]))))
    ad.primitive_transposes[div_finite_p] = lambda ct, x, y, finite: _numerator_transpose(
        "division", lax.div if finite[0] else sz_div)(ct, x, y)

    def mul_finite(x, y, finite):
        """x * y where `finite` = (x finite everywhere, y finite everywhere)."""
        if all(finite):
            return lax.mul(x, y)
        if not any(finite):
            return mul_by_constants(x, y)
        return mul_finite_p.bind(*auto_insert_reshard(x, y), finite=tuple(finite), **MUL_PARAMS)

    def div_finite(x, y, finite):
        """x / y where `finite` = (1 / y finite everywhere, x / y / y finite everywhere)."""
        if not any(finite):
            return div_by_constants(x, y)
        return div_finite_p.bind(*auto_insert_reshard(x, y), finite=tuple(finite))
    return mul_finite, div_finite


# Constants larger than this are not scanned (their products keep strong-zero derivatives).
_CONSTANT_SCAN_LIMIT = 1 << 20


# (id(array), reciprocal) -> (a weak reference to the array, the answer), while it lives: the
# translation's plan asks again of a constant each product by it (a shared scalar or weight
# can be the factor of thousands; the diffusion sampler's plan 0.215 -> 0.165 CPU s).
_SCANNED: dict = {}


def finite_nonzero_constant(value, reciprocal: bool = False) -> bool:
    """Whether `value` is a module constant (the translation holds them as numpy arrays) of
    a real floating type whose elements (or their reciprocals) are all finite and nonzero:
    a factor whose products (and quotients, by its reciprocal) need no strong zeros."""
    if type(value) is not np.ndarray:
        return _finite_nonzero(value, reciprocal)
    key = (id(value), reciprocal)
    hit = _SCANNED.get(key)
    if hit is not None and hit[0]() is value:
        return hit[1]
    found = _finite_nonzero(value, reciprocal)
    _SCANNED[key] = (weakref.ref(value, lambda _, key=key: _SCANNED.pop(key, None)), found)
    return found


def _finite_nonzero(value, reciprocal: bool) -> bool:
    if not isinstance(value, (np.ndarray, np.generic)) or value.size > _CONSTANT_SCAN_LIMIT:
        return False
    if not jnp.issubdtype(value.dtype, jnp.floating):
        return False
    with np.errstate(all="ignore"):
        values = np.asarray(value)
        if reciprocal:
            values = np.reciprocal(values.astype(np.float64)).astype(value.dtype)
        values = values.astype(np.float64)
        return bool(np.all(np.isfinite(values)) and np.all(values != 0))


# lax.mul binds `out_dtype`; the unary ops bind `accuracy` (None: XLA's default).
_LAX_PARAMS = {"mul": MUL_PARAMS, "exp": {"accuracy": None},
                   "expm1": {"accuracy": None}, "log": {"accuracy": None},
                   "log1p": {"accuracy": None}, "sqrt": {"accuracy": None},
                   "rsqrt": {"accuracy": None}, "cbrt": {"accuracy": None},
                   "tan": {"accuracy": None}}


# ------------------------------------------------------------------ dot_general's reverse mode

def dot_general(lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None):
    """`lax.dot_general`, the same op and value, whose cotangent for `rhs` contracts `lhs`
    with the cotangent (`dot_general(lhs, ct)`) when that product is `rhs` as laid out;
    lax's contracts the cotangent with `lhs` (`dot_general(ct, lhs)`) and transposes the
    product. Elsewhere each cotangent takes lax's order, or the other one where only that
    one needs no transpose (attention's batched products).

    For a dense layer `x @ w` (x: [batch..., k], the cotangent: [batch..., n]) lax's order
    contracts the cotangent's leading dimensions, so XLA transposes the cotangent, and on
    CPU fuses that transpose into the elementwise fusion that computes the cotangent (the
    activation's backward, a dozen inputs read column by column): most of a transformer's
    backward time. Contracting `x` instead transposes (or reads transposed) a stored
    activation, as Enzyme's reverse mode and hand-written backward passes do. The
    cotangents are the same sums of the same products, accumulated in another order.

    Operands other than real floating point, in a shard_map region (varying manual axes) or
    with a sharding on a mesh take lax's own rules (`lax.dot_general`). Uses jax's primitive rule tables (ad, batching,
    mlir lowering) and lax's abstract evaluation and lowering of `dot_general`.
    """
    if not (_differentiable_unsharded(lhs) and _differentiable_unsharded(rhs)):
        return lax.dot_general(lhs, rhs, dimension_numbers, precision=precision,
                               preferred_element_type=preferred_element_type)
    params = _dot_params(jax.typeof(lhs), jax.typeof(rhs), _hashable(dimension_numbers),
                         precision, preferred_element_type)
    return _dot_general_primitive().bind(lhs, rhs, **params)


def _hashable(dimension_numbers):
    return tuple(tuple(tuple(int(d) for d in dims) for dims in pair)
                 for pair in dimension_numbers)


def _differentiable_unsharded(x) -> bool:
    aval = jax.typeof(x)
    sharding = getattr(aval, "sharding", None)
    return (jnp.issubdtype(aval.dtype, jnp.floating) and not getattr(aval, "vma", None)
            and (sharding is None or sharding.mesh.empty))


@functools.lru_cache(maxsize=512)
def _dot_params(lhs_aval, rhs_aval, dimension_numbers, precision, preferred_element_type):
    """The params `lax.dot_general` binds for these operands (normalised as this jax
    release normalises them)."""
    closed = jax.make_jaxpr(lambda a, b: lax.dot_general(
        a, b, dimension_numbers, precision=precision,
        preferred_element_type=preferred_element_type))(
        jax.ShapeDtypeStruct(lhs_aval.shape, lhs_aval.dtype),
        jax.ShapeDtypeStruct(rhs_aval.shape, rhs_aval.dtype))
    (eqn,) = [e for e in closed.jaxpr.eqns if e.primitive is lax_internal.dot_general_p]
    return dict(eqn.params)


def _dot_dims(dimension_numbers, x_ndim, y_ndim):
    (x_contract, y_contract), (x_batch, y_batch) = dimension_numbers
    x_kept = [d for d in range(x_ndim) if d not in x_contract and d not in x_batch]
    y_kept = [d for d in range(y_ndim) if d not in y_contract and d not in y_batch]
    nb = len(x_batch)
    # the product's dimensions: batch, x's kept, y's kept
    ans = (tuple(range(nb)), tuple(range(nb, nb + len(x_kept))),
           tuple(range(nb + len(x_kept), nb + len(x_kept) + len(y_kept))))
    return x_kept, y_kept, ans


def _transposed(out, axes, dtype):
    out = lax.transpose(out, tuple(int(i) for i in np.argsort(axes)))
    return out if out.dtype == dtype else lax.convert_element_type(out, dtype)


def _in_order(axes) -> bool:
    return list(axes) == sorted(axes)


def _dot_lhs_cotangent(ct, x, y, *, dimension_numbers, precision, preferred_element_type,
                       **_):
    """lax's own (the cotangent's y dimensions contracted with y's kept ones), unless its
    product needs a transpose into x's layout and the other order (y's kept dimensions
    contracted with the cotangent's) gives that layout as it is."""
    (x_contract, y_contract), (x_batch, y_batch) = dimension_numbers
    x_kept, y_kept, (ans_batch, _, ans_y) = _dot_dims(
        dimension_numbers, len(x.aval.shape), np.ndim(y))
    by_y = [x_contract[i] for i in np.argsort(y_contract)]
    axes = list(x_batch) + x_kept + by_y
    swapped = list(x_batch) + [x_contract[list(y_contract).index(c)]
                               for c in sorted(y_contract)] + x_kept
    if not _in_order(axes) and _in_order(swapped):
        out = lax.dot_general(y, ct, ((tuple(y_kept), ans_y), (tuple(y_batch), ans_batch)),
                              precision=precision, preferred_element_type=preferred_element_type)
        return _transposed(out, swapped, x.aval.dtype)
    out = lax.dot_general(ct, y, ((ans_y, tuple(y_kept)), (ans_batch, tuple(y_batch))),
                          precision=precision, preferred_element_type=preferred_element_type)
    return _transposed(out, axes, x.aval.dtype)


def _dot_rhs_cotangent(ct, x, y, *, dimension_numbers, precision, preferred_element_type,
                       **_):
    """x's kept dimensions contracted with the cotangent's (lax: the cotangent with x's)
    where that product is y as laid out (a dense layer's weight); elsewhere lax's order.
    Attention's batched products (scores x values, queries x keys) then take lax's: on the
    searchless chess 9M gradient, 48 fewer fused HLO instructions and 8 fewer fusions than
    this order everywhere, on the LM benchmark 60 and 4 (with the lhs rule above)."""
    (x_contract, y_contract), (x_batch, y_batch) = dimension_numbers
    x_kept, y_kept, (ans_batch, ans_x, _) = _dot_dims(
        dimension_numbers, np.ndim(x), len(y.aval.shape))
    by_x = [y_contract[list(x_contract).index(c)] for c in sorted(x_contract)]
    axes = list(y_batch) + by_x + y_kept
    if _in_order(axes):
        out = lax.dot_general(x, ct, ((tuple(x_kept), ans_x), (tuple(x_batch), ans_batch)),
                              precision=precision, preferred_element_type=preferred_element_type)
        return _transposed(out, axes, y.aval.dtype)
    out = lax.dot_general(ct, x, ((ans_x, tuple(x_kept)), (ans_batch, tuple(x_batch))),
                          precision=precision, preferred_element_type=preferred_element_type)
    return _transposed(out, list(y_batch) + y_kept + [y_contract[i] for i in np.argsort(x_contract)],
                       y.aval.dtype)


@functools.cache
def _dot_general_primitive():
    source = lax_internal.dot_general_p
    prim = Primitive("dot_general_lhs_contracted")
    prim.def_impl(functools.partial(dispatch.apply_primitive, prim))
    prim.def_effectful_abstract_eval(source.abstract_eval)
    copy_lowerings(source, prim)
    ad.defbilinear(prim, _dot_lhs_cotangent, _dot_rhs_cotangent)  # (its transposes)
    define_jvp(prim, (_second, lambda g, y, **params: prim.bind(g, y, **params)),
               (_first, lambda g, x, **params: prim.bind(x, g, **params)))

    def batch(args, dims, *, dimension_numbers, precision, preferred_element_type, **_):
        out = jax.vmap(lambda a, b: lax.dot_general(
            a, b, dimension_numbers, precision=precision,
            preferred_element_type=preferred_element_type), in_axes=tuple(dims))(*args)
        return out, 0
    batching.primitive_batchers[prim] = batch
    return prim


# ------------------------------------------------------------------ linear maps with a custom transpose

class _Callable:
    """A function as a primitive's param: params must hash, and a closure compares by identity."""
    __slots__ = ("fn", "__weakref__")

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, *args):
        return self.fn(*args)


@functools.cache
def _custom_linear_primitive():
    prim = Primitive("shlo2jax_custom_linear")
    prim.multiple_results = True

    def value(*args, forward, transpose, num_res, differentiable_forward):
        return list(forward(*args))

    def abstract(*avals, forward, transpose, num_res, differentiable_forward=None):
        outs = jax.eval_shape(forward, *[jax.ShapeDtypeStruct(a.shape, a.dtype) for a in avals])
        return [core.ShapedArray(o.shape, o.dtype) for o in outs]

    prim.def_impl(value)
    prim.def_abstract_eval(abstract)
    mlir.register_lowering(prim, mlir.lower_fun(value, multiple_results=True))

    def jvp(primals, tangents, *, forward, transpose, num_res, differentiable_forward):
        res, lin = primals[:num_res], primals[num_res:]
        res_tangents, lin_tangents = tangents[:num_res], tangents[num_res:]
        params = dict(forward=forward, transpose=transpose, num_res=num_res,
                      differentiable_forward=differentiable_forward)
        out = prim.bind(*primals, **params)
        out_tangents = prim.bind(*res, *map(ad.instantiate_zeros, lin_tangents), **params)
        if any(type(t) is not ad.Zero for t in res_tangents):
            # the map itself depends on the residuals (second-order derivatives)
            _, through_res = jax.jvp(lambda *r: differentiable_forward(*r, *lin), tuple(res),
                                     tuple(map(ad.instantiate_zeros, res_tangents)))
            out_tangents = [a + b for a, b in zip(out_tangents, through_res)]
        return out, out_tangents

    def transpose_rule(cts, *args, forward, transpose, num_res, differentiable_forward):
        res = args[:num_res]
        if any(ad.is_undefined_primal(r) for r in res):
            raise ValueError("custom_linear is not linear in its residual arguments")
        avals = abstract(*[a.aval if ad.is_undefined_primal(a) else core.typeof(a) for a in args],
                         forward=forward, transpose=transpose, num_res=num_res)
        cts = [jax.lax.full(a.shape, 0, a.dtype) if type(ct) is ad.Zero else ct
               for ct, a in zip(cts, avals)]
        return [None] * num_res + list(transpose(*res, *cts))

    def batch(args, dims, *, forward, transpose, num_res, differentiable_forward):
        size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
        # linear arguments are materialised batched, so cotangents come back batched too
        args = [a if i < num_res and d is None else batching.bdim_at_front(a, d, size)
                for i, (a, d) in enumerate(zip(args, dims))]
        res_axes = tuple(None if d is None else 0 for d in dims[:num_res])
        n_lin = len(args) - num_res
        batched_forward = jax.vmap(forward, in_axes=res_axes + (0,) * n_lin)
        n_out = len(jax.eval_shape(batched_forward, *args))
        batched_transpose = jax.vmap(transpose, in_axes=res_axes + (0,) * n_out)
        batched_differentiable = jax.vmap(differentiable_forward,
                                          in_axes=res_axes + (0,) * n_lin)
        outs = prim.bind(*args, forward=_Callable(batched_forward),
                         transpose=_Callable(batched_transpose), num_res=num_res,
                         differentiable_forward=_Callable(batched_differentiable))
        return outs, [0] * len(outs)

    ad.primitive_jvps[prim] = jvp
    ad.primitive_transposes[prim] = transpose_rule
    batching.primitive_batchers[prim] = batch
    return prim


def custom_linear(forward, transpose, residuals, linear, differentiable_forward=None) -> list:
    """`forward(*residuals, *linear)`, a list of arrays linear in `linear`, whose transpose
    is `transpose(*residuals, *cotangents)` (a list of cotangents of `linear`).

    Like `jax.custom_derivatives.linear_call`, plus a batching rule and derivatives with
    respect to the residuals (second order), taken through `differentiable_forward` (the
    same map, written so that reverse mode can go through it; default `forward`). It is how
    a derivative can be computed one way in forward mode and another in reverse mode: a
    `custom_jvp` rule returns `custom_linear(jvp, vjp, primals, tangents)`. Uses jax's
    primitive rule tables.
    """
    return _custom_linear_primitive().bind(
        *residuals, *linear, forward=_Callable(forward), transpose=_Callable(transpose),
        num_res=len(residuals),
        differentiable_forward=_Callable(differentiable_forward or forward))


# ------------------------------------------------------------------ bounded loops

class LoopBoundWarning(UserWarning):
    """A while loop differentiated in reverse mode as a bounded loop needed more trips than
    its bound: its reverse-mode derivatives are NaN (see `LoadOptions.max_loop_trips`)."""


# ------------------------------------------------------------------ forward mode only

def no_reverse_mode_primitive():
    """An identity on tangents whose transpose raises: placed on the tangent outputs of an
    op that has a forward-mode but no reverse-mode derivative, so reverse mode fails with
    an error naming the op. Binding takes one array and the params `op_name`, `location`,
    `why`. Uses jax's primitive rule tables (ad, batching, mlir lowering).
    """
    prim = Primitive("shlo2jax_no_reverse_mode")
    prim.def_impl(lambda x, **_: x)
    prim.def_abstract_eval(lambda x, **_: x)
    mlir.register_lowering(prim, lambda ctx, x, **_: [x])

    def _transpose(ct, x, *, op_name, location, why):
        raise TranslationError(op_name, location, f"cannot reverse-differentiate: {why}")

    ad.deflinear2(prim, _transpose)
    batching.primitive_batchers[prim] = lambda args, dims, **p: (prim.bind(*args, **p), dims[0])
    return prim
