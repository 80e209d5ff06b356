"""The conformance `check` dialect and the `check.*` custom-call targets.

Checks have no effect on values. When the translator records checks (the conformance
runner's mode, `TranslatorMode.recorder`), each check appends `(op, Check, operands)` so its
comparison happens after the run, on concrete values, with the tolerances the conformance
README defines.
"""

from __future__ import annotations

from typing import NamedTuple, Optional

import jax.numpy as jnp
import numpy as np

from shlo2jax.quant import QArray
from shlo2jax.registry import register_custom_call, register_op


class Check(NamedTuple):
    """What a check compares, and within what."""
    kind: str                        # eq, almost_eq, close or serialized_eq
    tolerance: float = 1e-4          # almost_eq: the largest absolute difference
    min_ulp_difference: int = 0      # close: the accepted ULP distances
    max_ulp_difference: int = 3
    expected: Optional[np.ndarray] = None  # the value a `check.expect_*_const` op carries
    probe_id: Optional[str] = None   # serialized_eq: the probe and iteration compared with
    iter: int = 0


# Custom calls take the expected value as their second operand.
CUSTOM_CALL_CHECKS = {
    "check.expect_eq": Check("eq"),
    "check.expect_close": Check("close"),
    "check.expect_almost_eq": Check("almost_eq", tolerance=1e-3),
}

# The dialect's ops carry their parameters (and the expected value) as attributes.
CONST_CHECKS = {
    "check.expect_eq_const": Check("eq"),
    "check.expect_almost_eq_const": Check("almost_eq"),
    "check.expect_eq": Check("eq"),
    "check.expect_almost_eq": Check("almost_eq"),
    "check.expect_close": Check("close"),
    "check.expect_serialized_eq": Check("serialized_eq"),
}

_ATTRIBUTES = ("tolerance", "min_ulp_difference", "max_ulp_difference", "probe_id", "iter")


def _record(ctx, op, check: Check, operands) -> None:
    recorder = ctx.translator.mode.recorder
    if recorder is not None:
        recorder.append((op, check, tuple(operands)))


def _prepare_custom_call_check(op) -> Check:
    return CUSTOM_CALL_CHECKS[op.attrs["call_target_name"]]


def custom_call_check(ctx, op, *operands):
    _record(ctx, op, op.params, operands)
    return ()


for _target in CUSTOM_CALL_CHECKS:
    register_custom_call(_target, prepare=_prepare_custom_call_check)(custom_call_check)


@register_custom_call("check.eq")
def check_eq(ctx, op, lhs, rhs):
    """`custom_call @check.eq` returns whether the operands agree, and the reference
    interpreter fails the case when they do not: integers bitwise, other types (and
    quantized values, dequantized) within 1e-4. The comparison is recorded with that
    meaning; the returned boolean is the bitwise one."""
    quantized = isinstance(lhs, QArray) or isinstance(rhs, QArray)
    if not quantized and (jnp.issubdtype(rhs.dtype, jnp.integer) or rhs.dtype == jnp.bool_):
        _record(ctx, op, Check("eq"), (lhs, rhs))
    else:
        _record(ctx, op, Check("almost_eq", tolerance=1e-4), (lhs, rhs))
    if quantized:
        lhs, rhs = (x.dequantize() if isinstance(x, QArray) else x for x in (lhs, rhs))
    same = lhs == rhs
    if jnp.issubdtype(lhs.dtype, jnp.inexact):
        same = same | (jnp.isnan(lhs) & jnp.isnan(rhs))
    return jnp.reshape(jnp.all(same), op.result_types[0].shape)


def _prepare_const_check(op) -> Check:
    given = {key: op.attrs[key] for key in _ATTRIBUTES if key in op.attrs}
    return CONST_CHECKS[op.name]._replace(expected=op.attrs.get("value"), **given)


def const_check(ctx, op, *operands):
    _record(ctx, op, op.params, operands)
    return ()


for _name in CONST_CHECKS:
    register_op(_name, prepare=_prepare_const_check)(const_check)
