"""ops._ranges: value ranges read from the module at plan time (which local derivatives are
finite everywhere, so that strong-zero guards can go)."""

import math

import numpy as np
import pytest

import shlo2jax
from shlo2jax.ops._ranges import region_range


def _ranges(text: str, function: str = "main") -> dict:
    """Each single-result op's range in `function`, by the first word of its location-free
    name: the op names are unique in these programs."""
    program = shlo2jax.load(text)
    translator = program.translator
    body = translator.module.functions[function].body
    return {op.name.split(".", 1)[1]: region_range(translator, body, op.results[0])
            for op in body.ops if len(op.results) == 1}


def _near(found, lo, hi) -> bool:
    """`found` is (lo, hi), give or take the few ulp the analysis widens bounds by."""
    return found is not None and all(
        a == b if math.isinf(b) or b == 0 else math.isclose(a, b, rel_tol=1e-5)
        for a, b in zip(found, (lo, hi)))


_LAYER_NORM = """
func.func @main(%x: tensor<4x8xf32>) -> tensor<4x1xf32> {
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %n = stablehlo.constant dense<8.0> : tensor<f32>
  %eps = stablehlo.constant dense<1.0e-5> : tensor<f32>
  %sq = stablehlo.multiply %x, %x : tensor<4x8xf32>
  %sum = stablehlo.reduce(%sq init: %zero) applies stablehlo.add across dimensions = [1]
      : (tensor<4x8xf32>, tensor<f32>) -> tensor<4xf32>
  %var = call @var(%sum, %n) : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %e = stablehlo.broadcast_in_dim %eps, dims = [] : (tensor<f32>) -> tensor<4xf32>
  %v = stablehlo.add %var, %e : tensor<4xf32>
  %r = stablehlo.rsqrt %v : tensor<4xf32>
  %out = stablehlo.reshape %r : (tensor<4xf32>) -> tensor<4x1xf32>
  return %out : tensor<4x1xf32>
}
func.func private @var(%s: tensor<4xf32>, %n: tensor<f32>) -> tensor<4xf32> {
  %nb = stablehlo.broadcast_in_dim %n, dims = [] : (tensor<f32>) -> tensor<4xf32>
  %q = stablehlo.divide %s, %nb : tensor<4xf32>
  return %q : tensor<4xf32>
}
"""


def test_a_layer_norms_reciprocal_deviation_is_finite():
    """A square is >= 0 (an argument's too), a sum of them too; a private function's argument
    is what its calls pass; rsqrt of var + eps is within (0, 1/sqrt(eps)]."""
    found = _ranges(_LAYER_NORM)
    assert found["multiply"] == (0.0, math.inf)
    assert found["reduce"] == (0.0, math.inf)
    assert found["call"] == (0.0, math.inf)
    lo, hi = found["rsqrt"]
    assert lo == 0.0 and 316.2 < hi < 316.3
    assert found["constant"] is not None


def test_arguments_and_unknown_ops_are_unknown():
    found = _ranges("""
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %e = stablehlo.exponential %x : tensor<4xf32>
  %l = stablehlo.log %x : tensor<4xf32>
  %s = stablehlo.sine %x : tensor<4xf32>
  %c = stablehlo.cosine %e : tensor<4xf32>
  %t = stablehlo.tanh %x : tensor<4xf32>
  %a = stablehlo.add %e, %t : tensor<4xf32>
  return %a : tensor<4xf32>
}""")
    assert found["exponential"] == (0.0, math.inf)  # (exp of anything: unbounded)
    assert found["log"] is None  # (log of a negative number is NaN)
    assert found["sine"] is None  # (sin(inf) is NaN)
    assert found["cosine"] is None
    assert _near(found["tanh"], -1.0, 1.0)
    assert _near(found["add"], -1.0, math.inf)


def test_nan_infinite_and_zero_crossing_results_are_unknown():
    found = _ranges("""
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %nan = stablehlo.constant dense<[1.0, 0x7FC00000, 2.0, 3.0]> : tensor<4xf32>
  %one = stablehlo.constant dense<1.0> : tensor<4xf32>
  %span = stablehlo.constant dense<[-1.0, 1.0, 2.0, 3.0]> : tensor<4xf32>
  %q = stablehlo.divide %one, %span : tensor<4xf32>
  %e = stablehlo.exponential %x : tensor<4xf32>
  %z = stablehlo.multiply %e, %span : tensor<4xf32>
  %big = stablehlo.constant dense<3.0e38> : tensor<4xf32>
  %o = stablehlo.maximum %big, %span : tensor<4xf32>
  %p = stablehlo.power %o, %o : tensor<4xf32>
  %s = stablehlo.add %o, %o : tensor<4xf32>
  return %s : tensor<4xf32>
}""")
    assert found["divide"] is None  # (1 / [-1, 3]: crosses zero)
    assert found["multiply"] is None  # ([0, inf] * [-1, 3]: 0 * inf)
    assert found["power"] is None  # (no rule)
    assert found["add"][1] == math.inf  # (6e38 overflows f32)


_CALL = "call @f({}) : (tensor<f32>) -> tensor<f32>"


@pytest.mark.parametrize("callers", [
    f"%a = {_CALL.format('%c')}\n  %b = {_CALL.format('%x')}",
    f"%a = {_CALL.format('%c')}\n  %b = {_CALL.format('%c')}",
])
def test_a_functions_argument_is_known_only_where_every_call_passes_a_known_value(callers):
    text = f"""
func.func @main(%x: tensor<f32>) -> tensor<f32> {{
  %c = stablehlo.constant dense<2.0> : tensor<f32>
  {callers}
  %s = stablehlo.add %a, %b : tensor<f32>
  return %s : tensor<f32>
}}
func.func private @f(%y: tensor<f32>) -> tensor<f32> {{
  %n = stablehlo.negate %y : tensor<f32>
  return %n : tensor<f32>
}}"""
    found = _ranges(text, "f")
    if "%x" in callers:  # (main's argument: any value, NaN aside)
        assert found["negate"] == (-math.inf, math.inf)
    else:
        assert _near(found["negate"], -2.0, -2.0)


def test_a_public_functions_arguments_are_any_value_not_the_callers():
    # (a public function is called from outside too: what @main passes says nothing; its
    # arguments are any value, NaN aside, as @main's are)
    found = _ranges("""
func.func @main(%x: tensor<f32>) -> tensor<f32> {
  %c = stablehlo.constant dense<2.0> : tensor<f32>
  %a = call @f(%c) : (tensor<f32>) -> tensor<f32>
  return %a : tensor<f32>
}
func.func public @f(%y: tensor<f32>) -> tensor<f32> {
  %n = stablehlo.negate %y : tensor<f32>
  return %n : tensor<f32>
}""", "f")
    assert found["negate"] == (-math.inf, math.inf)


def test_a_softmax_shift_is_unknown_and_a_select_on_a_known_predicate_one_branch():
    """x - max(x) is NaN on a row all -inf (a fully masked attention row: torch/hf_llama_sdpa
    selects it away), so its exp, tanh or logistic keeps its guard."""
    found = _ranges("""
func.func @main(%x: tensor<3x5xf32>) -> tensor<3x5xf32> {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %nan = stablehlo.constant dense<0x7FC00000> : tensor<3x5xf32>
  %c = stablehlo.constant dense<1.0> : tensor<f32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %m = stablehlo.reduce(%x init: %ninf) applies stablehlo.maximum across dimensions = [1]
      : (tensor<3x5xf32>, tensor<f32>) -> tensor<3xf32>
  %mb = stablehlo.broadcast_in_dim %m, dims = [0] : (tensor<3xf32>) -> tensor<3x5xf32>
  %d = stablehlo.subtract %x, %mb : tensor<3x5xf32>
  %u = stablehlo.logistic %d : tensor<3x5xf32>
  %t = stablehlo.tanh %x : tensor<3x5xf32>
  %p = stablehlo.compare GT, %c, %zero, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
  %s = stablehlo.select %p, %t, %nan : tensor<i1>, tensor<3x5xf32>
  return %s : tensor<3x5xf32>
}""")
    assert found["subtract"] is None
    # (and what is bounded for every value is not bounded for a NaN: logistic(NaN) is NaN)
    assert found["logistic"] is None
    assert found["compare"] == (1.0, 1.0)
    assert _near(found["select"], -1.0, 1.0)


def test_a_dropped_programs_translator_and_analysis_are_freed():
    """The analyses are keyed weakly by translator and hold its module, not the translator:
    a dropped program's memory comes back."""
    import gc
    import weakref

    import jax.numpy as jnp
    from shlo2jax.ops import _ranges
    program = shlo2jax.load("""
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %e = stablehlo.exponential %x : tensor<4xf32>
  %m = stablehlo.multiply %x, %e : tensor<4xf32>
  return %m : tensor<4xf32>
}""")
    program(jnp.ones(4, jnp.float32))  # planned: the views asked for ranges
    translator = weakref.ref(program.translator)
    assert translator() in _ranges._ANALYSES
    del program
    gc.collect()
    assert translator() is None


def test_exact_range_leaves_public_arguments_unknown():
    # value_range takes a public function's argument as any number (NaN aside); exact_range,
    # which views that change values use, as unknown; a private function's argument is what
    # its calls pass in both
    import shlo2jax
    from shlo2jax.ops import _ranges
    from shlo2jax.translate import Translator, _Producers
    program = shlo2jax.load("""
func.func private @f(%d: tensor<f32>) -> tensor<f32> {
  %n = stablehlo.constant dense<3.0> : tensor<f32>
  %c = stablehlo.subtract %n, %d : tensor<f32>
  return %c : tensor<f32>
}
func.func @main(%x: tensor<f32>) -> (tensor<f32>, tensor<f32>) {
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %r = func.call @f(%zero) : (tensor<f32>) -> tensor<f32>
  %a = stablehlo.abs %x : tensor<f32>
  return %r, %a : tensor<f32>, tensor<f32>
}""")
    module = program.module if hasattr(program, "module") else program._module
    translator = Translator(module, program.options)
    main, f = module.functions["main"].body, module.functions["f"].body
    producers, callee = _Producers(main), _Producers(f)
    a = main.ops[-1].results[0]
    assert _ranges.value_range(a, producers, translator) == (0.0, math.inf)
    assert _ranges.exact_range(a, producers, translator) is None
    c = f.ops[-1].results[0]
    for query in (_ranges.value_range, _ranges.exact_range):
        lo, hi = query(c, callee, translator)
        assert lo <= 3.0 <= hi and hi - lo < 1e-5


# `lax.fori_loop(start, stop, lambda i, c: c + w[i], x)` as jax exports it: a scan whose while
# loop carries its own counter beside the fori index; jax <= 0.11 calls the body
# (`closed_call`) with the index, jax 0.12 inlines it. The bound and step are constants the
# loop captures.
_FORI_LOOP = """
func.func public @main(%w: tensor<6x3xf32>, %x: tensor<3xf32>) -> tensor<3xf32> {
  %one = stablehlo.constant dense<1> : tensor<i32>
  %trips = stablehlo.constant dense<TRIPS> : tensor<i32>
  %start = stablehlo.constant dense<START> : tensor<i32>
  %zero = stablehlo.constant dense<0> : tensor<i32>
  %0:4 = stablehlo.while(%iw = %w, %k = %zero, %i = %start, %c = %x)
      : tensor<6x3xf32>, tensor<i32>, tensor<i32>, tensor<3xf32>
  cond {
    %1 = stablehlo.compare LT, %k, %trips, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %1 : tensor<i1>
  } do {
BODY
  }
  return %0#3 : tensor<3xf32>
}
"""
_CALLED = """
    %1:2 = func.call @closed_call(%iw, %i, %c)
        : (tensor<6x3xf32>, tensor<i32>, tensor<3xf32>) -> (tensor<i32>, tensor<3xf32>)
    %2 = stablehlo.add %k, %one : tensor<i32>
    stablehlo.return %iw, %2, %1#0, %1#1 : tensor<6x3xf32>, tensor<i32>, tensor<i32>, tensor<3xf32>
"""
_STEP = """
  %n = stablehlo.constant dense<6> : tensor<i32>
  %z = stablehlo.constant dense<0> : tensor<i32>
  %s = stablehlo.constant dense<1> : tensor<i32>
  %next = stablehlo.add %I, %s : tensor<i32>
  %neg = stablehlo.compare LT, %I, %z, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
  %wrapped = stablehlo.add %I, %n : tensor<i32>
  %row = stablehlo.select %neg, %wrapped, %I : tensor<i1>, tensor<i32>
  %slice = stablehlo.dynamic_slice %W, %row, %z, sizes = [1, 3]
      : (tensor<6x3xf32>, tensor<i32>, tensor<i32>) -> tensor<1x3xf32>
  %flat = stablehlo.reshape %slice : (tensor<1x3xf32>) -> tensor<3xf32>
  %sum = stablehlo.add %C, %flat : tensor<3xf32>
"""
_CALLEE = """
func.func private @closed_call(%W: tensor<6x3xf32>, %I: tensor<i32>, %C: tensor<3xf32>)
    -> (tensor<i32>, tensor<3xf32>) {
""" + _STEP + """
  return %next, %sum : tensor<i32>, tensor<3xf32>
}
"""
_INLINED = _STEP.replace("%W", "%iw").replace("%I", "%i").replace("%C", "%c") + """
    %k1 = stablehlo.add %k, %one : tensor<i32>
    stablehlo.return %iw, %k1, %next, %sum : tensor<6x3xf32>, tensor<i32>, tensor<i32>, tensor<3xf32>
"""


def _fori_slices(start: int, stop: int, called: bool):
    text = _FORI_LOOP.replace("TRIPS", str(stop - start)).replace("START", str(start))
    text = text.replace("BODY", _CALLED if called else _INLINED) + (_CALLEE if called else "")
    return shlo2jax.load(text)


def _fori_reference(start: int, stop: int, w, x):
    return x + w[start:stop].sum(axis=0)


def _while_and_callee(program):
    module = program.translator.module
    (loop,) = [op for op in module.functions["main"].body.ops if op.name.endswith(".while")]
    callee = module.functions.get("closed_call")
    return loop, callee


@pytest.mark.parametrize("called", [True, False], ids=["called", "inlined"])
@pytest.mark.parametrize("start, stop", [(0, 6), (2, 5)])
def test_a_counted_loops_counters_run_from_start_to_bound(start, stop, called):
    """In a counted loop's body (`for (i = a; i < b; i += 1)`) the counter is in [a, b - 1],
    and so is a value the body adds 1 to from a (the fori index, incremented in the called
    body or in the loop's own); the start of the index's slice, past jax's negative-index
    select, too."""
    program = _fori_slices(start, stop, called)
    w = np.arange(18, dtype=np.float32).reshape(6, 3)
    x = np.ones(3, np.float32)
    np.testing.assert_array_equal(program(w, x), _fori_reference(start, stop, w, x))
    translator = program.translator
    loop, callee = _while_and_callee(program)
    body = loop.regions[1]
    counter = loop.params.counted.counter
    assert region_range(translator, body, body.args[counter]) == (0.0, stop - start - 1)
    index = body.args[2]
    assert region_range(translator, body, index) == (start, stop - 1)
    where = callee.body if called else body
    (dynamic_slice,) = [op for op in where.ops if op.name.endswith("dynamic_slice")]
    assert region_range(translator, where, dynamic_slice.operands[1]) == (start, stop - 1)


def test_a_captured_value_is_what_it_is_where_defined():
    """A value a nested region captures (a case branch's constant factor) has the range it
    has where it is defined."""
    program = shlo2jax.load("""
func.func @main(%x: tensor<f32>) -> tensor<f32> {
  %c = stablehlo.constant dense<0> : tensor<i32>
  %two = stablehlo.constant dense<2.0> : tensor<f32>
  %r = "stablehlo.case"(%c) ({
    %y = stablehlo.multiply %x, %two : tensor<f32>
    stablehlo.return %y : tensor<f32>
  }) : (tensor<i32>) -> tensor<f32>
  return %r : tensor<f32>
}""")
    translator = program.translator
    (case,) = [op for op in translator.module.functions["main"].body.ops
               if op.name.endswith(".case")]
    branch = case.regions[0]
    (multiply,) = branch.ops
    assert _near(region_range(translator, branch, multiply.operands[1]), 2.0, 2.0)
