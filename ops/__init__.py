"""Op translations, one module per family (the custom-call targets: the `custom_calls`
subpackage, one module per family of targets). Importing this package registers them all."""

from shlo2jax.ops import (  # noqa: F401  (each family registers its rules when imported)
    check, chlo, collectives, comparison, composite, constant, control_flow, convert,
    convolution, custom_calls, dynamic, elementwise, indexing, linalg, quantized, random,
    reduction, shape, sharding, side_effects)
