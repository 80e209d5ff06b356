"""A function's signature: its types as jax avals, as text, and the check of a call's arguments
against it (values are never converted: a wrong count, shape or dtype is a `TypeError`)."""

from __future__ import annotations

import jax
import numpy as np

from shlo2jax import types as T
from shlo2jax.quant import check_quantized_argument
from shlo2jax.translate import Token


def aval(ttype):
    """A `jax.ShapeDtypeStruct` of a static tensor type; the TensorType itself where a
    dimension is dynamic; other types as they are."""
    if isinstance(ttype, T.TensorType):
        shape = tuple(-1 if d is None else d for d in ttype.shape) if not ttype.is_static \
            else ttype.shape
        return jax.ShapeDtypeStruct(shape, ttype.dtype) if ttype.is_static else ttype
    return ttype


def text(name: str, input_types, output_types) -> str:
    ins = ", ".join(f"%arg{i}: {t}" for i, t in enumerate(input_types))
    outs = ", ".join(str(t) for t in output_types)
    return f"@{name}({ins}) -> ({outs})"


def check_arguments(function, args) -> None:
    """Raises TypeError unless `args` are arrays of `function`'s input types (quantized
    arguments are checked by `shlo2jax.quant`)."""
    if len(args) != len(function.input_types):
        raise TypeError(f"{function.signature} takes {len(function.input_types)} argument(s), "
                        f"got {len(args)}")
    for i, (arg, expected) in enumerate(zip(args, function.input_types)):
        if isinstance(expected, T.TokenType):
            if not isinstance(arg, Token):
                raise TypeError(f"argument %arg{i} of @{function.name} must be a token "
                                f"(shlo2jax.TOKEN), got {type(arg).__name__}")
            continue
        if isinstance(expected, T.TupleType):
            continue
        if expected.quant is not None:
            check_quantized_argument(function, i, arg, expected)
            continue
        shape, dtype = getattr(arg, "shape", None), getattr(arg, "dtype", None)
        if shape is None or dtype is None or isinstance(arg, (bool, int, float, complex)):
            raise TypeError(
                f"argument %arg{i} of @{function.name} must be an array of type {expected}, got "
                f"{type(arg).__name__} (pass a numpy/jax array; values are never converted)")
        if np.dtype(dtype) != expected.dtype:
            raise TypeError(f"argument %arg{i} of @{function.name} has dtype {np.dtype(dtype)}, "
                            f"expected {expected} ({expected.dtype})")
        if len(shape) != len(expected.shape) or any(
                d is not None and d != s for d, s in zip(expected.shape, shape)):
            raise TypeError(f"argument %arg{i} of @{function.name} has shape {tuple(shape)}, "
                            f"expected {expected}")
