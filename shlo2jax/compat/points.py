"""The registry of compatibility points: each difference between jax releases registers a
probe here, and the self-check (`shlo2jax.compat.selfcheck`) reports how each resolved."""

from __future__ import annotations

import inspect
from typing import Callable

POINTS: dict[str, Callable[[], str]] = {}


def point(name: str):
    """Registers `probe() -> str` (the variant this jax gets; raises where none fits) as the
    compatibility point `name` that the self-check reports."""
    def register(probe):
        POINTS[name] = probe
        return probe
    return register


def params(fn) -> frozenset:
    """The parameter names of `fn` (empty for a builtin without a signature)."""
    try:
        return frozenset(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return frozenset()
