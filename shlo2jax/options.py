"""How a program is translated: the load options that reach the translation loop."""

from __future__ import annotations

import dataclasses
from typing import Mapping, Optional, Union

GRADIENT_MODES = ("strong_zero", "lax")


@dataclasses.dataclass(frozen=True)
class TranslationOptions:
    """How a program is translated (set at load).

    gradients: "strong_zero" (default): the ops whose local derivative can be infinite
    (multiply, divide, exp, log, sqrt, rsqrt, power, ...) differentiate with strong zeros,
    so a zero cotangent never meets an infinite local derivative as 0 * inf = NaN (see
    `_jax_internals.strong_zero_ops`); "lax": plain lax derivatives.
    max_loop_trips: a bound on the iterations of while loops whose trip count depends on the
    data and that have no provable bound, for reverse-mode differentiation (an int for every
    such loop, or a mapping from a loop's location, as error messages print it, to its bound).
    """
    gradients: str = "strong_zero"
    max_loop_trips: Union[None, int, Mapping[str, int]] = None

    def __post_init__(self):
        if self.gradients not in GRADIENT_MODES:
            raise ValueError(f"gradients must be one of {GRADIENT_MODES}, got {self.gradients!r}")
        trips = self.max_loop_trips
        values = trips.values() if isinstance(trips, Mapping) else [] if trips is None else [trips]
        for n in values:
            if isinstance(n, bool) or not isinstance(n, int) or n < 0:
                raise ValueError(f"max_loop_trips must be a non-negative int (or a mapping from "
                                 f"loop locations to them), got {n!r}")

    def loop_bound(self, location: str) -> Optional[int]:
        trips = self.max_loop_trips
        if isinstance(trips, Mapping):
            return trips.get(location)
        return trips
