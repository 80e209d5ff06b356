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

from shlo2jax.ops._common import constant_elements, ints

__all__ = ["normalization_shift"]


def _names(*names):
    return frozenset(f"{d}.{n}" for d in ("stablehlo", "mhlo") for n in names)


_SPREADING = _names("broadcast_in_dim", "reshape")
_REDUCE = _names("reduce")
_MAXIMUM = _names("maximum")
_ADD = _names("add")
_EXP = _names("exponential")
_DIVIDE = _names("divide")
_SUBTRACT = _names("subtract")
_LOG = _names("log")


def normalization_shift(op, producer, translator) -> bool:
    """Whether the subtract `op` (x - b) is the shift of a softmax or log_softmax of x:
    b spreads m = max_D(x) (or the maximum of it and a constant) over D, and what reads
    the shifted values reads them only to normalize them over the same D. `producer` is
    a planned view's (translate._Producers), whose `readers` this reads."""
    readers = getattr(producer, "readers", None)
    if readers is None:
        return False
    x, spread = op.operands
    shape = _shape(op)
    found = _spread_source(spread, producer, shape)
    if found is None:
        return False
    m, dims = found
    reduced = _reduction(m, producer, _MAXIMUM, translator, shape)
    if reduced is None:
        maximum = producer(m)
        if maximum is None or maximum.name not in _MAXIMUM:
            return False
        for i in (0, 1):
            if constant_elements(maximum.operands[i], producer, translator) is not None:
                reduced = _reduction(maximum.operands[1 - i], producer, _MAXIMUM, translator,
                                     shape)
                break
    if reduced is None or reduced != (x, dims):
        return False
    return _normalized(op.results[0], dims, shape, producer, readers, translator)


def _normalized(shifted, dims, shape, producer, readers, translator) -> bool:
    """Whether the shifted values `shifted` are read only by exp(shifted) / sum_D(...)
    (softmax) or shifted - log(sum_D(exp(shifted))) (log_softmax)."""
    users = readers(shifted)
    exps = [u for u, _ in users if u is not None and u.name in _EXP]
    if len(exps) != 1:
        return False
    exp = exps[0]
    others = [(u, i) for u, i in users if u is not exp]
    exp_users = readers(exp.results[0])
    sums = [u for u, i in exp_users if u is not None and u.name in _REDUCE and i == 0]
    if len(sums) != 1:
        return False
    total = sums[0]
    if _reduction(total.results[0], producer, _ADD, translator, shape,
                  zero_init=True) != (
            exp.results[0], dims):
        return False
    if not others:  # softmax: exp / spread(sum)
        divides = [u for u, i in exp_users if u is not total]
        return (len(exp_users) == 2 and len(divides) == 1 and divides[0].name in _DIVIDE
                and divides[0].operands[0] == exp.results[0]
                and _spread_only_to(total.results[0], divides[0], dims, shape, producer,
                                    readers))
    # log_softmax: shifted - spread(log(sum)), the log taken before or after spreading
    if len(exp_users) != 1 or len(others) != 1:
        return False
    (subtract, index), = others
    if subtract is None or subtract.name not in _SUBTRACT or index != 0:
        return False
    return _spread_only_to(total.results[0], subtract, dims, shape, producer, readers,
                           through=_LOG)


def _spread_only_to(source, consumer, dims, shape, producer, readers, through=frozenset()):
    """Whether `source` is read only through one chain of spreading ops (and one op of
    `through`, where given), whose end only `consumer` reads, as its operand 1 (and not
    its operand 0), and spreads `source` over `dims` of `shape`."""
    value, passed = source, 0
    while True:
        users = readers(value)
        if len(users) != 1 or users[0][0] is None:
            return False
        user, i = users[0]
        if user is consumer:
            return (i == 1 and consumer.operands[0] != value and passed == bool(through)
                    and _spread_source(value, producer, shape, through) == (source, dims))
        if user.name in through:
            passed += 1
        elif user.name not in _SPREADING:
            return False
        value = user.results[0]


def _reduction(vid, producer, body_names, translator, shape, zero_init=False):
    """(operand, reduced dims but those of size 1 in `shape`, the operand's) where `vid` is
    a one-operand reduce whose body is one op of `body_names` (with `zero_init`: its init
    a constant 0), else None."""
    op = producer(vid)
    if op is None or op.name not in _REDUCE or len(op.operands) != 2:
        return None
    (body,) = op.regions
    if len(body.ops) != 1 or len(body.args) != 2:
        return None
    (inner,) = body.ops
    if (inner.name not in body_names or set(inner.operands) != set(body.args)
            or tuple(body.outputs) != tuple(inner.results)):
        return None
    if zero_init:
        init = constant_elements(op.operands[1], producer, translator)
        if init is None or init.size != 1 or float(init.reshape(-1)[0]) != 0:
            return None
    return op.operands[0], frozenset(d for d in ints(op.attrs["dimensions"]) if shape[d] != 1)


def _shape(op) -> tuple:
    return tuple(op.result_types[0].shape)


def _spread_source(vid, producer, shape, through=frozenset()):
    """(source, D) where the value `vid` of `shape` is `source` spread over the dimensions
    D through broadcast_in_dim and reshapes that add or drop unit dimensions (and
    elementwise ops of `through`, which commute with them): each element is the source's
    element at its index less D, or that op of it. Else None."""
    chain, source = [], vid
    op = producer(source)
    while op is not None and (op.name in _SPREADING or op.name in through):
        if op.name in _SPREADING:
            chain.append(op)
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
    return (source, dims) if kept == list(range(count)) else None


def _operand_shape(op, producer):
    source = producer(op.operands[0])
    if source is not None:
        return tuple(source.result_types[0].shape)
    region = getattr(producer, "region", None)
    if region is not None and op.operands[0] in region.args:
        return tuple(region.arg_types[region.args.index(op.operands[0])].shape)
    return None
