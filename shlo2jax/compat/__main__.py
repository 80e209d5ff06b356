"""`python -m shlo2jax.compat`: the release self-check (`shlo2jax.compat.selfcheck`); exit
status 1 when a compatibility point or a smoke step fails on the installed jax."""

import sys

from shlo2jax.compat.selfcheck import main

sys.exit(main())
