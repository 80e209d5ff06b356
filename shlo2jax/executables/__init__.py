"""The ways a function runs, each an executable chosen once, when its program is loaded.

An executable is called with a function's checked positional arguments (its module
function's, f6 values coerced) and returns the tuple of its results; `jax.jit`, `jax.grad`
and `jax.vmap` of a `Function` trace that call. `lowering` names what calls and jit lower:
"direct" (the module's own ops) or "translate".

- `translated`: the translation, jitted (the default);
- `direct`: the module's own ops, through one primitive whose derivatives and vmap are the
  translation's (`load(..., lowering="direct")`);
- `sharded`: a program partitioned over several devices, on its mesh;
- `polymorphic`: a function with `?` dimensions, specialised per call.

An executable runs the module function on the module's own arguments and knows nothing of who
calls it: what a caller passes and gets back is the function's calling convention's
(`shlo2jax.conventions`).

A new kind is one module with a class of this protocol and one line in `choose`.
"""

from __future__ import annotations

from typing import Optional, Protocol

from shlo2jax.executables.direct import Direct, why_not_direct
from shlo2jax.executables.polymorphic import Polymorphic
from shlo2jax.executables.sharded import Sharded, TooFewDevices, enough_devices
from shlo2jax.executables.translated import Translated


class Executable(Protocol):
    lowering: str  # "direct" or "translate"

    def __call__(self, *args) -> tuple:
        ...


def why_translated(function) -> Optional[str]:
    """None when `function` lowers directly; else why it is translated ("not asked for"
    unless the program was loaded with `lowering="direct"`)."""
    if function.program.options.lowering != "direct":
        return "not asked for"
    return why_not_direct(function.program, function)


def choose(function) -> Executable:
    """The executable that runs `function` (its `lowering_note` already decided)."""
    if function.is_polymorphic:
        return Polymorphic(function)
    if function.is_sharded:
        if enough_devices(function.program):
            return Sharded(function)
        if function.program.has_manual_regions:
            return TooFewDevices(function)
        return Translated(function)  # annotations only: the same values on one device
    if function.lowering_note is None:
        return Direct(function)
    return Translated(function)
