"""Fallback for CHLO ops without a direct translation: jaxlib's `chlo-legalize-to-stablehlo`.

Most chlo ops map straight to a lax function (ops/chlo.py). For the rest (e.g. the
internal `chlo._asin_acos_kernel`, or an op a newer producer added) the module is
rewritten in place into plain stablehlo before it is decoded. The pass rewrites every
chlo op of the module, not only the missing ones, so it runs only when needed.
"""

from __future__ import annotations

from typing import Iterable, Optional

from jaxlib.mlir.passmanager import PassManager

from shlo2jax import registry
from shlo2jax.transforms.common import Legalization, op_names, rewrite_on_a_trial_copy

_PIPELINE = "builtin.module(func.func(chlo-legalize-to-stablehlo))"


def _rewrite(module_op) -> None:
    PassManager.parse(_PIPELINE).run(module_op)


# What decoding applies where a chlo op has no translation rule (transforms/legalize).
LEGALIZATION = Legalization(prefix="chlo.", rewrite=_rewrite)


def legalize_chlo(mlir_module, unsupported_names: Optional[Iterable[str]] = None) -> bool:
    """Rewrites `mlir_module`'s chlo ops to stablehlo if one of them cannot be translated.

    `unsupported_names`: op names known to have no translation; None means every chlo op
    that has no registered handler. Call inside the module's context. Does nothing when
    the module holds no such op, or when the pass fails: the module is then left untouched
    and the decoder reports the ops as usual.
    """
    chlo_ops = {name for name in op_names(mlir_module) if name.startswith("chlo.")}
    if unsupported_names is None:
        missing = {name for name in chlo_ops if registry.lookup(name) is None}
    else:
        missing = chlo_ops.intersection(unsupported_names)
    if not missing:
        return False
    return rewrite_on_a_trial_copy(mlir_module, _rewrite)
