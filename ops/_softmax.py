"""A softmax's shift by its maximum, found in a region when the translation plans it.

Producers compute softmax(x) over dimensions D as e / sum_D(e), e = exp(x - m), and
log_softmax(x) as s - log(sum_D(exp(s))), s = x - m, where m = max_D(x) keeps exp from
overflowing. The value does not depend on m, and every producer gives the function the
derivative of softmax itself, where m has no part: jax.nn.softmax (a custom_jvp; its
log_softmax a stop_gradient on m), torch's softmax and log_softmax (their own backward
formulas), tf.nn.softmax. The exported program keeps only the arithmetic, and
differentiating it follows m: the reduce_max's derivative (tied maxima share the
cotangent: compares, a count, selects) fed by a sum of the shifted values' cotangents that
is zero up to rounding. Where the shift's result is read by that normalization alone, the
derivative through m is stopped (`normalization_shift`): the producer's gradient, and the
backward pass of searchless chess loses 8 reduce_max derivatives.
"""

from __future__ import annotations

from shlo2jax.ops._common import (constant_elements, ints, op_names, reduce_body_op,
                                  value_type)

__all__ = ["normalization_shift"]


_SPREADING = op_names("broadcast_in_dim", "reshape")
_REDUCE = op_names("reduce")
_MAXIMUM = op_names("maximum")
_ADD = op_names("add")
_EXP = op_names("exponential")
_DIVIDE = op_names("divide")
_SUBTRACT = op_names("subtract")
_LOG = op_names("log")


def normalization_shift(op, producer, translator) -> bool:
    """Whether the subtract `op` (x - b) is the shift of a softmax or log_softmax of x:
    b spreads m = max_D(x) (or the maximum of it and a constant) over D, and the shifted
    values are read only to be normalized over the same D. `producer` is a planned view's
    (translate._Producers): the region's shifts are found once, from the normalizations'
    last ops up, and its `reads` tell that nothing else reads what they read."""
    memo = getattr(producer, "memo", None)
    if memo is None:
        return False
    shifts = memo.get(_SHIFTS)
    if shifts is None:
        shifts = memo[_SHIFTS] = _shifts(producer, translator)
    return op.results[0] in shifts


_SHIFTS = "ops._softmax shifts"


def _shifts(producer, translator) -> frozenset:
    """The result ids of the region's subtracts that are a normalization's shift."""
    found = set()
    for op in producer.region.ops:
        name = op.name
        if name in _DIVIDE:
            match = _softmax
        elif name in _SUBTRACT:
            match = _log_softmax
        else:
            continue
        try:
            shift = match(op, producer, translator)
        except (KeyError, IndexError, TypeError, ValueError, AttributeError):
            continue  # (attributes these checks misread: not a shift, the rules report them)
        if shift is not None:
            found.add(shift)
    return frozenset(found)


def _softmax(divide, producer, translator):
    """The shift's id where `divide` is e / spread_D(sum_D(e)), e = exp(x - spread_D(m)), and
    nothing else reads the shifted values, e (but the sum), the sum or its spreading."""
    e = divide.operands[0]
    exp = producer(e)
    if exp is None or exp.name not in _EXP:
        return None
    shifted, shape = exp.operands[0], _shape(divide)
    found = _shift(shifted, producer, translator, shape)
    if (found is None or producer.reads(shifted) != 1 or producer.reads(e) != 2
            or _summed(divide.operands[1], found[1], shape, producer, translator) != e):
        return None
    return found[0]


def _log_softmax(subtract, producer, translator):
    """The shift's id where `subtract` is s - spread_D(log(sum_D(exp(s)))), s = x -
    spread_D(m) (the log taken before or after spreading), and nothing else reads s (but
    the exp), its exp, the sum, its log or their spreading."""
    shifted = subtract.operands[0]
    shift = producer(shifted)
    if shift is None or shift.name not in _SUBTRACT:
        return None
    shape = _shape(subtract)
    found = _shift(shifted, producer, translator, shape)
    if found is None or producer.reads(shifted) != 2:
        return None
    e = _summed(subtract.operands[1], found[1], shape, producer, translator, _LOG)
    exp = producer(e) if e is not None else None
    if (exp is None or exp.name not in _EXP or exp.operands[0] != shifted
            or producer.reads(e) != 1):
        return None
    return found[0]


def _shift(shifted, producer, translator, shape):
    """(the shift's id, D) where the value `shifted` is x - spread_D(max_D(x)), else None."""
    op = producer(shifted)
    if op is None or op.name not in _SUBTRACT:
        return None
    x, spread = op.operands
    found = _spread_source(spread, producer, shape)
    if found is None:
        return None
    m, dims, _, _ = found
    reduced = _reduction(m, producer, _MAXIMUM, translator, shape)
    if reduced is None:
        maximum = producer(m)
        if maximum is None or maximum.name not in _MAXIMUM:
            return None
        for i in (0, 1):
            if constant_elements(maximum.operands[i], producer, translator) is not None:
                reduced = _reduction(maximum.operands[1 - i], producer, _MAXIMUM, translator,
                                     shape)
                break
    return (shifted, dims) if reduced == (x, dims) else None


def _summed(spread, dims, shape, producer, translator, through=frozenset()):
    """The value e where `spread` is sum_D(e) spread over D (through one op of `through`,
    where given), the sum and every value on the way read once, else None."""
    found = _spread_source(spread, producer, shape, through)
    if found is None:
        return None
    total, spread_dims, links, passed = found
    if spread_dims != dims or passed != bool(through) or producer.reads(total) != 1 or any(
            producer.reads(v) != 1 for v in links):
        return None
    reduced = _reduction(total, producer, _ADD, translator, shape, zero_init=True)
    return reduced[0] if reduced is not None and reduced[1] == dims else None


def _reduction(vid, producer, body_names, translator, shape, zero_init=False):
    """(operand, reduced dims but those of size 1 in `shape`, the operand's) where `vid` is
    a one-operand reduce whose body is one op of `body_names` (with `zero_init`: its init
    a constant 0), else None."""
    op = producer(vid)
    if (op is None or op.name not in _REDUCE or len(op.operands) != 2
            or reduce_body_op(op) not in body_names):
        return None
    if zero_init:
        init = constant_elements(op.operands[1], producer, translator)
        if init is None or init.size != 1 or float(init.reshape(-1)[0]) != 0:
            return None
    return op.operands[0], frozenset(d for d in ints(op.attrs["dimensions"]) if shape[d] != 1)


def _shape(op) -> tuple:
    return tuple(op.result_types[0].shape)


def _spread_source(vid, producer, shape, through=frozenset()):
    """(source, D, the values on the way, how many ops of `through`) where the value `vid`
    of `shape` is `source` spread over the dimensions D through broadcast_in_dim and
    reshapes that add or drop unit dimensions (and elementwise ops of `through`, which
    commute with them): each element is the source's element at its index less D, or that
    op of it. Else None."""
    chain, links, passed, source = [], [], 0, vid
    op = producer(source)
    while op is not None and (op.name in _SPREADING or op.name in through):
        if op.name in _SPREADING:
            chain.append(op)
        else:
            passed += 1
        links.append(source)
        source = op.operands[0]
        op = producer(source)
    if not chain:
        return None
    chain.reverse()
    in_shape = _operand_shape(chain[0], producer)
    if in_shape is None:
        return None
    labels = [None] * len(in_shape)  # per dimension: the source dimension it is, or None
    count = 0
    for d, size in enumerate(in_shape):
        if size != 1:
            labels[d], count = count, count + 1
    for link in chain:
        out_shape = _shape(link)
        if None in out_shape:
            return None
        if link.name.endswith("broadcast_in_dim"):
            mapped = ints(link.attrs["broadcast_dimensions"])
            out = [None] * len(out_shape)
            for k, d in enumerate(mapped):
                if in_shape[k] == out_shape[d]:
                    out[d] = labels[k]
        else:  # reshape: only unit dimensions added or dropped
            kept = [labels[d] for d, size in enumerate(in_shape) if size != 1]
            if [s for s in in_shape if s != 1] != [s for s in out_shape if s != 1]:
                return None
            out, it = [], iter(kept)
            for size in out_shape:
                out.append(next(it) if size != 1 else None)
        labels, in_shape = out, out_shape
    if tuple(in_shape) != tuple(shape):
        return None
    dims = frozenset(d for d, label in enumerate(labels) if label is None and shape[d] != 1)
    kept = [label for d, label in enumerate(labels) if shape[d] != 1 and label is not None]
    return (source, dims, links, passed) if kept == list(range(count)) else None


def _operand_shape(op, producer):
    found = value_type(op.operands[0], producer, getattr(producer, "region", None))
    return None if found is None else tuple(found.shape)
