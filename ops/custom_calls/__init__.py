"""`stablehlo.custom_call` targets, one module per family. Importing this package registers
them all.

`generic.py` (random bits, markers, 64-bit splitting, top-k, jax.export's dynamic calls, the
targets reported at load), `linalg.py` (the LAPACK/cuSOLVER/cuBLAS kernels' typed-FFI and
first forms), `legacy*.py` (the forms of older jaxlib releases: `legacy.py` the pre-FFI CPU
LAPACK calls and markers, `legacy_gpu.py`, `legacy_sparse.py`, `legacy_fft.py`,
`legacy_rnn.py` the kernels with packed descriptors, read with `_descriptors.py`) and
`catalog.py` (descriptions, for the table of targets, of targets registered without one).
"""

# (each family registers its rules when imported)
from shlo2jax.ops.custom_calls import (  # noqa: F401
    generic, catalog, legacy, legacy_fft, legacy_gpu, legacy_rnn, legacy_sparse, linalg)
