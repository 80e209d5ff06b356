"""stablehlo.composite: a named op with a decomposition function.

By default the decomposition (a func in the module) is called, which is what
the spec defines the composite to mean. `register_composite(name, fn)` lets a
user supply a JAX implementation for a composite name instead (e.g. a fused
kernel or `jax.nn.dot_product_attention` for "odml.scaled_dot_product_attention"):
`fn(*operands, **composite_attributes)` returns one array or a sequence of them.
"""

from __future__ import annotations

from typing import Callable, NamedTuple, Optional

from shlo2jax.ops._common import single_or_tuple
from shlo2jax.registry import COMPOSITE_RULES, Unsupported, register_op


class Composite(NamedTuple):
    name: str
    decomposition: str                  # the function the spec defines the composite as
    attributes: dict                    # composite_attributes, for a registered implementation
    implementation: Optional[Callable]  # the registered JAX implementation, if any


def _prepare(op):
    name = op.attrs.get("name")
    decomposition = op.attrs.get("decomposition")
    if name is None or decomposition is None:
        raise Unsupported("composite without a name or decomposition")
    return Composite(name, decomposition, dict(op.attrs.get("composite_attributes", {}) or {}),
                     COMPOSITE_RULES.get(name))


@register_op("stablehlo.composite", prepare=_prepare)
def composite(ctx, op, *operands):
    p = op.params
    if p.implementation is not None:
        out = p.implementation(*operands, **p.attributes)
        if len(op.results) == 1:
            return out[0] if isinstance(out, (tuple, list)) else out
        return tuple(out)
    return single_or_tuple(op, ctx.translator.callee(p.decomposition)(*operands))
