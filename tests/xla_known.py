"""XLA's known miscompiles and crashes: wrong values (or a killed process) from XLA itself,
which plain jax shows, in the XLA of some jaxlib releases. Each reproduction runs once, when a
test asks, so the tests that meet one are known failures of exactly the jaxlibs that have it
(docs/guides/jax_versions.md lists them). They belong to the tests, not to the library.
"""

from __future__ import annotations

from typing import Callable

import jax


def _int2_popcnt() -> bool:
    import ml_dtypes
    import numpy as np
    x = np.array([-2, -1, 0, 1], ml_dtypes.int2)
    got = jax.jit(lambda v: jax.lax.population_count(
        jax.lax.bitcast_convert_type(v, ml_dtypes.uint2)))(x)
    return np.asarray(got).astype(int).tolist() != [1, 2, 0, 1]


def _int4_conv_beside_dot() -> bool:
    import ml_dtypes
    import numpy as np
    dt = np.dtype(ml_dtypes.int4)
    lhs = np.array([[[1, 0, -1, 1], [0, 1, 1, -1]]], dt)
    rhs = np.array([[[1, 1], [0, 1]], [[1, -1], [1, 0]]], dt)
    ones = np.ones((2, 3), dt)
    conv, _ = jax.jit(lambda l, r, a, b: (
        jax.lax.conv_general_dilated(l, r, (1,), "VALID", dimension_numbers=("NCH", "OIH", "NCH"),
                                     preferred_element_type=dt),
        jax.lax.dot_general(a, b, (((1,), (0,)), ((), ())), preferred_element_type=dt)))(
            lhs, rhs, ones, ones.T)
    return np.asarray(conv).astype(int).ravel().tolist() != [2, 0, -1, 1, 2, -1]


def _clamped_convert_to_two_bits() -> bool:
    import ml_dtypes
    import numpy as np
    x = np.array([-2.0, -1.0, 0.0, 1.0], np.float32)
    got = jax.jit(lambda v: jax.lax.convert_element_type(
        jax.lax.clamp(np.float32(-2), v, np.float32(1)), ml_dtypes.int2))(x)
    return np.asarray(got).astype(int).tolist() != [-2, -1, 0, 1]


def _uint2_add_chain() -> bool:
    import ml_dtypes
    import numpy as np
    got = jax.jit(lambda v: (v + v) + v)(np.array([1, 2, 3], ml_dtypes.uint2))
    return np.asarray(got).astype(int).tolist() != [3, 2, 1]


XLA_MISCOMPILES: dict[str, tuple[Callable[[], bool], str]] = {
    "uint2 add chain": (_uint2_add_chain, (
        "XLA miscompiles chained 2-bit arithmetic: jax.jit(lambda v: (v + v) + v)"
        "(uint2 [1, 2, 3]) is [3, 0, 0], not [3, 2, 1] (jaxlib 0.7.2)")),
    "clamped convert to 2 bits": (_clamped_convert_to_two_bits, (
        "XLA miscompiles a float clamped then converted to int2/uint2: jax.jit(lambda v: "
        "lax.convert_element_type(lax.clamp(f32(-2), v, f32(1)), int2))([-2., -1., 0., 1.]) "
        "is [-2, 0, 0, 0] (jaxlib 0.7.2)")),
    "int2 popcnt": (_int2_popcnt, (
        "XLA miscompiles popcnt of 2-bit integers: jax.jit(lambda v: lax.population_count("
        "lax.bitcast_convert_type(v, uint2)))(int2 [-2, -1, 0, 1]) is not [1, 2, 0, 1] "
        "(jaxlib 0.7.2)")),
    "narrow convolution beside a dot": (_int4_conv_beside_dot, (
        "XLA miscompiles a convolution of sub-byte types (int2/int4/uint2/uint4/f4E2M1FN) "
        "compiled beside a dot_general: jax.jit(lambda l, r, a, b: (lax.conv_general_dilated"
        "(l, r, (1,), 'VALID', preferred_element_type=int4), lax.dot_general(a, b, ...)))"
        " gives another convolution than jitting it alone (jaxlib 0.6.2, 0.7.2)")),
}
_MISCOMPILE_SEEN: dict[str, bool] = {}


def xla_miscompiles(name: str) -> bool:
    """Whether this jaxlib's XLA shows the known miscompile `name` of `XLA_MISCOMPILES` (its
    reproduction, run once)."""
    if name not in _MISCOMPILE_SEEN:
        _MISCOMPILE_SEEN[name] = bool(XLA_MISCOMPILES[name][0]())
    return _MISCOMPILE_SEEN[name]


def xla_miscompile_reason(name: str) -> str:
    """The reproduction of the known miscompile `name`, for a known failure's reason."""
    return XLA_MISCOMPILES[name][1]


# Reproductions that kill the process (heap corruption inside XLA's CPU runtime), each run in a
# child process once, when a test asks.
XLA_CRASHES: dict[str, tuple[str, str]] = {
    "bytes split into 2-bit lanes": ("""
import jax, ml_dtypes, numpy as np
from jax import lax
import gc
x = np.arange(64, dtype=np.uint8)
for _ in range(10):  # the corruption shows only now and then in one run: repeat it
    lanes = jax.jit(lambda v: lax.convert_element_type(lax.bitwise_and(lax.shift_right_logical(
        v[:, None], np.array([0, 2, 4], np.uint8)[None, :]), np.uint8(3)), ml_dtypes.uint2))(x)
    np.asarray(lanes)
    del lanes
    gc.collect()
""", "XLA corrupts the heap splitting bytes into 2-bit lanes: jax.jit(lambda v: "
        "lax.convert_element_type(lax.bitwise_and(lax.shift_right_logical(v[:, None], "
        "[[0, 2, 4]]), 3), uint2))(np.arange(64, dtype=uint8)) aborts the process "
        "(munmap_chunk/malloc_consolidate: invalid pointer; jaxlib 0.7.2)"),
}
_CRASH_SEEN: dict[str, bool] = {}


def xla_crashes(name: str) -> bool:
    """Whether this jaxlib's XLA kills the process on the reproduction `name` of
    `XLA_CRASHES` (run once, in a child process)."""
    if name not in _CRASH_SEEN:
        import subprocess
        import sys
        done = subprocess.run([sys.executable, "-c", XLA_CRASHES[name][0]],
                              capture_output=True, timeout=300)
        _CRASH_SEEN[name] = done.returncode != 0
    return _CRASH_SEEN[name]
