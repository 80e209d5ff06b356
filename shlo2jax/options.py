"""`LoadOptions`: how a program is loaded, translated and run, decided once by `load()`.

One frozen object, built and validated by `load()`, owned by the `Program`; handlers read it
as `ctx.options`, and a tool that loads a program again passes the same object
(`load(text, options=program.options)`).
"""

from __future__ import annotations

import dataclasses
from typing import Mapping, Optional, Union

GRADIENT_MODES = ("strong_zero", "lax")
LOWERINGS = ("translate", "direct")
# The trips a data-dependent while loop may take in reverse mode when the loop gives no bound
# of its own (a counter compared with a constant), its derivative is not element-wise, and
# `max_loop_trips` names none: more, and its reverse-mode derivatives are NaN with a warning.
DEFAULT_LOOP_TRIPS = 1000


@dataclasses.dataclass(frozen=True)
class LoadOptions:
    """How a program is loaded (see `shlo2jax.load`).

    placeholder_data: fill `dense_resource<__elided__>` constants with data seeded by `seed`
        instead of refusing to load.
    seed: the seed of placeholder data.
    strict: report every unsupported op or type together at load (`UnsupportedError`);
        False loads what can run and reports the rest when it is reached.
    gradients: "strong_zero" (default): the ops whose local derivative can be infinite
        (multiply, divide, exp, log, sqrt, rsqrt, power, ...) differentiate with strong
        zeros, so a zero cotangent never meets an infinite local derivative as 0 * inf = NaN
        (see `shlo2jax.gradients`); "lax": plain lax derivatives.
    max_loop_trips: how reverse mode goes through while loops whose trip count depends on
        the data. None (default): a loop whose derivative is element-wise (special
        functions' series and continued fractions) is differentiated exactly through
        forward mode; any other runs as a checkpointed loop of at most as many trips as a
        counter in its condition allows, else `DEFAULT_LOOP_TRIPS` (1000); a loop needing
        more has NaN derivatives and warns (`shlo2jax.gradients.LoopBoundWarning`). An int
        (for every such loop) or a mapping from a loop's location, as messages print it, to
        an int: that loop runs as a checkpointed loop of at most that many trips.
    producer_vjp: a `jax.export` artifact serialized with `vjp_order >= 1` carries its
        producer's VJP: reverse mode uses it.
    lowering: "translate" (default), or "direct": where a function allows it, `jit` and
        calls lower it to the module's own ops (see `shlo2jax.executables.direct`).
    """
    placeholder_data: bool = False
    seed: int = 0
    strict: bool = True
    gradients: str = "strong_zero"
    max_loop_trips: Union[None, int, Mapping[str, int]] = None
    producer_vjp: bool = True
    lowering: str = "translate"

    def __post_init__(self):
        for name in ("placeholder_data", "strict", "producer_vjp"):
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
        if isinstance(trips, Mapping):  # frozen: a copy the caller cannot change afterwards
            object.__setattr__(self, "max_loop_trips", dict(trips))

    def __hash__(self):  # (a mapping of loop bounds is not hashable as it is)
        trips = self.max_loop_trips
        trips = tuple(sorted(trips.items())) if isinstance(trips, Mapping) else trips
        return hash((self.placeholder_data, self.seed, self.strict, self.gradients, trips,
                     self.producer_vjp, self.lowering))

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
