"""The rule registry: one rule per op name and per custom-call target.

A rule is a handler and an optional load-time `prepare`. `prepare(op)` runs once, when the
program is loaded, and turns the op's decoded attributes (`op.attrs`) into exactly what the
handler needs; raising `Unsupported` there reports the op at load time instead of at trace
time. The handler runs while the program is traced:

    handler(ctx, op, *operands) -> result (a sequence of results for a multi-result op)

with whatever `prepare` returned in `op.params` (`op.attrs` itself when there is no
`prepare`). Ops and custom-call targets follow the same contract: a `stablehlo.custom_call`
is resolved at load time to its target's rule (shlo2jax.module), so its handler receives the
call's operands like any op's.

Every name is written out literally where it is registered, so searching for
`"stablehlo.cosine"` finds its rule.

A built-in custom-call target also carries a `TargetInfo` (`info=` where it is registered, or
`describe`): what the README's table of targets says about it.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Optional

from shlo2jax.errors import Unsupported  # noqa: F401  (what a `prepare` raises)


class OpRule:
    __slots__ = ("name", "handler", "prepare")

    def __init__(self, name: str, handler: Callable, prepare: Optional[Callable]):
        self.name, self.handler, self.prepare = name, handler, prepare


@dataclasses.dataclass(frozen=True)
class TargetInfo:
    """What a custom-call kernel is (one entry for its several target names: dtypes,
    CUDA/ROCm twins), as the README's table of targets shows it.

    forms: how the kernel takes its parameters -- "FFI" (typed attributes in
      `mhlo.backend_config`), "descriptor" (a packed C struct in `backend_config`),
      "operands" (leading scalar operands), "attributes" (a plain string or dictionary
      config), "none".
    jax: the jax releases whose lowering emitted it.
    dtypes: the element types it takes.
    test: the tests covering it, `tests/<file>.py::<test>`.
    """
    kernel: str
    forms: tuple
    jax: str
    dtypes: str
    test: tuple


OP_RULES: dict[str, OpRule] = {}
CUSTOM_CALL_RULES: dict[str, OpRule] = {}
COMPOSITE_RULES: dict[str, Callable] = {}
# Composite names that stand for an op the translation has a rule for (`chlo.erfc`: a chlo op
# StableHLO's serialization wrote as a composite) -> that rule's function of the one operand
# (filled by the op families; a user's register_composite comes first).
OP_COMPOSITES: dict[str, Callable] = {}
# Custom-call target -> its description (kept apart from the rule: a target may be
# described in another module than the one registering it).
TARGET_INFO: dict[str, TargetInfo] = {}


def _is_builtin(handler) -> bool:
    return getattr(handler, "__module__", "").startswith("shlo2jax.")


def is_builtin(rule: OpRule) -> bool:
    """Whether the rule is one of shlo2jax's own (not one a user registered)."""
    return _is_builtin(rule.handler)


def _register(table: dict, name: str, rule: OpRule) -> None:
    # The built-in families are imported lazily (at the first load); a rule the user
    # registered before that must survive their import.
    existing = table.get(name)
    if existing is not None and _is_builtin(rule.handler) and not _is_builtin(existing.handler):
        return
    table[name] = rule


def _registration(table: dict, what: str, names: tuple, prepare: Optional[Callable]):
    if not names or not all(isinstance(n, str) for n in names):
        raise TypeError(f"{what} takes the names to register, then `prepare=`, and decorates "
                        f"the handler: @{what}(\"name\", ..., prepare=fn); got {names!r}")

    def wrap(handler):
        for name in names:
            _register(table, name, OpRule(name, handler, prepare))
        return handler
    return wrap


def register_op(*names: str, prepare: Optional[Callable] = None):
    """Decorator: `@register_op("stablehlo.add", "mhlo.add")` registers a handler for those
    op names. A user's registration replaces the built-in rule for that op name."""
    return _registration(OP_RULES, "register_op", names, prepare)


def register_custom_call(*targets: str, prepare: Optional[Callable] = None,
                         info: Optional[TargetInfo] = None):
    """Decorator: `@register_custom_call("my_kernel")` registers a handler for
    `stablehlo.custom_call @my_kernel` (and the other targets named). The handler has the op
    contract, `handler(ctx, op, *operands)`, with `prepare(op)`'s result (else the call's
    attributes) in `op.params`; `info` describes the kernel (see `describe`). A user's
    registration replaces the built-in one."""
    register = _registration(CUSTOM_CALL_RULES, "register_custom_call", targets, prepare)
    if info is not None:
        describe(targets, info)
    return register


def describe(targets, info: TargetInfo) -> None:
    """Attaches `info` to each of `targets` (custom-call target names)."""
    for target in targets:
        TARGET_INFO[target] = info


def register_composite(name: str, fn: Optional[Callable] = None):
    """Registers a JAX implementation for `stablehlo.composite "name"`; usable as a decorator.

    `fn(*operands, **composite_attributes)` returns one array or a sequence of them. It
    replaces the composite's decomposition for every program loaded afterwards.
    """
    def wrap(f):
        COMPOSITE_RULES[name] = f
        return f
    return wrap(fn) if fn is not None else wrap


# Rules of rules: name -> a rule whose handler takes an op's rule and returns the rule to run
# instead. "carried" is how a rule runs for an op that touches quantized or f6 values (values
# that are not plain XLA arrays), registered by shlo2jax.ops.quantized when the built-in rules
# load; the decoder asks for it once per such op, at load time (`carried`).
RULE_WRAPPERS: dict[str, OpRule] = {}


def register_rule_wrapper(*names: str):
    """Decorator: `@register_rule_wrapper("carried")` registers `wrapper(rule) -> rule` under
    those names. A user's registration replaces the built-in one."""
    return _registration(RULE_WRAPPERS, "register_rule_wrapper", names, None)


def carried(rule: OpRule) -> OpRule:
    """The rule an op touching quantized or f6 values runs instead of `rule`."""
    wrapper = RULE_WRAPPERS.get("carried")
    if wrapper is None:
        raise RuntimeError("quantized and f6 values need the built-in rules (shlo2jax.ops), "
                           "which load with the first program")
    return wrapper.handler(rule)


def lookup(name: str) -> Optional[OpRule]:
    """The rule of an op name (None when there is none)."""
    return OP_RULES.get(name)


def custom_call_rule(target: str) -> Optional[OpRule]:
    """The rule of a custom-call target (None when there is none)."""
    return CUSTOM_CALL_RULES.get(target)
