"""Op translations, one module per family. Importing this package registers them all."""

from shlo2jax.ops import (  # noqa: F401  (each family registers its rules when imported)
    check, chlo, collectives, compare, composite, constant, control_flow, convert, convolution,
    custom_calls, custom_calls_catalog, custom_calls_legacy, custom_calls_legacy_fft,
    custom_calls_legacy_gpu, custom_calls_legacy_rnn, custom_calls_legacy_sparse,
    custom_calls_linalg, dynamic, elementwise, indexing, linalg, quantized, random, reduction,
    shape, sharding, side_effects)
