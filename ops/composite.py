"""stablehlo.composite: a named op with a decomposition function.

By default the decomposition (a func in the module) is called, which is what
the spec defines the composite to mean; a version-1 composite named after a unary chlo op
(`chlo.erfc`) is that op, as XLA recomposes it. `register_composite(name, fn)` lets a
user supply a JAX implementation for a composite name instead (e.g. a fused
kernel or `jax.nn.dot_product_attention` for "odml.scaled_dot_product_attention"):
`fn(*operands, **composite_attributes)` returns one array or a sequence of them.
"""

from __future__ import annotations

from typing import Callable, NamedTuple, Optional

from shlo2jax.ops._common import single_or_tuple
from shlo2jax.registry import COMPOSITE_RULES, OP_COMPOSITES, Unsupported, register_op


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
    attributes = dict(op.attrs.get("composite_attributes", {}) or {})
    return Composite(name, decomposition, attributes,
                     COMPOSITE_RULES.get(name) or _chlo_op(op, name, attributes))


def _chlo_op(op, name: str, attributes: dict) -> Optional[Callable]:
    """The rule of the chlo op a composite stands for, or None. StableHLO's serialization
    writes a chlo op it cannot hold as a version-1 composite of the op's name whose
    decomposition is the op's own expansion (`chlo.erfc`: 91 ops, one function per site,
    in jax 0.12's exports), and XLA's compile recomposes the op: so the translation
    computes the op itself, which gives the producer's derivative (lax's), not the
    expansion's, and traces one equation where it traced the expansion."""
    unary = OP_COMPOSITES.get(name)
    if unary is None or op.attrs.get("version") != 1 or attributes or len(op.operands) != 1 \
            or len(op.result_types) != 1:
        return None
    return unary


@register_op("stablehlo.composite", prepare=_prepare)
def composite(ctx, op, *operands):
    p = op.params
    if p.implementation is not None:
        out = p.implementation(*operands, **p.attributes)
        if len(op.results) == 1:
            return out[0] if isinstance(out, (tuple, list)) else out
        return tuple(out)
    return single_or_tuple(op, ctx.translator.callee(p.decomposition)(*operands))
