"""stablehlo.custom_call: dispatch on the call target through the custom-call registry."""

from __future__ import annotations

from shlo2jax import registry
from shlo2jax.registry import Unsupported, register_op


def _prepare(op):
    target = op.attrs.get("call_target_name", "")
    rule = registry.CUSTOM_CALL_RULES.get(target)
    if rule is None:
        raise Unsupported(f"custom_call target {target!r} has no translation")
    params = rule.prepare(op) if rule.prepare is not None else op.attrs
    return rule.handler, params


@register_op("stablehlo.custom_call", "mhlo.custom_call", prepare=_prepare)
def custom_call(ctx, op, *args):
    handler, params = op.params
    return handler(ctx, op, params, *args)
