"""A function's signature: its types as jax avals, as text, and the check of a call's arguments
against it (values are never converted: a wrong count, shape or dtype is a `TypeError`)."""

from __future__ import annotations

from html import escape

import jax
import numpy as np

from shlo2jax import value_types as T
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


def type_text(t, mlir: bool = False) -> str:
    """One argument's or result's type as signatures write it: `f32[8,16]` (the MLIR
    element type, then the dimensions: `?` where dynamic, a symbol such as `b` for a
    shape-polymorphic `jax.export`), tokens and tuples in their MLIR spelling. `mlir=True`:
    the MLIR type, `tensor<8x16xf32>` (a symbolic dimension is `?` there).

    `t`: a TensorType, TokenType or TupleType, or an aval (`jax.ShapeDtypeStruct`)."""
    if isinstance(t, T.TensorType):
        if mlir:
            return str(t)
        return f"{t.element}[{','.join('?' if d is None else str(d) for d in t.shape)}]"
    if isinstance(t, T.TupleType):
        return "tuple<" + ", ".join(type_text(e, mlir) for e in t.elements) + ">"
    shape, dtype = getattr(t, "shape", None), getattr(t, "dtype", None)
    if shape is None or dtype is None:
        return str(t)
    try:
        element = T.dtype_name(dtype)
    except (KeyError, TypeError):  # float0, the cotangent type of integer arguments
        element = str(dtype)
    if mlir:
        return "tensor<" + "".join(f"{d if isinstance(d, int) else '?'}x" for d in shape) + \
            f"{element}>"
    return f"{element}[{','.join(str(d) for d in shape)}]"


def text(name: str, input_types, output_types, arg_names=None, mlir_types: bool = False) -> str:
    """`@name(w1: f32[8,16], x: f32[2,8]) -> (f32[2,4])`: each argument by its name (the
    function's `arg_names`; `arg_<i>` where none is given) and type (`type_text`)."""
    arg_names = arg_names or [f"arg_{i}" for i in range(len(input_types))]
    ins = ", ".join(f"{n}: {type_text(t, mlir_types)}" for n, t in zip(arg_names, input_types))
    outs = ", ".join(type_text(t, mlir_types) for t in output_types)
    return f"@{name}({ins}) -> ({outs})"


def html(name: str, arg_names, argument_types, result_names, result_types, note: str = "") -> str:
    """A function's signature as an HTML table (a notebook's rich display): each argument's and
    result's name and type, then `note` (where the function came from, how it runs)."""
    def rows(kind, names, types):
        return "".join(f"<tr><td>{kind}</td><td><code>{escape(str(n))}</code></td>"
                       f"<td><code>{escape(type_text(t))}</code></td></tr>"
                       for n, t in zip(names, types))
    return (f"<div><b>@{escape(name)}</b>{' &mdash; ' + escape(note) if note else ''}"
            "<table><tr><th></th><th>name</th><th>type</th></tr>"
            f"{rows('argument', arg_names, argument_types)}"
            f"{rows('result', result_names, result_types)}</table></div>")


def check_types(args, types, names, function: str, signature: str) -> None:
    """Raises TypeError unless `args` are arrays of `types` (quantized arguments are checked by
    `shlo2jax.quant`); errors name the arguments by `names`, the function by `function`."""
    if len(args) != len(types):
        raise TypeError(f"{signature} takes {len(types)} argument(s), got {len(args)}")
    for i, (arg, expected) in enumerate(zip(args, types)):
        if isinstance(expected, T.TokenType):
            if not isinstance(arg, Token):
                raise TypeError(f"argument {names[i]} of @{function} must be a token "
                                f"(shlo2jax.TOKEN), got {type(arg).__name__}")
            continue
        if isinstance(expected, T.TupleType):
            continue
        if expected.quant is not None:
            check_quantized_argument(f"argument {names[i]} of @{function}", arg, expected)
            continue
        shape, dtype = getattr(arg, "shape", None), getattr(arg, "dtype", None)
        # (numpy's float64 and complex128 scalars are Python floats and complexes too: arrays)
        if shape is None or dtype is None or (isinstance(arg, (bool, int, float, complex))
                                              and not isinstance(arg, np.generic)):
            raise TypeError(
                f"argument {names[i]} of @{function} must be an array of type "
                f"{type_text(expected)}, got "
                f"{type(arg).__name__} (pass a numpy/jax array; values are never converted)")
        if np.dtype(dtype) != expected.dtype:
            raise TypeError(f"argument {names[i]} of @{function} has dtype "
                            f"{np.dtype(dtype)}, expected {type_text(expected)} ({expected.dtype})")
        if len(shape) != len(expected.shape) or any(
                d is not None and d != s for d, s in zip(expected.shape, shape)):
            raise TypeError(f"argument {names[i]} of @{function} has shape {tuple(shape)}, "
                            f"expected {type_text(expected)}")
