"""The conformance `check` dialect and the `check.*` custom-call targets.

Checks have no effect on values. When a recorder is attached to the translator
(the conformance runner does this), each check appends
`(op, kind, params, operands)` so its comparison happens after the run, on
concrete values, with the tolerances the conformance README defines.
"""

from __future__ import annotations

import jax.numpy as jnp

from shlo2jax.registry import register_custom_call, register_op

# kind -> (operand count incl. expected, default parameters)
CUSTOM_CALL_CHECKS = {
    "check.expect_eq": ("eq", {}),
    "check.expect_close": ("close", {"min_ulp_difference": 0, "max_ulp_difference": 3}),
    "check.expect_almost_eq": ("almost_eq", {"tolerance": 1e-3}),
}

CONST_CHECKS = {
    "check.expect_eq_const": ("eq", {}),
    "check.expect_almost_eq_const": ("almost_eq", {"tolerance": 1e-4}),
    "check.expect_eq": ("eq", {}),
    "check.expect_almost_eq": ("almost_eq", {"tolerance": 1e-4}),
    "check.expect_close": ("close", {"min_ulp_difference": 0, "max_ulp_difference": 3}),
    "check.expect_serialized_eq": ("serialized_eq", {}),
}


def _record(ctx, op, kind, params, operands):
    recorder = ctx.translator.recorder
    if recorder is not None:
        recorder.append((op, kind, params, tuple(operands)))


def _custom_call_prepare(kind, defaults):
    def prepare(op):
        params = dict(defaults)
        return params
    return prepare


for _target, (_kind, _defaults) in CUSTOM_CALL_CHECKS.items():
    def _handler(ctx, op, params, *operands, _kind=_kind):
        _record(ctx, op, _kind, params, operands)
        return ()
    register_custom_call(_target, _handler, prepare=_custom_call_prepare(_kind, _defaults))


def _check_eq_handler(ctx, op, params, lhs, rhs):
    """`custom_call @check.eq` returns whether the operands agree, and the reference
    interpreter fails the case when they do not: integers bitwise, other types (and
    quantized values, dequantized) within 1e-4. The comparison is recorded with that
    meaning; the returned boolean is the bitwise one."""
    from shlo2jax.quant import QArray
    quantized = isinstance(lhs, QArray) or isinstance(rhs, QArray)
    if not quantized and (jnp.issubdtype(rhs.dtype, jnp.integer) or rhs.dtype == jnp.bool_):
        _record(ctx, op, "eq", {}, (lhs, rhs))
    else:
        _record(ctx, op, "almost_eq", {"tolerance": 1e-4}, (lhs, rhs))
    if quantized:
        lhs, rhs = (x.dequantize() if isinstance(x, QArray) else x for x in (lhs, rhs))
    same = lhs == rhs
    if jnp.issubdtype(lhs.dtype, jnp.inexact):
        same = same | (jnp.isnan(lhs) & jnp.isnan(rhs))
    return jnp.reshape(jnp.all(same), op.result_types[0].shape)


register_custom_call("check.eq", _check_eq_handler)


def _const_prepare(kind, defaults):
    def prepare(op):
        params = dict(defaults)
        params.setdefault("iter", 0)
        for key in ("tolerance", "min_ulp_difference", "max_ulp_difference", "probe_id", "iter"):
            if key in op.attrs:
                params[key] = op.attrs[key]
        if "value" in op.attrs:
            params["expected"] = op.attrs["value"]
        return params
    return prepare


for _name, (_kind, _defaults) in CONST_CHECKS.items():
    def _const_handler(ctx, op, *operands, _kind=_kind):
        _record(ctx, op, _kind, op.params, operands)
        return ()
    register_op(_name, prepare=_const_prepare(_kind, _defaults))(_const_handler)
