"""`shlo2jax.export`, the documented name of `shlo2jax.tools.export` (this module is it)."""

import sys

from shlo2jax.tools import export as _export

sys.modules[__name__] = _export
