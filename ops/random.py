"""rng, rng_bit_generator, and jax.export's `stablehlo.dynamic_rng_bit_generator` custom call."""

from __future__ import annotations

from typing import NamedTuple

import jax
import numpy as np
from jax import lax

from shlo2jax import primitives
from shlo2jax import value_types as T
from shlo2jax.ops._common import enum_value
from shlo2jax.registry import Unsupported, register_custom_call, register_op

# `stablehlo.rng` numbers are implementation-defined (spec): they come from
# jax.random seeded with RNG_SEED, folded with the op's position in the module so
# that distinct rng ops draw distinct numbers while a program stays deterministic.
RNG_SEED = 0


class Rng(NamedTuple):
    distribution: str  # UNIFORM or NORMAL
    shape: tuple
    dtype: np.dtype
    index: int         # the op's position in the module: each rng op draws its own numbers


def _prepare_rng(op):
    rtype = op.result_types[0]
    return Rng(enum_value(op.attrs["rng_distribution"]), rtype.shape, rtype.dtype, op.index)


def _sample_dtype(dtype):
    # jax.random draws floats only in the IEEE/bfloat types; narrower floats are
    # drawn in f32 and rounded.
    return dtype if np.dtype(dtype).itemsize >= 2 else np.dtype(np.float32)


@register_op("stablehlo.rng", "mhlo.rng", prepare=_prepare_rng)
def rng(ctx, op, a, b, shape):
    distribution, shape, dtype, index = op.params
    key = jax.random.fold_in(jax.random.key(RNG_SEED), index)
    if distribution == "NORMAL":  # a is the mean, b the standard deviation
        sdt = _sample_dtype(dtype)
        z = jax.random.normal(key, shape, sdt)
        return lax.convert_element_type(
            lax.add(lax.convert_element_type(a, sdt), lax.mul(lax.convert_element_type(b, sdt), z)),
            dtype)
    if T.is_float(dtype):  # uniform on [a, b)
        sdt = _sample_dtype(dtype)
        u = jax.random.uniform(key, shape, sdt, lax.convert_element_type(a, sdt),
                               lax.convert_element_type(b, sdt))
        return lax.convert_element_type(u, dtype)
    # Integers and booleans: uniform on [a, b), drawn in i64 (sub-byte and bool
    # types included) and narrowed, which keeps every value in range.
    lo, hi = lax.convert_element_type(a, np.int64), lax.convert_element_type(b, np.int64)
    return lax.convert_element_type(jax.random.randint(key, shape, lo, hi, np.int64), dtype)


_ALGORITHMS = {"DEFAULT": lax.RandomAlgorithm.RNG_DEFAULT,
               "THREE_FRY": lax.RandomAlgorithm.RNG_THREE_FRY,
               "PHILOX": lax.RandomAlgorithm.RNG_PHILOX}

_UNSIGNED = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


class RngBitGenerator(NamedTuple):
    lax_state: bool      # a state lax.rng_bit_generator takes (else Philox's ui64[3])
    algorithm: str
    shape: tuple
    bits_dtype: np.dtype  # the unsigned type drawn
    dtype: np.dtype       # the result type its bits are reinterpreted as


def _lax_state(algorithm: str, state_type) -> bool:
    """Whether lax.rng_bit_generator takes the state (else it is a ui64[3] that our own
    primitive passes to XLA). The spec: a 1-dimensional ui64 state of 2 words for
    THREE_FRY, 2 or 3 for PHILOX, an implementation-defined size for DEFAULT: XLA's DEFAULT
    is Philox on CPU and GPU, and takes 2 or 3 words. XLA's u32[4] is taken too."""
    if (state_type.dtype == np.uint64 and state_type.shape == (2,)) or (
            state_type.dtype == np.uint32 and state_type.shape == (4,)):
        return True
    if algorithm in ("PHILOX", "DEFAULT") and state_type.dtype == np.uint64 \
            and state_type.shape == (3,):
        return False
    raise Unsupported(
        f"rng_bit_generator {algorithm} with state {state_type.element}"
        f"{list(state_type.shape)}: the spec takes a 1-dimensional ui64 state, of 2 words for "
        "THREE_FRY, 2 or 3 for PHILOX, and for DEFAULT (XLA's Philox) 2 or 3")


def _bits_dtype(out_type) -> np.dtype:
    # XLA fills any element type with raw bits: draw the unsigned type of the same width
    # and reinterpret it.
    width = T.bit_width(out_type.dtype)
    if width not in (8, 16, 32, 64):
        raise Unsupported(f"rng_bit_generator producing {out_type.element}")
    return np.dtype(_UNSIGNED[width // 8])


def _prepare_rng_bit_generator(op):
    state_type, out_type = op.result_types
    algorithm = enum_value(op.attrs["rng_algorithm"])
    bits_dtype = _bits_dtype(out_type)
    return RngBitGenerator(_lax_state(algorithm, state_type), algorithm, out_type.shape,
                           bits_dtype, out_type.dtype)


def _draw(state, p: RngBitGenerator, shape):
    if p.lax_state:
        new_state, bits = lax.rng_bit_generator(state, shape, p.bits_dtype,
                                                _ALGORITHMS[p.algorithm])
    else:  # a ui64[3] Philox state, which lax does not take
        new_state, bits = primitives.rng_bit_generator_primitive().bind(
            state, shape=tuple(shape), dtype=p.bits_dtype, algorithm=p.algorithm)
    if p.dtype != p.bits_dtype:
        bits = lax.bitcast_convert_type(bits, p.dtype)
    return new_state, bits


@register_op("stablehlo.rng_bit_generator", "mhlo.rng_bit_generator",
             prepare=_prepare_rng_bit_generator)
def rng_bit_generator(ctx, op, state):
    return _draw(state, op.params, op.params.shape)


def _prepare_dynamic_rng_bit_generator(op):
    state_type, out_type = op.result_types
    algorithm = enum_value(op.attrs.get("rng_algorithm", "DEFAULT"))
    return RngBitGenerator(_lax_state(algorithm, state_type), algorithm, None,
                           _bits_dtype(out_type), out_type.dtype)


@register_custom_call("stablehlo.dynamic_rng_bit_generator",
                      prepare=_prepare_dynamic_rng_bit_generator)
def dynamic_rng_bit_generator(ctx, op, state, shape):
    # The output shape is an operand; after shape refinement it is a constant.
    if isinstance(shape, jax.core.Tracer):
        raise ValueError("the output shape is computed from traced values: it must be known "
                         "while tracing")
    return _draw(state, op.params, tuple(int(v) for v in np.asarray(shape).reshape(-1)))
