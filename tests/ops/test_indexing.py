"""dynamic_slice, dynamic_update_slice, gather, scatter, torch_index_select,
real_dynamic_slice, dynamic_gather: against loop-by-loop numpy readings of the spec."""

import itertools

import ml_dtypes
import numpy as np
import pytest

import shlo2jax
import shlo2jax.ops  # noqa: F401  (registers the built-in rules _needs looks up)
from shlo2jax import registry
from shlo2jax import value_types as T

from _helpers import nested_primitives, staged_jaxpr, tensor


def _element(dtype):
    return T.dtype_name(dtype)


def _run(body, args):
    types = [tensor(a.shape, _element(a.dtype)) for a in args]
    params = ", ".join(f"%a{i}: {t}" for i, t in enumerate(types))
    result_types = body.strip().splitlines()[-1].split(":", 1)[1].strip()
    text = f"func.func @main({params}) -> ({result_types}) {{\n{body}\n}}"
    return shlo2jax.load(text)(*args)


def _needs(*names):
    missing = [n for n in names if registry.lookup(n) is None]
    if missing:
        pytest.skip(f"needs {', '.join(missing)} (another op family)")


def _same(actual, expected):
    actual = np.asarray(actual)
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    np.testing.assert_array_equal(actual, expected)


def _data(dtype, shape, start=1):
    n = int(np.prod(shape, dtype=np.int64))
    values = np.arange(start, start + n)
    if np.dtype(dtype) == np.bool_:
        return (values % 3 == 0).reshape(shape)
    if T.is_complex(dtype):
        return (values + 1j * values[::-1]).astype(dtype).reshape(shape)
    return (values % 100).astype(dtype).reshape(shape)


# ---------------------------------------------------------------- numpy readings of the spec

def _start_index(indices, scatter_index, index_vector_dim):
    if index_vector_dim < indices.ndim:
        where = list(scatter_index)
        where.insert(index_vector_dim, slice(None))
        return [int(v) for v in indices[tuple(where)]]
    return [int(indices[tuple(scatter_index)])]


def ref_gather(operand, indices, offset_dims, collapsed, start_index_map, index_vector_dim,
               slice_sizes, out_shape, operand_batching=(), indices_batching=()):
    out = np.zeros(out_shape, operand.dtype)
    batch_dims = [d for d in range(len(out_shape)) if d not in offset_dims]
    for result_index in itertools.product(*map(range, out_shape)):
        batch_index = [result_index[d] for d in batch_dims]
        start = _start_index(indices, batch_index, index_vector_dim)
        full = [0] * operand.ndim
        for d_start, d_operand in enumerate(start_index_map):
            bound = operand.shape[d_operand] - slice_sizes[d_operand]
            full[d_operand] = min(max(start[d_start], 0), bound)
        for d_operand, d_start in zip(operand_batching, indices_batching):
            full[d_operand] += batch_index[d_start - (d_start >= index_vector_dim)]
        offsets = iter(result_index[d] for d in offset_dims)
        for d in range(operand.ndim):
            if d not in collapsed and d not in operand_batching:
                full[d] += next(offsets)
        out[result_index] = operand[tuple(full)]
    return out


def ref_scatter(inputs, indices, updates, update_window_dims, inserted, sdod, index_vector_dim,
                combine, input_batching=(), indices_batching=()):
    results = [np.array(x) for x in inputs]
    scatter_dims = [d for d in range(updates[0].ndim) if d not in update_window_dims]
    for update_index in itertools.product(*map(range, updates[0].shape)):
        scatter_index = [update_index[d] for d in scatter_dims]
        start = _start_index(indices, scatter_index, index_vector_dim)
        full = [0] * results[0].ndim
        for d_start, d_input in enumerate(sdod):
            full[d_input] = start[d_start]
        for d_input, d_start in zip(input_batching, indices_batching):
            full[d_input] += scatter_index[d_start - (d_start >= index_vector_dim)]
        window = iter(update_index[d] for d in update_window_dims)
        for d in range(results[0].ndim):
            if d not in inserted and d not in input_batching:
                full[d] += next(window)
        if all(0 <= i < n for i, n in zip(full, results[0].shape)):
            full = tuple(full)
            new = combine(*[r[full] for r in results], *[u[update_index] for u in updates])
            for r, v in zip(results, new):
                r[full] = v
    return results


# ---------------------------------------------------------------- dynamic_slice / update

INDEX_TYPES = [np.int8, np.uint8, np.int32, np.int64, np.uint32, np.uint64]


@pytest.mark.parametrize("index_type", INDEX_TYPES)
@pytest.mark.parametrize("starts", [(0, 0), (1, 2), (-5, 9), (2, -1), (100, 100)])
def test_dynamic_slice_clamps(index_type, starts):
    info = np.iinfo(index_type)
    starts = [min(max(s, int(info.min)), int(info.max)) for s in starts]
    x = _data(np.float32, (3, 5))
    a, b = (np.array(s, index_type) for s in starts)
    t = _element(index_type)
    body = (f"  %r = stablehlo.dynamic_slice %a0, %a1, %a2, sizes = [2, 3] : "
            f"(tensor<3x5xf32>, tensor<{t}>, tensor<{t}>) -> tensor<2x3xf32>\n"
            f"  return %r : tensor<2x3xf32>")
    i, j = min(max(starts[0], 0), 1), min(max(starts[1], 0), 2)
    _same(_run(body, [x, a, b]), x[i:i + 2, j:j + 3])


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint64, np.float16, np.float64,
                                   np.complex64])
def test_dynamic_slice_element_types(dtype):
    x = _data(dtype, (4,))
    e = _element(dtype)
    body = (f"  %r = stablehlo.dynamic_slice %a0, %a1, sizes = [2] : "
            f"(tensor<4x{e}>, tensor<i32>) -> tensor<2x{e}>\n  return %r : tensor<2x{e}>")
    _same(_run(body, [x, np.array(1, np.int32)]), x[1:3])


@pytest.mark.parametrize("index_type", INDEX_TYPES)
@pytest.mark.parametrize("starts", [(0, 0), (1, 3), (-2, 4), (7, -7)])
def test_dynamic_update_slice_clamps(index_type, starts):
    info = np.iinfo(index_type)
    starts = [min(max(s, int(info.min)), int(info.max)) for s in starts]
    x, u = _data(np.int32, (3, 5)), -_data(np.int32, (2, 3))
    a, b = (np.array(s, index_type) for s in starts)
    t = _element(index_type)
    body = (f"  %r = stablehlo.dynamic_update_slice %a0, %a1, %a2, %a3 : (tensor<3x5xi32>, "
            f"tensor<2x3xi32>, tensor<{t}>, tensor<{t}>) -> tensor<3x5xi32>\n"
            f"  return %r : tensor<3x5xi32>")
    i, j = min(max(starts[0], 0), 1), min(max(starts[1], 0), 2)
    expected = x.copy()
    expected[i:i + 2, j:j + 3] = u
    _same(_run(body, [x, u, a, b]), expected)


@pytest.mark.parametrize("index_type", INDEX_TYPES)
@pytest.mark.parametrize("starts", [(0, 0), (1, 3), (-2, 4), (7, -7)])
def test_constant_starts_clamp_without_equations(index_type, starts):
    """Constant starts (an exporter's `t[k]`: the counter and constant zeros) are clamped
    at trace time, as the spec clamps them: the same values, and no clamp in the trace."""
    info = np.iinfo(index_type)
    starts = [min(max(s, int(info.min)), int(info.max)) for s in starts]
    x, u = _data(np.int32, (3, 5)), -_data(np.int32, (2, 3))
    t = _element(index_type)
    text = f"""func.func @main(%x: tensor<3x5xi32>, %u: tensor<2x3xi32>)
    -> (tensor<2x3xi32>, tensor<3x5xi32>) {{
  %i = stablehlo.constant dense<{starts[0]}> : tensor<{t}>
  %j = stablehlo.constant dense<{starts[1]}> : tensor<{t}>
  %s = stablehlo.dynamic_slice %x, %i, %j, sizes = [2, 3] : (tensor<3x5xi32>, tensor<{t}>,
    tensor<{t}>) -> tensor<2x3xi32>
  %d = stablehlo.dynamic_update_slice %x, %u, %i, %j : (tensor<3x5xi32>, tensor<2x3xi32>,
    tensor<{t}>, tensor<{t}>) -> tensor<3x5xi32>
  return %s, %d : tensor<2x3xi32>, tensor<3x5xi32>
}}"""
    program = shlo2jax.load(text)
    i, j = min(max(starts[0], 0), 1), min(max(starts[1], 0), 2)
    expected = x.copy()
    expected[i:i + 2, j:j + 3] = u
    sliced, updated = program(x, u)
    _same(sliced, x[i:i + 2, j:j + 3])
    _same(updated, expected)
    primitives = {e.primitive.name for e in staged_jaxpr(program, x, u).eqns}
    assert "dynamic_slice" in primitives and "clamp" not in primitives, primitives


@pytest.mark.parametrize("start, stop", [(0, 6), (2, 5)])
def test_a_loop_index_in_range_slices_without_a_clamp(start, stop):
    """`w[i]` in a fori_loop (a stack's layer weights): the index is within [0, 5] by the
    loop's bounds (ops._ranges), so its dynamic slice needs no clamp; the same values."""
    import jax
    from jax import export, lax

    def fori(w, x):
        return lax.fori_loop(start, stop, lambda i, c: c + w[i], x)
    exported = export.export(jax.jit(fori))(jax.ShapeDtypeStruct((6, 3), np.float32),
                                            jax.ShapeDtypeStruct((3,), np.float32))
    program = shlo2jax.load(exported.serialize())
    w, x = _data(np.float32, (6, 3)), _data(np.float32, (3,))
    np.testing.assert_allclose(program(w, x), x + w[start:stop].sum(0), rtol=1e-6)
    primitives = set(nested_primitives(staged_jaxpr(program, w, x)))
    assert "dynamic_slice" in primitives and "clamp" not in primitives, primitives


@pytest.mark.parametrize("dtype", [np.bool_, np.uint16, np.float32, np.complex128])
def test_dynamic_update_slice_element_types(dtype):
    x, u = _data(dtype, (4,)), _data(dtype, (2,), start=50)
    e = _element(dtype)
    body = (f"  %r = stablehlo.dynamic_update_slice %a0, %a1, %a2 : (tensor<4x{e}>, "
            f"tensor<2x{e}>, tensor<i64>) -> tensor<4x{e}>\n  return %r : tensor<4x{e}>")
    expected = x.copy()
    expected[2:4] = u
    _same(_run(body, [x, u, np.array(3, np.int64)]), expected)


def test_real_dynamic_slice_constant_bounds():
    x = _data(np.int32, (6, 5))
    body = """
  %s = stablehlo.constant dense<[1, 0]> : tensor<2xi64>
  %l = stablehlo.constant dense<[5, 5]> : tensor<2xi64>
  %t = stablehlo.constant dense<[2, 3]> : tensor<2xi64>
  %r = stablehlo.real_dynamic_slice %a0, %s, %l, %t : (tensor<6x5xi32>, tensor<2xi64>, tensor<2xi64>, tensor<2xi64>) -> tensor<2x2xi32>
  return %r : tensor<2x2xi32>"""
    _same(_run(body, [x]), x[1:5:2, 0:5:3])


# ---------------------------------------------------------------- gather

def _gather_text(operand, indices, out_shape, offset_dims, collapsed, start_index_map, ivd,
                 slice_sizes, operand_batching=(), indices_batching=(), dialect="stablehlo"):
    tin = tensor(operand.shape, _element(operand.dtype))
    tidx = tensor(indices.shape, _element(indices.dtype))
    tout = tensor(out_shape, _element(operand.dtype))
    if dialect == "stablehlo":
        dims = (f"#stablehlo.gather<offset_dims = {list(offset_dims)}, collapsed_slice_dims = "
                f"{list(collapsed)}, operand_batching_dims = {list(operand_batching)}, "
                f"start_indices_batching_dims = {list(indices_batching)}, start_index_map = "
                f"{list(start_index_map)}, index_vector_dim = {ivd}>")
        sizes = f"array<i64: {', '.join(map(str, slice_sizes))}>"
    else:
        dims = (f"#mhlo.gather<offset_dims = {list(offset_dims)}, collapsed_slice_dims = "
                f"{list(collapsed)}, start_index_map = {list(start_index_map)}, "
                f"index_vector_dim = {ivd}>")
        sizes = f"dense<{list(slice_sizes)}> : tensor<{len(slice_sizes)}xi64>"
    return (f'  %r = "{dialect}.gather"(%a0, %a1) <{{dimension_numbers = {dims}, slice_sizes = '
            f'{sizes}, indices_are_sorted = false}}> : ({tin}, {tidx}) -> {tout}\n'
            f'  return %r : {tout}')


GATHER_CASES = {
    # name: operand shape, indices, out shape, offset, collapsed, start_index_map, ivd,
    #       slice sizes, operand batching, indices batching
    "take_rows_out_of_range": ((5, 3), [[0], [4], [-2], [9]], (4, 3), (1,), (0,), (0,), 1,
                               (1, 3), (), ()),
    "implicit_index_vector": ((5, 3), [[1, 7], [-1, 3]], (2, 2, 2), (2,), (0,), (0,), 2,
                              (1, 2), (), ()),
    "index_vector_first_2d_windows": ((3, 4), [[0, 5, -3, 1], [3, -1, 2, 100]], (4, 2, 2),
                                      (1, 2), (), (1, 0), 0, (2, 2), (), ()),
    "batching_dims_index_vector_middle": ((2, 4, 3), [[[0, 3]], [[-1, 2]]], (2, 2, 2), (2,),
                                          (1,), (1,), 1, (1, 1, 2), (0,), (2,)),
}


@pytest.mark.parametrize("case", list(GATHER_CASES))
@pytest.mark.parametrize("index_type", [np.int8, np.int32, np.int64, np.uint32])
def test_gather_cases(case, index_type):
    shape, idx, out_shape, offset, collapsed, sim, ivd, sizes, ob, ib = GATHER_CASES[case]
    idx = np.array(idx)
    if np.dtype(index_type).kind == "u":
        idx = np.where(idx < 0, 200, idx)  # unsigned: large instead of negative
    indices = idx.astype(index_type)
    operand = _data(np.int32, shape)
    text = _gather_text(operand, indices, out_shape, offset, collapsed, sim, ivd, sizes, ob, ib)
    expected = ref_gather(operand, indices, offset, collapsed, sim, ivd, sizes, out_shape, ob, ib)
    _same(_run(text, [operand, indices]), expected)


@pytest.mark.parametrize("dtype", [np.bool_, np.uint8, np.int64, np.float16, np.float32,
                                   np.complex64])
def test_gather_element_types(dtype):
    operand, indices = _data(dtype, (4, 2)), np.array([[3], [0], [3]], np.int32)
    text = _gather_text(operand, indices, (3, 2), (1,), (0,), (0,), 1, (1, 2))
    _same(_run(text, [operand, indices]), operand[[3, 0, 3]])


def test_gather_mhlo_form():
    operand, indices = _data(np.float32, (4, 2)), np.array([[2], [-1]], np.int64)
    text = _gather_text(operand, indices, (2, 2), (1,), (0,), (0,), 1, (1, 2), dialect="mhlo")
    _same(_run(text, [operand, indices]), operand[[2, 0]])


def test_dynamic_gather_sizes_from_result_type():
    operand, indices = _data(np.int64, (3, 4, 2)), np.array([[0, 0], [1, 3], [2, 1]], np.int32)
    body = """
  %sizes = stablehlo.constant dense<[1, 2, 2]> : tensor<3xi64>
  %r = "stablehlo.dynamic_gather"(%a0, %a1, %sizes) {dimension_numbers = #stablehlo.gather<offset_dims = [1, 2], collapsed_slice_dims = [0], start_index_map = [0, 1], index_vector_dim = 1>} : (tensor<3x4x2xi64>, tensor<3x2xi32>, tensor<3xi64>) -> tensor<3x2x2xi64>
  return %r : tensor<3x2x2xi64>"""
    expected = ref_gather(operand, indices, (1, 2), (0,), (0, 1), 1, (1, 2, 2), (3, 2, 2))
    _same(_run(body, [operand, indices]), expected)


@pytest.mark.parametrize("sizes,error,why", [
    # MLIR's verifier checks a constant operand against the operand and result types: a
    # LoadError naming the op
    ("[1, 5, 2]", shlo2jax.LoadError, "slice size \\(5\\) is out of bounds"),
    ("[2, 2, 2]", shlo2jax.LoadError, "slice_sizes\\[dim\\] should be <= 1"),
    ("[1, 3, 2]", shlo2jax.LoadError, "dynamic_gather' op inferred type"),
    # what it lets through (a 0 on a collapsed dimension gives the same result type) is
    # checked while tracing
    ("[0, 2, 2]", shlo2jax.TranslationError, "dynamic_gather .*slice_sizes operand: slice "
     "sizes \\[0, 2, 2\\] give another shape than the result type")])
def test_dynamic_gather_checks_known_slice_sizes_per_the_spec(sizes, error, why):
    operand, indices = _data(np.int64, (3, 4, 2)), np.array([[0, 0], [1, 3], [2, 1]], np.int32)
    body = f"""
  %sizes = stablehlo.constant dense<{sizes}> : tensor<3xi64>
  %r = "stablehlo.dynamic_gather"(%a0, %a1, %sizes) {{dimension_numbers = #stablehlo.gather<offset_dims = [1, 2], collapsed_slice_dims = [0], start_index_map = [0, 1], index_vector_dim = 1>}} : (tensor<3x4x2xi64>, tensor<3x2xi32>, tensor<3xi64>) -> tensor<3x2x2xi64>
  return %r : tensor<3x2x2xi64>"""
    with pytest.raises(error, match=why):
        _run(body, [operand, indices])


@pytest.mark.parametrize("batch_dims", [0, 1])
def test_torch_index_select(batch_dims):
    operand = _data(np.float32, (2, 3, 4))
    index = np.array([[2, 0, 1], [1, 1, 0]], np.int32)
    if batch_dims == 0:
        expected, tout = operand[:, index, :], "tensor<2x2x3x4xf32>"
    else:
        expected = np.stack([operand[b][index[b]] for b in range(2)])
        tout = "tensor<2x3x4xf32>"
    body = (f'  %r = "stablehlo.torch_index_select"(%a0, %a1) {{dim = 1 : i64, batch_dims = '
            f'{batch_dims} : i64}} : (tensor<2x3x4xf32>, tensor<2x3xi32>) -> {tout}\n'
            f'  return %r : {tout}')
    _same(_run(body, [operand, index]), expected)


# ---------------------------------------------------------------- scatter

def _scatter_text(inputs, indices, updates, uwd, iwd, sdod, ivd, body_ops, body_types=None,
                  ib=(), sib=(), unique=False, dialect="stablehlo"):
    n = len(inputs)
    body_types = body_types or [_element(x.dtype) for x in inputs]
    tins = [tensor(x.shape, _element(x.dtype)) for x in inputs]
    touts = [tensor(inputs[0].shape, e) for e in body_types]
    tups = [tensor(u.shape, _element(u.dtype)) for u in updates]
    tidx = tensor(indices.shape, _element(indices.dtype))
    args = ", ".join(f"%a{i}" for i in range(2 * n + 1))
    block = ", ".join([f"%x{i}: tensor<{e}>" for i, e in enumerate(body_types)] +
                      [f"%y{i}: tensor<{e}>" for i, e in enumerate(body_types)])
    dims = (f"#{dialect}.scatter<update_window_dims = {list(uwd)}, inserted_window_dims = "
            f"{list(iwd)}, input_batching_dims = {list(ib)}, scatter_indices_batching_dims = "
            f"{list(sib)}, scatter_dims_to_operand_dims = {list(sdod)}, index_vector_dim = {ivd}>")
    result = "%r" if n == 1 else f"%r:{n}"
    refs = ["%r"] if n == 1 else [f"%r#{i}" for i in range(n)]
    return (f'  {result} = "{dialect}.scatter"({args}) ({{\n  ^bb0({block}):\n{body_ops}\n  }}) '
            f'{{scatter_dimension_numbers = {dims}, unique_indices = {str(unique).lower()}}} : '
            f'({", ".join(tins + [tidx] + tups)}) -> ({", ".join(touts)})\n'
            f'  return {", ".join(refs)} : {", ".join(touts)}')


def _binary_body(name, element, dialect="stablehlo"):
    return (f"    %s = {dialect}.{name} %x0, %y0 : tensor<{element}>\n"
            f"    {dialect}.return %s : tensor<{element}>")


RETURN_UPDATE = "    stablehlo.return %y0 : tensor<{e}>"
RETURN_CURRENT = "    stablehlo.return %x0 : tensor<{e}>"

# A 1-D operand, a window of 3 along the indexed dim: start 4 of 6 and start -1 only
# partly fit (their in-bounds elements are updated), 9 and -5 do not fit at all.
_WINDOW_INDICES = np.array([[4], [-1], [9], [1], [-5], [1]])


def _window_case(dtype, index_type=np.int32):
    x = _data(dtype, (6,), start=3)
    u = _data(dtype, (6, 3), start=7)
    idx = _WINDOW_INDICES
    if np.dtype(index_type).kind == "u":
        idx = np.where(idx < 0, 250, idx)
    return x, idx.astype(index_type), u


_COMBINE = {
    "add": lambda a, b: (a + b,),
    "multiply": lambda a, b: (np.multiply(a, b, dtype=np.asarray(a).dtype),),
    "minimum": lambda a, b: (min(a, b),),
    "maximum": lambda a, b: (max(a, b),),
    "or": lambda a, b: (a | b,),
    "and": lambda a, b: (a & b,),
}


@pytest.mark.parametrize("name", ["add", "multiply", "minimum", "maximum"])
@pytest.mark.parametrize("dtype", [np.int8, np.uint16, np.int64, np.uint64, np.float32,
                                   np.float64])
def test_scatter_recognised_bodies_with_partial_windows(name, dtype):
    _needs(f"stablehlo.{name}")
    x, idx, u = _window_case(dtype)
    e = _element(dtype)
    text = _scatter_text([x], idx, [u], (1,), (), (0,), 1, _binary_body(name, e))
    expected, = ref_scatter([x], idx, [u], (1,), (), (0,), 1, _COMBINE[name])
    _same(_run(text, [x, idx, u]), expected)


@pytest.mark.parametrize("name,combine", [("add", "or"), ("multiply", "and"), ("or", "or"),
                                          ("and", "and"), ("maximum", "or"), ("minimum", "and")])
def test_scatter_boolean_bodies(name, combine):
    _needs(f"stablehlo.{name}")
    x = np.array([True, False, True, False, False])
    idx = np.array([[0], [1], [1], [2], [4], [7]], np.int32)
    u = np.array([False, True, False, False, True, True])
    text = _scatter_text([x], idx, [u], (), (0,), (0,), 1, _binary_body(name, "i1"))
    expected, = ref_scatter([x], idx, [u], (), (0,), (0,), 1, _COMBINE[combine])
    _same(_run(text, [x, idx, u]), expected)


@pytest.mark.parametrize("index_type", [np.int8, np.uint8, np.int64, np.uint64])
@pytest.mark.parametrize("dtype", [np.bool_, np.int32, np.float16, np.complex64])
def test_scatter_replace_unique(index_type, dtype):
    x = _data(dtype, (4, 3))
    idx = np.array([[2], [0], [-1], [5]])
    if np.dtype(index_type).kind == "u":
        idx = np.where(idx < 0, 200, idx)
    idx = idx.astype(index_type)
    u = _data(dtype, (4, 3), start=40)
    e = _element(dtype)
    text = _scatter_text([x], idx, [u], (1,), (0,), (0,), 1, RETURN_UPDATE.format(e=e),
                         unique=True)
    expected, = ref_scatter([x], idx, [u], (1,), (0,), (0,), 1, lambda a, b: (b,))
    _same(_run(text, [x, idx, u]), expected)


def test_scatter_body_keeping_current_value():
    x, idx, u = _window_case(np.int32)
    text = _scatter_text([x], idx, [u], (1,), (), (0,), 1, RETURN_CURRENT.format(e="i32"))
    _same(_run(text, [x, idx, u]), x)


def test_scatter_general_body_single_operand():
    # x + 2*u: not one lax scatter, still order-independent.
    x, idx, u = _window_case(np.int64, np.uint8)
    body = ("    %s = stablehlo.add %x0, %y0 : tensor<i64>\n"
            "    %t = stablehlo.add %s, %y0 : tensor<i64>\n"
            "    stablehlo.return %t : tensor<i64>")
    text = _scatter_text([x], idx, [u], (1,), (), (0,), 1, body)
    expected, = ref_scatter([x], idx, [u], (1,), (), (0,), 1, lambda a, b: (a + 2 * b,))
    _same(_run(text, [x, idx, u]), expected)


def test_scatter_general_body_with_constant():
    _needs("stablehlo.multiply", "stablehlo.subtract")
    x = _data(np.int32, (5,))
    idx = np.array([[3], [0], [7], [4]], np.int32)  # unique: the body is order-dependent
    u = _data(np.int32, (4,), start=20)
    body = ("    %c = stablehlo.constant dense<3> : tensor<i32>\n"
            "    %m = stablehlo.multiply %x0, %c : tensor<i32>\n"
            "    %s = stablehlo.subtract %m, %y0 : tensor<i32>\n"
            "    stablehlo.return %s : tensor<i32>")
    text = _scatter_text([x], idx, [u], (), (0,), (0,), 1, body)
    expected, = ref_scatter([x], idx, [u], (), (0,), (0,), 1, lambda a, b: (3 * a - b,))
    _same(_run(text, [x, idx, u]), expected)


def test_scatter_integer_bitwise_body():
    _needs("stablehlo.xor")
    x, idx, u = _window_case(np.uint32)
    text = _scatter_text([x], idx, [u], (1,), (), (0,), 1, _binary_body("xor", "ui32"))
    expected, = ref_scatter([x], idx, [u], (1,), (), (0,), 1, lambda a, b: (a ^ b,))
    _same(_run(text, [x, idx, u]), expected)


def test_scatter_two_operands_separable():
    _needs("stablehlo.maximum")
    x0, idx, u0 = _window_case(np.float32)
    x1, u1 = -_data(np.int32, (6,)), _data(np.int32, (6, 3), start=11)
    body = ("    %s = stablehlo.add %x0, %y0 : tensor<f32>\n"
            "    %m = stablehlo.maximum %y1, %x1 : tensor<i32>\n"
            "    stablehlo.return %s, %m : tensor<f32>, tensor<i32>")
    text = _scatter_text([x0, x1], idx, [u0, u1], (1,), (), (0,), 1, body)
    expected = ref_scatter([x0, x1], idx, [u0, u1], (1,), (), (0,), 1,
                           lambda a0, a1, b0, b1: (a0 + b0, max(a1, b1)))
    out = _run(text, [x0, x1, idx, u0, u1])
    _same(out[0], expected[0])
    _same(out[1], expected[1])


def test_scatter_two_operands_shared_body():
    # Result 1 takes update 0: one body over both operands.
    x0, idx, u0 = _window_case(np.int32)
    x1, u1 = _data(np.int64, (6,)), _data(np.int64, (6, 3), start=30)
    body = ("    %s = stablehlo.add %x0, %y0 : tensor<i32>\n"
            "    %c = stablehlo.convert %y0 : (tensor<i32>) -> tensor<i64>\n"
            "    %t = stablehlo.add %x1, %c : tensor<i64>\n"
            "    stablehlo.return %s, %t : tensor<i32>, tensor<i64>")
    _needs("stablehlo.convert")
    text = _scatter_text([x0, x1], idx, [u0, u1], (1,), (), (0,), 1, body)
    expected = ref_scatter([x0, x1], idx, [u0, u1], (1,), (), (0,), 1,
                           lambda a0, a1, b0, b1: (a0 + b0, a1 + np.int64(b0)))
    out = _run(text, [x0, x1, idx, u0, u1])
    _same(out[0], expected[0])
    _same(out[1], expected[1])


def test_scatter_two_operands_replace_unique():
    x0, x1 = _data(np.float32, (5,)), _data(np.int8, (5,))
    idx = np.array([[4], [1], [8]], np.int64)
    u0, u1 = _data(np.float32, (3,), start=50), _data(np.int8, (3,), start=60)
    body = "    stablehlo.return %y0, %y1 : tensor<f32>, tensor<i8>"
    text = _scatter_text([x0, x1], idx, [u0, u1], (), (0,), (0,), 1, body, unique=True)
    expected = ref_scatter([x0, x1], idx, [u0, u1], (), (0,), (0,), 1,
                           lambda a0, a1, b0, b1: (b0, b1))
    out = _run(text, [x0, x1, idx, u0, u1])
    _same(out[0], expected[0])
    _same(out[1], expected[1])


SCATTER_LAYOUTS = {
    # name: operand shape, indices, updates shape, uwd, iwd, sdod, ivd, input batching,
    #       indices batching
    "index_vector_first": ((3, 4), [[0, 1, 2, 3], [3, 2, -1, 2]], (4, 2), (1,), (1,), (1, 0),
                           0, (), ()),
    "implicit_index_vector": ((5, 3), [[1, 4], [0, 1]], (2, 2, 3), (2,), (0,), (0,), 2, (), ()),
    "batching_dims": ((2, 3, 4, 2), [[[[0, 0], [1, 0], [2, 1]], [[0, 1], [1, 1], [0, 9]]],
                                     [[[0, 0], [2, 1], [2, 2]], [[1, 2], [0, 1], [1, 0]]]],
                      (2, 2, 3, 2, 2), (3, 4), (1,), (2, 1), 3, (0,), (1,)),
}


@pytest.mark.parametrize("case", list(SCATTER_LAYOUTS))
def test_scatter_layouts(case):
    shape, idx, ushape, uwd, iwd, sdod, ivd, ib, sib = SCATTER_LAYOUTS[case]
    x, u = _data(np.int64, shape), _data(np.int64, ushape, start=100)
    idx = np.array(idx, np.int32)
    text = _scatter_text([x], idx, [u], uwd, iwd, sdod, ivd, _binary_body("add", "i64"),
                         ib=ib, sib=sib)
    expected, = ref_scatter([x], idx, [u], uwd, iwd, sdod, ivd, _COMBINE["add"], ib, sib)
    _same(_run(text, [x, idx, u]), expected)


def test_scatter_body_type_wider_than_inputs():
    # The body may compute in a promotable wider type; results take the body's type.
    x = np.array([1, 2, 3, 4], np.int8)
    idx = np.array([[1], [1], [3]], np.int32)
    u = np.array([100, 100, 7], np.int8)
    text = _scatter_text([x], idx, [u], (), (0,), (0,), 1, _binary_body("add", "i32"),
                         body_types=["i32"])
    _same(_run(text, [x, idx, u]), np.array([1, 202, 3, 11], np.int32))


def test_scatter_mhlo_form():
    x, idx, u = _window_case(np.float32)
    text = _scatter_text([x], idx, [u], (1,), (), (0,), 1,
                         _binary_body("add", "f32", dialect="mhlo"), dialect="mhlo")
    expected, = ref_scatter([x], idx, [u], (1,), (), (0,), 1, _COMBINE["add"])
    _same(_run(text, [x, idx, u]), expected)


ALL_ELEMENTS = ["i1", "i2", "i4", "i8", "i16", "i32", "i64", "ui2", "ui4", "ui8", "ui16", "ui32",
                "ui64", "f4E2M1FN", "f8E4M3FN", "f8E5M2", "f8E4M3FNUZ", "f8E5M2FNUZ",
                "f8E4M3B11FNUZ", "f8E4M3", "f8E3M4", "f8E8M0FNU", "bf16", "f16", "f32", "f64",
                "complex<f32>", "complex<f64>"]


def _distinct(element, n, salt=0):
    """n values of the type, distinct where the type has that many (narrow floats from their
    finite bit patterns)."""
    dtype = T.ELEMENT_DTYPES[element]
    if dtype == np.bool_:
        return (np.arange(n) + salt) % 3 == 1
    if T.is_complex(dtype):
        return (np.arange(n) + salt + 1j * (np.arange(n) - salt)).astype(dtype)
    bits = T.bit_width(dtype)
    if T.is_float(dtype) and bits <= 8:
        patterns = np.arange(1 << bits).astype(np.uint8).view(dtype)
        finite = patterns[np.isfinite(patterns.astype(np.float64))]
        return finite[(np.arange(n) * 5 + salt) % finite.size]
    if bits <= 4:
        info = ml_dtypes.iinfo(dtype)
        return ((np.arange(n) + salt) % (int(info.max) - int(info.min) + 1)
                + int(info.min)).astype(dtype)
    return ((np.arange(n) + salt) % 100).astype(dtype)


def _bits_equal(actual, expected):
    actual = np.asarray(actual)
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    assert (np.ascontiguousarray(actual).tobytes()
            == np.ascontiguousarray(expected).tobytes()), (actual, expected)


@pytest.mark.slow
@pytest.mark.parametrize("element", ALL_ELEMENTS)
def test_indexing_ops_every_element_type(element):
    """dynamic_slice / dynamic_update_slice (clamped starts), gather and scatter (replace)
    and select on one module per element type, bit-exact against numpy."""
    x = _distinct(element, 12).reshape(4, 3)
    u = _distinct(element, 4, salt=7).reshape(2, 2)
    p = np.array([[True, False, True], [False, True, False], [True, True, False],
                  [False, False, True]])
    t, t2, r = tensor((4, 3), element), tensor((2, 2), element), tensor((3, 3), element)
    body = f"""
  %i = stablehlo.constant dense<3> : tensor<i32>
  %j = stablehlo.constant dense<-1> : tensor<i32>
  %0 = stablehlo.dynamic_slice %a0, %i, %j, sizes = [2, 2] : ({t}, tensor<i32>, tensor<i32>) -> {t2}
  %1 = stablehlo.dynamic_update_slice %a0, %a1, %i, %j : ({t}, {t2}, tensor<i32>, tensor<i32>) -> {t}
  %idx = stablehlo.constant dense<[[3], [0], [2]]> : tensor<3x1xi32>
  %2 = "stablehlo.gather"(%a0, %idx) {{dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, slice_sizes = array<i64: 1, 3>}} : ({t}, tensor<3x1xi32>) -> {r}
  %sidx = stablehlo.constant dense<[[1], [3]]> : tensor<2x1xi32>
  %upd = stablehlo.slice %2 [0:2, 0:3] : ({r}) -> {tensor((2, 3), element)}
  %3 = "stablehlo.scatter"(%a0, %sidx, %upd) ({{
    ^bb0(%old: {tensor((), element)}, %new: {tensor((), element)}):
      stablehlo.return %new : {tensor((), element)}
  }}) {{scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, unique_indices = true}} : ({t}, tensor<2x1xi32>, {tensor((2, 3), element)}) -> {t}
  %rev = stablehlo.reverse %a0, dims = [0] : {t}
  %4 = stablehlo.select %a2, %a0, %rev : tensor<4x3xi1>, {t}
  return %0, %1, %2, %3, %4 : {t2}, {t}, {r}, {t}, {t}"""
    outs = _run(body, [x, u, p])
    # Starts clamp into range: row 3 -> 2, column -1 -> 0.
    _bits_equal(outs[0], x[2:4, 0:2])
    expected = x.copy()
    expected[2:4, 0:2] = u
    _bits_equal(outs[1], expected)
    _bits_equal(outs[2], x[[3, 0, 2]])
    expected = x.copy()
    expected[[1, 3]] = x[[3, 0]]
    _bits_equal(outs[3], expected)
    _bits_equal(outs[4], np.where(p, x, x[::-1]))


_SCATTER_ROWS = """
func.func @main(%x: tensor<5x3xf32>, %i: tensor<2x1xi32>, %u: tensor<2x2x3xf32>) -> tensor<5x3xf32> {
  %0 = "stablehlo.scatter"(%x, %i, %u) ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      BODY
  }) {scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1, 2],
      inserted_window_dims = [], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>,
      indices_are_sorted = SORTED, unique_indices = SORTED}
    : (tensor<5x3xf32>, tensor<2x1xi32>, tensor<2x2x3xf32>) -> tensor<5x3xf32>
  return %0 : tensor<5x3xf32>
}
"""
_SCATTER_BODIES = {
    "replace": ("stablehlo.return %b : tensor<f32>", lambda a, b: b),
    "add": ("%s = stablehlo.add %a, %b : tensor<f32>\n      stablehlo.return %s : tensor<f32>",
            lambda a, b: a + b),
    "general": ("%s = stablehlo.subtract %b, %a : tensor<f32>\n"
                "      stablehlo.return %s : tensor<f32>", lambda a, b: b - a),
}


def _scatter_rows_reference(x, starts, updates, combine):
    """The spec: each update element whose full index falls outside the operand is skipped
    (a window partly outside keeps its inside elements); starts are not clamped."""
    out = x.copy()
    for k, start in enumerate(starts):
        for r in range(updates.shape[1]):
            row = start + r
            if 0 <= row < x.shape[0]:
                out[row] = combine(out[row], updates[k, r])
    return out


@pytest.mark.slow
@pytest.mark.parametrize("body", sorted(_SCATTER_BODIES))
@pytest.mark.parametrize("starts", [(-1, 4), (-2, 5), (-7, 2), (3, -1), (2147483647, -2147483648)])
def test_scatter_out_of_range_starts_on_every_path(body, starts):
    """Negative and past-the-end starts: jit, vmap (operand or indices batched) and grad
    give the spec's result, never a trace-time slice error."""
    import jax
    text, combine = _SCATTER_BODIES[body]
    sorted_ = "true" if starts[0] <= starts[1] and starts[0] != starts[1] else "false"
    program = shlo2jax.load(_SCATTER_ROWS.replace("BODY", text).replace("SORTED", sorted_))
    fn = program.entry
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 3)).astype(np.float32)
    u = rng.standard_normal((2, 2, 3)).astype(np.float32)
    i = np.array(starts, np.int32).reshape(2, 1)
    expected = _scatter_rows_reference(x, starts, u, combine)
    np.testing.assert_allclose(np.asarray(fn(x, i, u)), expected, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(jax.jit(fn)(x, i, u)), expected, rtol=1e-6)
    batched = jax.vmap(fn, (0, None, None))(np.stack([x, 2 * x]), i, u)
    np.testing.assert_allclose(np.asarray(batched[1]),
                               _scatter_rows_reference(2 * x, starts, u, combine), rtol=1e-6)
    other = np.array([[0], [1]], np.int32)
    batched = jax.vmap(fn, (None, 0, None))(x, np.stack([i, other]), u)
    np.testing.assert_allclose(np.asarray(batched[0]), expected, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(batched[1]),
                               _scatter_rows_reference(x, (0, 1), u, combine), rtol=1e-6)
    if body != "general":  # a general body is not differentiable (a named error)
        grad_u = jax.grad(lambda u: fn(x, i, u).sum())(u)
        landed = np.array([[0 <= s + r < 5 for r in range(2)] for s in starts], np.float32)
        # no two updates target one row here: each lands (derivative 1) or is dropped (0)
        np.testing.assert_array_equal(np.asarray(grad_u),
                                      np.broadcast_to(landed[:, :, None], u.shape))


# ---------------------------------------------------------------- zero-size operands and windows

def _zero_cases():
    import jax.numpy as jnp
    from jax import lax
    import jax
    f32 = np.float32
    i = np.array([0, 1, 5, -2], np.int32)
    return {
        # the vmap of a dynamic_update_slice is a scatter with input batching dims
        "vmap_dus_empty_window": (
            jax.vmap(lambda x, u, i: lax.dynamic_update_slice(x, u, (i, 0, 0))),
            (np.ones((4, 4, 0, 1), f32), np.ones((4, 2, 0, 1), f32), i)),
        "vmap_dus_empty_operand_dim": (
            jax.vmap(lambda x, u, i: lax.dynamic_update_slice(x, u, (0, i))),
            (np.ones((4, 0, 3), f32), np.ones((4, 0, 2), f32), i)),
        "dus_empty_window": (
            lambda x, u, k: lax.dynamic_update_slice(x, u, (k, k)),
            (np.ones((3, 5), f32), np.ones((0, 2), f32), np.int32(7))),
        "dynamic_slice_empty_window": (
            lambda x, k: lax.dynamic_slice(x, (k, -k), (0, 2)),
            (np.arange(15, dtype=f32).reshape(3, 5), np.int32(9))),
        "dynamic_slice_empty_operand": (
            lambda x, k: lax.dynamic_slice(x, (k, k), (0, 3)),
            (np.ones((0, 4), f32), np.int32(-3))),
        "vmap_dynamic_slice_empty_window": (
            jax.vmap(lambda x, k: lax.dynamic_slice(x, (k, 0), (2, 0))),
            (np.ones((4, 3, 5), f32), i)),
        "gather_empty_slice": (
            lambda x, idx: x[idx], (np.ones((5, 0), f32), np.array([0, 4, 9, -7], np.int32))),
        "gather_no_indices": (
            lambda x, idx: x[idx], (np.arange(10, dtype=f32).reshape(5, 2),
                                    np.zeros((0,), np.int32))),
        "scatter_set_empty_window": (
            lambda x, idx, u: x.at[idx].set(u),
            (np.ones((5, 0), f32), np.array([0, 4, 9], np.int32), np.ones((3, 0), f32))),
        "scatter_add_no_indices": (
            lambda x, idx, u: x.at[idx].add(u),
            (np.ones((5, 2), f32), np.zeros((0,), np.int32), np.ones((0, 2), f32))),
        "scatter_add_empty_operand": (
            lambda x, idx, u: x.at[idx].add(u, mode="drop"),
            (np.ones((0, 3), f32), np.array([0, 1], np.int32), np.ones((2, 3), f32))),
        "scatter_mul_empty_window": (
            lambda x, idx, u: x.at[:, idx].multiply(u),
            (np.ones((0, 5), f32), np.array([1, 2], np.int32), np.ones((0, 2), f32))),
    }


@pytest.mark.parametrize("name", sorted(_zero_cases()))
def test_zero_size_operands_and_windows_agree_with_xla(name):
    """Every op that clamps or bounds its start indices, on zero-size operands and windows,
    exported by jax and compared with XLA's own run of the same function (the spec: a
    window of no element updates nothing and reads nothing; clamping never goes negative)."""
    import jax
    fn, args = _zero_cases()[name]
    exported = jax.export.export(jax.jit(fn))(
        *[jax.ShapeDtypeStruct(np.shape(a), np.asarray(a).dtype) for a in args])
    got = shlo2jax.load(exported.serialize()).entry(*args)
    _same(got, np.asarray(jax.jit(fn)(*args)))


def test_vmap_dynamic_update_slice_empty_window_polymorphic_batch():
    # the case: `tensor<?x2x0x1xf32>` updates, the batch a symbolic dimension
    import jax
    from jax import lax
    fn = jax.vmap(lambda x, u, i: lax.dynamic_update_slice(x, u, (i, 0, 0)))
    b, = jax.export.symbolic_shape("b")
    exported = jax.export.export(jax.jit(fn))(
        jax.ShapeDtypeStruct((b, 4, 0, 1), np.float32),
        jax.ShapeDtypeStruct((b, 2, 0, 1), np.float32), jax.ShapeDtypeStruct((b,), np.int32))
    assert "tensor<?x2x0x1xf32>" in exported.mlir_module()
    program = shlo2jax.load(exported.serialize()).entry
    x, u = np.ones((3, 4, 0, 1), np.float32), np.ones((3, 2, 0, 1), np.float32)
    assert program(x, u, np.array([0, 1, 9], np.int32)).shape == (3, 4, 0, 1)


@pytest.mark.parametrize("body,args,expected", [
    # dynamic_gather with a zero slice size, starts out of range: nothing read
    ("""
  %s = stablehlo.constant dense<[1, 0]> : tensor<2xi64>
  %r = "stablehlo.dynamic_gather"(%a0, %a1, %s) {dimension_numbers = #stablehlo.gather<
      offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0],
      index_vector_dim = 1>} : (tensor<3x4xf32>, tensor<2x1xi32>, tensor<2xi64>)
      -> tensor<2x0xf32>
  return %r : tensor<2x0xf32>""",
     (np.ones((3, 4), np.float32), np.array([[7], [-2]], np.int32)),
     np.zeros((2, 0), np.float32)),
    # real_dynamic_slice with an empty result
    ("""
  %b = stablehlo.constant dense<[1, 2]> : tensor<2xi64>
  %e = stablehlo.constant dense<[1, 4]> : tensor<2xi64>
  %t = stablehlo.constant dense<[1, 1]> : tensor<2xi64>
  %r = stablehlo.real_dynamic_slice %a0, %b, %e, %t
      : (tensor<3x4xf32>, tensor<2xi64>, tensor<2xi64>, tensor<2xi64>) -> tensor<0x2xf32>
  return %r : tensor<0x2xf32>""",
     (np.ones((3, 4), np.float32),), np.zeros((0, 2), np.float32)),
])
def test_dynamic_ops_with_empty_results(body, args, expected):
    _same(_run(body, args), expected)


@pytest.mark.parametrize("starts,limits,strides,message", [
    ([1, 3], [2, 2], [1, 1], r"dimension 1: start 3 and limit 2 are not within"),
    ([1, 0], [2, 4], [1, 1], r"dimension 1: start 0, limit 4 and stride 1 give 4 elements"),
    ([1, 0], [2, 5], [1, 2], r"dimension 1: start 0 and limit 5 are not within .* <= 4"),
    ([1, 0], [2, 2], [1, 0], r"dimension 1: stride 0 is not positive"),
])
def test_real_dynamic_slice_checks_known_operands(starts, limits, strides, message):
    # the spec's constraints (as slice's) on start, limit and stride operands known while
    # tracing: jaxlib's verifier does not check their values
    def body(starts, limits, strides):
        return f"""
  %b = stablehlo.constant dense<{starts}> : tensor<2xi64>
  %e = stablehlo.constant dense<{limits}> : tensor<2xi64>
  %t = stablehlo.constant dense<{strides}> : tensor<2xi64>
  %r = stablehlo.real_dynamic_slice %a0, %b, %e, %t
      : (tensor<3x4xf32>, tensor<2xi64>, tensor<2xi64>, tensor<2xi64>) -> tensor<1x2xf32>
  return %r : tensor<1x2xf32>"""
    with pytest.raises(shlo2jax.TranslationError, match="stablehlo.real_dynamic_slice at .*"
                       + message):
        _run(body(starts, limits, strides), (np.ones((3, 4), np.float32),))
    _same(_run(body([1, 1], [2, 4], [1, 2]), (np.arange(12, dtype=np.float32).reshape(3, 4),)),
          np.float32([[5, 7]]))
