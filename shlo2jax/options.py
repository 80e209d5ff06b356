"""`LoadOptions`: how a program is loaded, translated and run, decided once by `load()`.

One frozen object, built and validated by `load()`, owned by the `Program`; handlers read it
as `ctx.options`, and a tool that loads a program again passes the same object
(`load(text, options=program.options)`).
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import types
import typing
from typing import Iterator, Literal, Mapping, Optional, Union

Gradients = Literal["strong_zero", "lax"]
Lowering = Literal["translate", "direct"]
GRADIENT_MODES = typing.get_args(Gradients)
LOWERINGS = typing.get_args(Lowering)
# The trips a data-dependent while loop may take in reverse mode when the loop gives no bound
# of its own (a counter compared with a constant), its derivative is not element-wise, and
# `max_loop_trips` names none: more, and its reverse-mode derivatives are NaN with a warning.
DEFAULT_LOOP_TRIPS = 1000


class LoopBounds(Mapping):
    """A read-only mapping from while loops' locations to their `max_loop_trips` bounds:
    hashable, equal to a dict with the same items, and picklable (options travel to worker
    processes)."""

    __slots__ = ("_items",)

    def __init__(self, bounds=()):
        items = dict(bounds)
        object.__setattr__(self, "_items", tuple(sorted(items.items())))

    def __setattr__(self, name, value):
        raise AttributeError("LoopBounds is read-only")

    def __getitem__(self, location: str) -> int:
        for key, value in self._items:
            if key == location:
                return value
        raise KeyError(location)

    def __iter__(self) -> Iterator[str]:
        return (key for key, _ in self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self):
        return hash(self._items)

    def __eq__(self, other):
        return dict(self._items) == dict(other) if isinstance(other, Mapping) else NotImplemented

    def __repr__(self) -> str:
        return repr(dict(self._items))

    def __reduce__(self):
        return LoopBounds, (self._items,)


@dataclasses.dataclass(frozen=True)
class LoadOptions:
    """How a program is loaded (see `shlo2jax.load`).

    Each field is documented where it is declared (its docstring); the command line's flags
    (`shlo2jax.tools.option_flags`) take their help from there.
    """
    placeholder_data: bool = False
    """Fill `dense_resource<__elided__>` constants with data seeded by `seed` instead of
    refusing to load."""
    seed: int = 0
    """The seed of placeholder data."""
    strict: bool = True
    """Report every unsupported op or type together at load (`UnsupportedError`); False
    loads what can run and reports the rest when it is reached."""
    gradients: Gradients = "strong_zero"
    """"strong_zero" (default): the ops whose local derivative can be infinite (multiply,
    divide, exp, log, sqrt, rsqrt, power, ...) differentiate with strong zeros, so a zero
    cotangent never meets an infinite local derivative as 0 * inf = NaN (see
    `shlo2jax.gradients`); "lax": plain lax derivatives."""
    max_loop_trips: Union[None, int, LoopBounds] = None
    """How reverse mode goes through while loops whose trip count depends on the data. None
    (default): a loop whose derivative is element-wise (special functions' series and
    continued fractions) is differentiated exactly through forward mode; any other runs as a
    checkpointed loop of at most as many trips as a counter in its condition allows, else
    `DEFAULT_LOOP_TRIPS` (1000); a loop needing more has NaN derivatives and warns
    (`shlo2jax.gradients.LoopBoundWarning`). An int (for every such loop) or a mapping from a
    loop's location, as messages print it, to an int (kept as a read-only `LoopBounds`):
    that loop runs as a checkpointed loop of at most that many trips."""
    producer_vjp: bool = True
    """A `jax.export` artifact serialized with `vjp_order >= 1` carries its producer's VJP:
    reverse mode uses it."""
    lowering: Lowering = "translate"
    """"translate" (default), or "direct": where a function allows it, `jit` and calls lower
    it to the module's own ops (see `shlo2jax.executables.direct`)."""
    untrusted: bool = False
    """Read the input in a child process first, with a time limit
    (`shlo2jax.sources.UNTRUSTED_READ_SECONDS`): an input that would hang or crash jaxlib's
    readers is a `LoadError` instead. It costs a few seconds per load (the child starts Python
    and jax)."""

    def __post_init__(self):
        for name in ("placeholder_data", "strict", "producer_vjp", "untrusted"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name} must be a bool, got {getattr(self, name)!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise TypeError(f"seed must be an int, got {self.seed!r}")
        if self.gradients not in GRADIENT_MODES:
            raise ValueError(f"gradients must be one of {GRADIENT_MODES}, got {self.gradients!r}")
        if self.lowering not in LOWERINGS:
            raise ValueError(f"lowering must be one of {LOWERINGS}, got {self.lowering!r}")
        trips = self.max_loop_trips
        values = trips.values() if isinstance(trips, Mapping) else [] if trips is None else [trips]
        for n in values:
            if isinstance(n, bool) or not isinstance(n, int) or n < 0:
                raise ValueError(f"max_loop_trips must be a non-negative int (or a mapping from "
                                 f"loop locations to them), got {n!r}")
        if isinstance(trips, Mapping) and not isinstance(trips, LoopBounds):
            # frozen: a read-only copy the caller cannot change afterwards (and hashable)
            object.__setattr__(self, "max_loop_trips", LoopBounds(trips))

    @classmethod
    def of(cls, options: Optional["LoadOptions"] = None, **changes) -> "LoadOptions":
        """`options` (default: the defaults) with `changes`, validated."""
        if options is not None and not isinstance(options, cls):
            raise TypeError(f"options must be a shlo2jax.LoadOptions, got {type(options).__name__}")
        base = options or cls()
        return dataclasses.replace(base, **changes) if changes else base

    def loop_bound(self, location: str) -> Optional[int]:
        """The `max_loop_trips` bound of the while loop at `location` (None: no bound)."""
        trips = self.max_loop_trips
        if isinstance(trips, Mapping):
            return trips.get(location)
        return trips


@functools.lru_cache(maxsize=None)
def field_help() -> Mapping[str, str]:
    """Each `LoadOptions` field's documentation (the docstring under its declaration), one
    paragraph of plain text, read once: what the command line's flags print as their help."""
    tree = ast.parse(inspect.getsource(LoadOptions).strip())
    body = tree.body[0].body
    docs = {}
    for declared, after in zip(body, body[1:]):
        if (isinstance(declared, ast.AnnAssign) and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant) and isinstance(after.value.value, str)):
            docs[declared.target.id] = " ".join(after.value.value.split())
    missing = [f.name for f in dataclasses.fields(LoadOptions) if f.name not in docs]
    if missing:
        raise AssertionError(f"LoadOptions fields without a docstring: {missing}")
    return types.MappingProxyType(docs)


def field_choices(name: str) -> Optional[tuple]:
    """The values a Literal-typed field takes (`gradients`, `lowering`), from its type; None
    for any other field."""
    hint = typing.get_type_hints(LoadOptions)[name]
    return typing.get_args(hint) if typing.get_origin(hint) is Literal else None

