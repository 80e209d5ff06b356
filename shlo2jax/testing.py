"""`shlo2jax.testing`, the documented name of `shlo2jax.tools.testing` (this module is it)."""

import sys

from shlo2jax.tools import testing as _testing

sys.modules[__name__] = _testing
