"""convolution and dynamic_conv -> lax.conv_general_dilated."""

from __future__ import annotations

import re
from typing import NamedTuple, Optional

import numpy as np
from jax import lax

from shlo2jax.attributes import ConvDims
from shlo2jax.ops._common import (ints, known_value, precision_config, preferred_type,
                                  result_shape, widen_two_bit)
from shlo2jax.registry import Unsupported, register_op


def _ints(value, default) -> tuple:
    return default if value is None else ints(value)


_RAW_FIELD_RE = re.compile(r"(\w+)\s*=\s*(\[[^\]]*\]|-?\d+)")


def _layout(spec: str, batch: str, feature: str):
    """`[b, 0, 1, f]` -> (batch dim, feature dim, spatial dims in spatial order)."""
    labels = [s.strip() for s in spec.strip()[1:-1].split(",")]
    spatial = sorted((int(s), i) for i, s in enumerate(labels) if s.isdigit())
    return labels.index(batch), labels.index(feature), tuple(i for _, i in spatial)


def _conv_dims(dims) -> ConvDims:
    """ConvDims, or the mhlo spelling (`#mhlo.conv<[b, 0, f]x[0, i, o]->[b, 0, f]>`
    or `#mhlo.conv<raw input_batch_dimension = 0, ...>`) parsed from its text."""
    if isinstance(dims, ConvDims):
        return dims
    body = dims.text[dims.text.index("<") + 1:dims.text.rindex(">")].strip()
    if body.startswith("raw"):
        fields = {}
        for name, value in _RAW_FIELD_RE.findall(body):
            fields[name] = (tuple(int(v) for v in value[1:-1].split(",") if v.strip())
                            if value.startswith("[") else int(value))
        return ConvDims(*(fields[name] for name in ConvDims._fields))
    lhs, rest = body.split("x", 1)
    rhs, out = rest.split("->")
    return ConvDims(*_layout(lhs, "b", "f"), *_layout(rhs, "i", "o"), *_layout(out, "b", "f"))


class Convolution(NamedTuple):
    strides: tuple
    padding: tuple                # (low, high) per spatial dimension
    lhs_dilation: tuple
    rhs_dilation: tuple
    dimension_numbers: lax.ConvDimensionNumbers
    reverse: tuple                # the kernel's spatial dimensions window_reversal flips
    feature_group_count: int
    batch_group_count: int
    precision: Optional[tuple]
    result: np.dtype


def _prepare(op):
    a = op.attrs
    dims = _conv_dims(a["dimension_numbers"])
    n = len(dims.input_spatial_dimensions)
    ones = (1,) * n
    padding = np.zeros((n, 2), np.int64) if a.get("padding") is None \
        else np.asarray(a["padding"]).reshape(n, 2)
    reversal = np.asarray(a.get("window_reversal", (False,) * n)).reshape(-1)
    if op.result_types[0].quant is not None:
        raise Unsupported("quantized convolution")
    return Convolution(
        strides=_ints(a.get("window_strides"), ones),
        padding=tuple((int(lo), int(hi)) for lo, hi in padding),
        lhs_dilation=_ints(a.get("lhs_dilation"), ones),
        rhs_dilation=_ints(a.get("rhs_dilation"), ones),
        dimension_numbers=lax.ConvDimensionNumbers(
            (dims.input_batch_dimension, dims.input_feature_dimension)
            + dims.input_spatial_dimensions,
            (dims.kernel_output_feature_dimension, dims.kernel_input_feature_dimension)
            + dims.kernel_spatial_dimensions,
            (dims.output_batch_dimension, dims.output_feature_dimension)
            + dims.output_spatial_dimensions),
        # window_reversal flips the kernel along those spatial dimensions.
        reverse=tuple(d for d, r in zip(dims.kernel_spatial_dimensions, reversal) if r),
        feature_group_count=int(a.get("feature_group_count", 1)),
        batch_group_count=int(a.get("batch_group_count", 1)),
        precision=precision_config(op),
        result=op.result_types[0].dtype)


@register_op("stablehlo.convolution", "mhlo.convolution", prepare=_prepare)
def convolution(ctx, op, lhs, rhs):
    return _convolve(lhs, rhs, op.params)


def _prepare_dynamic_conv(op):
    # `prepare` accepts `?` result types: the unrefined module is decoded too (ops/dynamic.py).
    try:
        return _prepare(op)
    except (TypeError, ValueError) as e:
        raise Unsupported(f"cannot read convolution attributes: {e}") from None


@register_op("stablehlo.dynamic_conv", "mhlo.dynamic_conv", prepare=_prepare_dynamic_conv)
def dynamic_conv(ctx, op, lhs, rhs, padding):
    known = known_value(padding)
    if known is None:
        raise ValueError("padding computed from traced values: dynamic_conv needs it known "
                         "while tracing")
    params = op.params._replace(padding=tuple((int(lo), int(hi)) for lo, hi in
                                              np.asarray(known).reshape(-1, 2)))
    out = _convolve(lhs, rhs, params)
    if out.shape != result_shape(op):
        raise ValueError(f"padding {params.padding} gives shape {out.shape}, but the result "
                         f"type is {op.result_types[0]}")
    return out


def _convolve(lhs, rhs, p):
    if p.reverse:
        rhs = lax.rev(rhs, p.reverse)
    result = p.result
    lhs, rhs = widen_two_bit(lhs), widen_two_bit(rhs)
    out = lax.conv_general_dilated(
        lhs, rhs, p.strides, p.padding, p.lhs_dilation, p.rhs_dilation,
        p.dimension_numbers, p.feature_group_count, p.batch_group_count,
        precision=p.precision, preferred_element_type=preferred_type(result, lhs, rhs))
    if out.dtype != result:
        out = lax.convert_element_type(out, result)
    return out
