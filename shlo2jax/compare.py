"""`shlo2jax.compare`, the documented name of the backend comparison: this module is
`shlo2jax.tools.compare` itself, which is callable as its `compare` function."""

import sys

from shlo2jax.tools import compare as _compare

sys.modules[__name__] = _compare
