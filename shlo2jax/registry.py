"""The op registry: one handler per op name, plus an optional load-time `prepare`.

A handler is `handler(ctx, op, *operands) -> result` (or a sequence of results
for multi-result ops). `prepare(op) -> dict` runs once at load time and turns the
op's generic decoded attributes into exactly what the handler needs; raising
`Unsupported` there reports the op at load time instead of at trace time.
"""

from __future__ import annotations

from typing import Callable, Optional

from shlo2jax.errors import Unsupported  # noqa: F401  (prepare functions raise it)


class OpRule:
    __slots__ = ("name", "handler", "prepare")

    def __init__(self, name: str, handler: Callable, prepare: Optional[Callable]):
        self.name, self.handler, self.prepare = name, handler, prepare


OP_RULES: dict[str, OpRule] = {}
CUSTOM_CALL_RULES: dict[str, OpRule] = {}


def _is_builtin(handler) -> bool:
    return getattr(handler, "__module__", "").startswith("shlo2jax.")


def _register(table: dict, name: str, rule: OpRule) -> None:
    # The built-in families are imported lazily (at the first load); a rule the user
    # registered before that must survive their import.
    existing = table.get(name)
    if existing is not None and _is_builtin(rule.handler) and not _is_builtin(existing.handler):
        return
    table[name] = rule


def register_op(*names: str, prepare: Optional[Callable] = None):
    """Decorator: `@register_op("stablehlo.add")` registers a handler for those op names.

    A user's registration replaces the built-in rule for that op name.
    """
    def wrap(handler):
        for name in names:
            _register(OP_RULES, name, OpRule(name, handler, prepare))
        return handler
    return wrap


def register_custom_call(target: str, handler: Optional[Callable] = None, *,
                         prepare: Optional[Callable] = None):
    """Registers a handler for `stablehlo.custom_call @target`; usable as a decorator.

    User registrations replace built-in ones of the same target.
    """
    def wrap(fn):
        _register(CUSTOM_CALL_RULES, target, OpRule(target, fn, prepare))
        return fn
    return wrap(handler) if handler is not None else wrap


COMPOSITE_RULES: dict[str, Callable] = {}


def register_composite(name: str, fn: Optional[Callable] = None):
    """Registers a JAX implementation for `stablehlo.composite "name"`; usable as a decorator.

    `fn(*operands, **composite_attributes)` returns one array or a sequence of them. It
    replaces the composite's decomposition for every program loaded afterwards.
    """
    def wrap(f):
        COMPOSITE_RULES[name] = f
        return f
    return wrap(fn) if fn is not None else wrap


def lookup(name: str) -> Optional[OpRule]:
    if not _loaded:  # called once per op at load time: keep the common path one dict lookup
        _load_builtin_rules()
    return OP_RULES.get(name)


_loaded = False


def _load_builtin_rules():
    global _loaded
    if not _loaded:
        _loaded = True
        import shlo2jax.ops  # noqa: F401  (registers every family)
