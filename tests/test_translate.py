"""The translation loop: result checks on its fast path, region plans, the collector paused
while loading, callees traced once for all their call sites."""

import gc
import itertools

import numpy as np
import pytest

import shlo2jax
from shlo2jax import registry
from shlo2jax.errors import TranslationError


def _custom(target, result_type, operand_type="tensor<3xf32>"):
    return shlo2jax.load(f"""
func.func @main(%x: {operand_type}) -> {result_type} {{
  %0 = stablehlo.custom_call @{target}(%x) : ({operand_type}) -> {result_type}
  func.return %0 : {result_type}
}}""")


@pytest.mark.parametrize("make, message", [
    (lambda x: x[:2], "has type tensor<2xf32>"),                       # wrong shape
    (lambda x: x.astype(np.float64), "has type tensor<3xf64>"),        # wrong dtype
    (lambda x: x.reshape(1, 3), "has type tensor<1x3xf32>"),           # wrong rank
    (lambda x: [x], "result #0 is list"),                              # not an array
    (lambda x: 1.5, "result #0 is float"),
])
def test_result_mismatch_is_a_translation_error(make, message):
    target = "test.translate_mismatch"
    try:
        shlo2jax.register_custom_call(target)(lambda ctx, op, x: make(x))
        prog = _custom(target, "tensor<3xf32>")
        with pytest.raises(shlo2jax.TranslationError, match=message):
            prog(np.arange(3, dtype=np.float32))
    finally:
        registry.CUSTOM_CALL_RULES.pop(target, None)


def test_matching_numpy_result_passes():
    target = "test.translate_numpy"
    try:
        # A handler may return a numpy constant of exactly the declared type.
        shlo2jax.register_custom_call(target)(lambda ctx, op, x: np.full((2, 2), 7, np.int32))
        prog = _custom(target, "tensor<2x2xi32>")
        np.testing.assert_array_equal(np.asarray(prog(np.zeros(3, np.float32))),
                                      np.full((2, 2), 7))
    finally:
        registry.CUSTOM_CALL_RULES.pop(target, None)


def test_callee_and_region_reused_across_call_sites():
    prog = shlo2jax.load("""
func.func private @f(%a: tensor<4xi32>) -> tensor<4xi32> {
  %0 = stablehlo.multiply %a, %a : tensor<4xi32>
  %1 = stablehlo.add %0, %a : tensor<4xi32>
  func.return %1 : tensor<4xi32>
}
func.func @main(%x: tensor<4xi32>) -> tensor<4xi32> {
  %0 = func.call @f(%x) : (tensor<4xi32>) -> tensor<4xi32>
  %1 = func.call @f(%0) : (tensor<4xi32>) -> tensor<4xi32>
  %2 = stablehlo.subtract %1, %0 : tensor<4xi32>
  func.return %2 : tensor<4xi32>
}""")
    def f(a):
        return a * a + a

    for x in (np.array([-2, 0, 1, 3], np.int32), np.array([5, -1, 2, 0], np.int32)):
        np.testing.assert_array_equal(np.asarray(prog(x)), f(f(x)) - f(x))


def test_multi_result_count_mismatch():
    target = "test.translate_two"
    try:
        shlo2jax.register_custom_call(target)(lambda ctx, op, x: (x,))
        prog = shlo2jax.load("""
func.func @main(%x: tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>) {
  %0:2 = stablehlo.custom_call @test.translate_two(%x) : (tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>)
  func.return %0#0, %0#1 : tensor<3xf32>, tensor<3xf32>
}""")
        with pytest.raises(shlo2jax.TranslationError, match="produced 1 results, declared 2"):
            prog(np.zeros(3, np.float32))
    finally:
        registry.CUSTOM_CALL_RULES.pop(target, None)


def test_collector_paused_only_while_tracing():
    assert gc.isenabled()
    seen = []
    target = "test.translate_gc"
    try:
        @shlo2jax.register_custom_call(target)
        def handler(ctx, op, x):
            seen.append(gc.isenabled())
            raise ValueError("boom")
        prog = _custom(target, "tensor<3xf32>")
        with pytest.raises(shlo2jax.TranslationError, match="boom"):
            prog(np.zeros(3, np.float32))
    finally:
        registry.CUSTOM_CALL_RULES.pop(target, None)
    assert seen == [False]
    assert gc.isenabled()  # re-enabled after a failing translation


def test_collector_paused_while_loading_and_back_after():
    """load() reads and decodes with the collector paused (a rule's prepare runs then),
    and leaves it enabled, after a load that fails too."""
    seen = []
    target = "test.translate_gc_load"
    try:
        shlo2jax.register_custom_call(target, prepare=lambda op: seen.append(gc.isenabled()))(
            lambda ctx, op, x: x)
        _custom(target, "tensor<3xf32>")
    finally:
        registry.CUSTOM_CALL_RULES.pop(target, None)
    assert seen == [False] and gc.isenabled()
    with pytest.raises(shlo2jax.LoadError):
        shlo2jax.load("func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {")
    assert gc.isenabled()


def _repeated_blocks(layers: int) -> str:
    """@main: `layers` call sites of one @block (each with its own weight constant), then a
    while loop whose body calls @block from a case branch."""
    calls = "\n".join(
        f"  %w{i} = stablehlo.constant dense<{(i + 1) / layers}> : tensor<4xf32>\n"
        f"  %y{i} = func.call @block(%y{i - 1 if i else 'x'}, %w{i}) : "
        "(tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>" if i else
        f"  %w0 = stablehlo.constant dense<{1 / layers}> : tensor<4xf32>\n"
        "  %y0 = func.call @block(%x, %w0) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>"
        for i in range(layers))
    return f"""
func.func private @block(%a: tensor<4xf32>, %w: tensor<4xf32>) -> tensor<4xf32> {{
  %0 = stablehlo.multiply %a, %w : tensor<4xf32>
  %1 = stablehlo.tanh %0 : tensor<4xf32>
  %2 = stablehlo.add %1, %a : tensor<4xf32>
  func.return %2 : tensor<4xf32>
}}
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {{
{calls}
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %r:2 = stablehlo.while(%i = %c0, %v = %y{layers - 1}) : tensor<i32>, tensor<4xf32>
  cond {{
    %n = stablehlo.constant dense<3> : tensor<i32>
    %p = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  }} do {{
    %one = stablehlo.constant dense<1> : tensor<i32>
    %two = stablehlo.constant dense<2> : tensor<i32>
    %k = stablehlo.remainder %i, %two : tensor<i32>
    %s = "stablehlo.case"(%k) ({{
      stablehlo.return %v : tensor<4xf32>
    }}, {{
      %b = func.call @block(%v, %w0) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
      stablehlo.return %b : tensor<4xf32>
    }}) : (tensor<i32>) -> tensor<4xf32>
    %i1 = stablehlo.add %i, %one : tensor<i32>
    stablehlo.return %i1, %s : tensor<i32>, tensor<4xf32>
  }}
  func.return %r#1 : tensor<4xf32>
}}"""


def test_a_callee_is_traced_once_for_all_its_call_sites(monkeypatch):
    """The 48th call of a block is not traced again: a callee is traced once per signature
    (a jitted callee whose trace jax keeps), from the call sites in @main and from inside a
    loop body's case branch alike, and gradients and vmap reuse that trace."""
    import jax
    import jax.numpy as jnp
    from shlo2jax import translate

    from shlo2jax.ops import control_flow

    # (the block is a few ops: callees that small are inlined, ops/control_flow.call)
    monkeypatch.setattr(control_flow, "_INLINED_OPS", 0)
    layers = 48
    prog = shlo2jax.load(_repeated_blocks(layers))
    evaluated = {}
    real = translate.evaluate

    def counting(translator, region, args, outer_env):
        evaluated[id(region)] = evaluated.get(id(region), 0) + 1
        return real(translator, region, args, outer_env)
    monkeypatch.setattr(translate, "evaluate", counting)

    def reference(x):
        block = lambda a, w: jnp.tanh(a * w) + a  # noqa: E731
        for i in range(layers):
            x = block(x, (i + 1) / layers)
        for i in range(3):
            x = block(x, 1 / layers) if i % 2 else x
        return x

    x = np.array([0.5, -1.0, 2.0, 0.25], np.float32)
    np.testing.assert_allclose(np.asarray(prog(x)), reference(x), rtol=1e-5)
    block = prog.module.functions["block"].body
    assert evaluated[id(block)] == 1
    assert max(evaluated.values()) == 1
    traced = dict(evaluated)
    loss = lambda f: lambda x: jnp.sum(f(x) ** 2)  # noqa: E731
    np.testing.assert_allclose(np.asarray(jax.grad(loss(prog))(x)),
                               jax.grad(loss(reference))(x), rtol=1e-5)
    batch = np.stack([x, -x, 2 * x])
    np.testing.assert_allclose(np.asarray(jax.vmap(prog)(batch)), jax.vmap(reference)(batch),
                               rtol=1e-5)
    assert evaluated == traced  # nothing traced again


_ELEMENTWISE = """
func.func private @f(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = stablehlo.multiply %a, %b : tensor<2x3xf32>
  %1 = stablehlo.add %0, %a : tensor<2x3xf32>
  %2 = stablehlo.tanh %1 : tensor<2x3xf32>
  %3 = stablehlo.exponential %2 : tensor<2x3xf32>
  %4 = stablehlo.log_plus_one %3 : tensor<2x3xf32>
  %5 = stablehlo.subtract %4, %b : tensor<2x3xf32>
  %6 = stablehlo.maximum %5, %a : tensor<2x3xf32>
  %7 = stablehlo.rsqrt %3 : tensor<2x3xf32>
  %8 = stablehlo.multiply %6, %7 : tensor<2x3xf32>
  %9 = stablehlo.reshape %8 : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %10 = stablehlo.transpose %9, dims = [1, 0] : (tensor<3x2xf32>) -> tensor<2x3xf32>
  %11 = stablehlo.slice %10 [0:2, 1:3] : (tensor<2x3xf32>) -> tensor<2x2xf32>
  %12 = stablehlo.broadcast_in_dim %11, dims = [0, 1] : (tensor<2x2xf32>) -> tensor<2x2xf32>
  %13 = stablehlo.broadcast_in_dim %12, dims = [0, 2] : (tensor<2x2xf32>) -> tensor<2x3x2xf32>
  %14 = stablehlo.reshape %13 : (tensor<2x3x2xf32>) -> tensor<2x6xf32>
  %15 = stablehlo.slice %14 [0:2, 0:6:2] : (tensor<2x6xf32>) -> tensor<2x3xf32>
  %16 = stablehlo.divide %15, %b : tensor<2x3xf32>
  %17 = stablehlo.compare GT, %16, %a : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xi1>
  %18 = stablehlo.select %17, %16, %10 : tensor<2x3xi1>, tensor<2x3xf32>
  %19 = stablehlo.abs %18 : tensor<2x3xf32>
  func.return %19 : tensor<2x3xf32>
}
func.func @main(%x: tensor<2x3xf32>, %y: tensor<2x3xf32>, %i: tensor<2x3xi32>,
                %p: tensor<2x3xi1>, %d: tensor<3xf64>) -> (tensor<2x3xf32>, tensor<2x3xi32>,
                                                            tensor<2x3xi1>, tensor<3xf64>) {
  %c = stablehlo.constant dense<0.5> : tensor<2x3xf32>
  %0 = func.call @f(%x, %y) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %1 = func.call @f(%0, %y) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %2 = stablehlo.multiply %1, %c : tensor<2x3xf32>
  %3 = stablehlo.add %2, %1 : tensor<2x3xf32>
  %4 = stablehlo.multiply %i, %i : tensor<2x3xi32>
  %5 = stablehlo.add %4, %i : tensor<2x3xi32>
  %6 = stablehlo.shift_left %5, %i : tensor<2x3xi32>
  %7 = stablehlo.add %p, %p : tensor<2x3xi1>
  %8 = stablehlo.multiply %7, %p : tensor<2x3xi1>
  %9 = stablehlo.log %d : tensor<3xf64>
  %10 = stablehlo.tan %9 : tensor<3xf64>
  %11 = stablehlo.add %10, %d : tensor<3xf64>
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %w:2 = stablehlo.while(%k = %c0, %v = %3) : tensor<i32>, tensor<2x3xf32>
  cond {
    %n = stablehlo.constant dense<2> : tensor<i32>
    %p2 = stablehlo.compare LT, %k, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %p2 : tensor<i1>
  } do {
    %one = stablehlo.constant dense<1> : tensor<i32>
    %k1 = stablehlo.add %k, %one : tensor<i32>
    %v1 = stablehlo.multiply %v, %v : tensor<2x3xf32>
    %v2 = stablehlo.tanh %v1 : tensor<2x3xf32>
    stablehlo.return %k1, %v2 : tensor<i32>, tensor<2x3xf32>
  }
  func.return %w#1, %6, %8, %11 : tensor<2x3xf32>, tensor<2x3xi32>, tensor<2x3xi1>, tensor<3xf64>
}"""


def _jaxpr_ways(args, loss) -> dict:
    """The jaxprs a replay must leave unchanged, by way of tracing a program: forward on
    `args`, the gradient of `loss(program)` in the first two arguments, vmap over the first."""
    import jax
    return {
        "forward": lambda prog: jax.make_jaxpr(lambda *a: prog(*a))(*args),
        "grad": lambda prog: jax.make_jaxpr(jax.grad(loss(prog), argnums=(0, 1)))(*args[:2]),
        "vmap": lambda prog: jax.make_jaxpr(jax.vmap(lambda x: prog(x, *args[1:])[0]))(
            np.stack([args[0]] * 4)),
    }


@pytest.mark.parametrize("gradients", ["lax", "strong_zero"])
def test_replayed_equations_are_the_traced_ones(gradients):
    """Ops whose equation is replayed (compat.EquationReplay: elementwise, compare, reshape,
    transpose, slice, broadcast_in_dim) give the jaxpr that binding every op gives, equation
    for equation, and so the same forward values, derivatives and batched values; on a jax
    without emit_eqn nothing is replayed."""
    import jax
    from shlo2jax import compat

    def programs():
        replayed = shlo2jax.load(_ELEMENTWISE, gradients=gradients)
        bound = shlo2jax.load(_ELEMENTWISE, gradients=gradients)
        bound.translator.replay = None
        return replayed, bound

    rng = np.random.default_rng(0)
    args = (rng.uniform(0.1, 1, (2, 3)).astype(np.float32),
            rng.uniform(0.1, 1, (2, 3)).astype(np.float32),
            rng.integers(0, 4, (2, 3)).astype(np.int32), rng.uniform(size=(2, 3)) > 0.5,
            rng.uniform(0.5, 1, 3))
    loss = lambda prog: lambda x, y: jax.numpy.sum(prog(x, y, *args[2:])[0])  # noqa: E731
    ways = _jaxpr_ways(args, loss)
    with compat.enable_x64():
        for way, make in ways.items():
            replayed, bound = programs()
            assert str(make(replayed)) == str(make(bound)), way
            if compat.equation_replay() is not None:  # the replay did run, for each kind
                learned = {entry[0].name for entry in replayed.translator.replay._learned.values()}
                assert {"mul", "add", "tanh", "reshape", "transpose", "slice", "broadcast_in_dim",
                        "gt", "abs"} | ({"square"} if gradients == "strong_zero" else set()) <= {
                            name.split("_strong_zero")[0] for name in learned}, way
        replayed, bound = programs()
        for got, want in zip(replayed(*args), bound(*args)):
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
        np.testing.assert_array_equal(*(np.asarray(jax.grad(loss(p))(*args[:2]))
                                        for p in programs()))


def test_an_equation_on_one_value_passed_twice_is_replayed_on_one_value_only():
    """A call staging one equation on one value passed several times is replayed only where
    those arguments are again one value; elsewhere it is not (run again, and learned in its
    own order). Fewer operands than arguments (strong-zero `x * x`: one `square` of x) use
    the first; as many (`x - x`, `x != x`) take them in turn."""
    import jax
    from jax import lax
    from shlo2jax import compat
    replay = compat.equation_replay()
    if replay is None:
        pytest.skip("this jax has no emit_eqn: nothing is replayed")
    seen = {}

    def f(x, y):
        seen["learned"] = replay.learn("neg", (x, x), lambda: lax.neg(x))
        seen["same"] = replay.emit("neg", (y, y))
        seen["other"] = replay.emit("neg", (x, y))
        replay.learn("sub", (x, x), lambda: lax.sub(x, x))
        seen["sub same"] = replay.emit("sub", (y, y))
        seen["sub other"] = replay.emit("sub", (x, y))
        replay.learn("sub", (x, y), lambda: lax.sub(y, x))  # (a rule taking them swapped)
        seen["sub swapped"] = replay.emit("sub", (y, x))
        return seen["same"]
    jaxpr = jax.make_jaxpr(f)(np.float32(1), np.float32(2))
    assert seen["same"] is not None and seen["other"] is None
    assert seen["sub same"] is not None and seen["sub other"] is None
    assert seen["sub swapped"] is not None
    x, y = jaxpr.jaxpr.invars
    assert [(e.primitive.name, e.invars) for e in jaxpr.eqns] == [
        ("neg", [x]), ("neg", [y]), ("sub", [x, x]), ("sub", [y, y]), ("sub", [y, x]),
        ("sub", [x, y])]


_CONSTANT_OPERANDS = """
func.func @main(%x: tensor<2x3xf32>, %y: tensor<f32>, %i: tensor<2x3xi32>)
    -> (tensor<2x3xf32>, tensor<f32>, tensor<2x3xi32>) {
  %h = stablehlo.constant dense<0.5> : tensor<2x3xf32>
  %z = stablehlo.constant dense<[[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]> : tensor<2x3xf32>
  %k = stablehlo.constant dense<3.0> : tensor<f32>
  %n = stablehlo.constant dense<[[1, 0, 2], [3, 4, 5]]> : tensor<2x3xi32>
  %0 = stablehlo.multiply %x, %h : tensor<2x3xf32>
  %1 = stablehlo.multiply %0, %z : tensor<2x3xf32>
  %2 = stablehlo.multiply %h, %1 : tensor<2x3xf32>
  %3 = stablehlo.multiply %2, %z : tensor<2x3xf32>
  %4 = stablehlo.add %3, %h : tensor<2x3xf32>
  %5 = stablehlo.divide %4, %z : tensor<2x3xf32>
  %6 = stablehlo.divide %5, %h : tensor<2x3xf32>
  %7 = stablehlo.divide %h, %6 : tensor<2x3xf32>
  %8 = stablehlo.compare GT, %7, %z : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xi1>
  %9 = stablehlo.compare GT, %7, %h : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xi1>
  %10 = stablehlo.and %8, %9 : tensor<2x3xi1>
  %s1 = stablehlo.select %10, %7, %z : tensor<2x3xi1>, tensor<2x3xf32>
  %s2 = stablehlo.select %9, %s1, %s1 : tensor<2x3xi1>, tensor<2x3xf32>
  %s3 = stablehlo.select %8, %s2, %7 : tensor<2x3xi1>, tensor<2x3xf32>
  %11 = stablehlo.select %9, %s3, %s2 : tensor<2x3xi1>, tensor<2x3xf32>
  %12 = stablehlo.broadcast_in_dim %k, dims = [] : (tensor<f32>) -> tensor<2x3xf32>
  %13 = stablehlo.multiply %11, %12 : tensor<2x3xf32>
  %14 = stablehlo.multiply %13, %z : tensor<2x3xf32>
  %15 = stablehlo.tanh %14 : tensor<2x3xf32>
  %16 = stablehlo.multiply %y, %k : tensor<f32>
  %17 = stablehlo.add %16, %k : tensor<f32>
  %18 = stablehlo.multiply %k, %17 : tensor<f32>
  %19 = stablehlo.divide %i, %n : tensor<2x3xi32>
  %20 = stablehlo.add %19, %n : tensor<2x3xi32>
  %21 = stablehlo.multiply %20, %n : tensor<2x3xi32>
  %w = stablehlo.constant dense<[[1.0, -2.0], [0.0, 0.5], [3.0, 1.5]]> : tensor<3x2xf32>
  %22 = stablehlo.dot_general %15, %w, contracting_dims = [1] x [0]
      : (tensor<2x3xf32>, tensor<3x2xf32>) -> tensor<2x2xf32>
  %23 = stablehlo.dot_general %22, %15, contracting_dims = [0] x [0]
      : (tensor<2x2xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %24 = stablehlo.dot_general %23, %w, contracting_dims = [1] x [0]
      : (tensor<2x3xf32>, tensor<3x2xf32>) -> tensor<2x2xf32>
  %25 = stablehlo.dot_general %24, %23, contracting_dims = [0] x [0]
      : (tensor<2x2xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %one = stablehlo.constant dense<1.0> : tensor<f32>
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %r0 = stablehlo.reduce(%25 init: %zero) applies stablehlo.add across dimensions = [1]
      : (tensor<2x3xf32>, tensor<f32>) -> tensor<2xf32>
  %r1 = stablehlo.reduce(%23 init: %one) applies stablehlo.add across dimensions = [1]
      : (tensor<2x3xf32>, tensor<f32>) -> tensor<2xf32>
  %r2 = stablehlo.reduce(%15 init: %zero) applies stablehlo.add across dimensions = [1]
      : (tensor<2x3xf32>, tensor<f32>) -> tensor<2xf32>
  %r3 = stablehlo.reduce(%7 init: %ninf) applies stablehlo.maximum across dimensions = [1]
      : (tensor<2x3xf32>, tensor<f32>) -> tensor<2xf32>
  %r4 = stablehlo.reduce(%14 init: %ninf) applies stablehlo.maximum across dimensions = [1]
      : (tensor<2x3xf32>, tensor<f32>) -> tensor<2xf32>
  %r5 = stablehlo.reduce(%x init: %one) applies stablehlo.add across dimensions = [1]
      : (tensor<2x3xf32>, tensor<f32>) -> tensor<2xf32>
  %q0 = stablehlo.add %r0, %r1 : tensor<2xf32>
  %q1 = stablehlo.add %q0, %r2 : tensor<2xf32>
  %q2 = stablehlo.add %q1, %r3 : tensor<2xf32>
  %q3 = stablehlo.add %q2, %r4 : tensor<2xf32>
  %q4 = stablehlo.add %q3, %r5 : tensor<2xf32>
  %26 = stablehlo.broadcast_in_dim %q4, dims = [0] : (tensor<2xf32>) -> tensor<2x3xf32>
  %27 = stablehlo.multiply %25, %26 : tensor<2x3xf32>
  func.return %27, %18, %21 : tensor<2x3xf32>, tensor<f32>, tensor<2x3xi32>
}"""


@pytest.mark.parametrize("gradients", ["lax", "strong_zero"])
def test_replayed_equations_with_constant_operands_are_the_traced_ones(gradients):
    """Ops with a constant (numpy) operand are replayed per constant (strong-zero `mul`
    and `div` decide by the constant's values: a constant with a zero, and one without, of
    the same type), staged as bind stages it (an array constant: one constvar for its uses;
    a scalar: a literal); dot_general (gradients.dot_general's primitive), select (its
    equation takes (pred, on_false, on_true)) and monoid reduces (from the identity: one
    equation without the init; from another init of the same type: more) too: the jaxpr
    binding every op gives, forward, `grad` and `vmap`."""
    import jax
    from shlo2jax import compat

    def programs():
        replayed = shlo2jax.load(_CONSTANT_OPERANDS, gradients=gradients)
        bound = shlo2jax.load(_CONSTANT_OPERANDS, gradients=gradients)
        bound.translator.replay = None
        return replayed, bound

    rng = np.random.default_rng(1)
    args = (rng.uniform(0.1, 1, (2, 3)).astype(np.float32), np.float32(0.7),
            rng.integers(-4, 4, (2, 3)).astype(np.int32))
    loss = lambda prog: lambda x, y: jax.numpy.sum(prog(x, y, args[2])[0]) + prog(  # noqa: E731
        x, y, args[2])[1]
    ways = _jaxpr_ways(args, loss)
    with compat.enable_x64():
        for way, make in ways.items():
            replayed, bound = programs()
            assert str(make(replayed)) == str(make(bound)), way
            replay = replayed.translator.replay
            if replay is not None and compat.replay._BIND_CANONICAL is not None and way == "forward":
                constants = {id(c) for c, _ in replay._constant_avals.values()}
                with_constants = [k for k in replay._learned
                                  if any(type(i) is int and i in constants for i in k[1:])]
                assert len(with_constants) >= 8, way  # (two keys per learned equation)
                learned = {entry[0].name for entry in replay._learned.values()}
                assert {"dot_general", "select_n", "reduce_sum", "reduce_max"} <= {
                    n.split("_lhs")[0] for n in learned}, learned
        replayed, bound = programs()
        for got, want in zip(replayed(*args), bound(*args)):
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
        for got, want in zip(*(jax.grad(loss(p), argnums=(0, 1))(*args[:2])
                               for p in programs())):
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_an_op_of_constants_only_learned_while_tracing_runs_eagerly_too():
    """An op whose operands are all constants, learned while a jit traced it, is computed
    (not staged) when the same program runs with jit disabled."""
    import jax
    prog = shlo2jax.load("""
func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {
  %a = stablehlo.constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
  %b = stablehlo.constant dense<[0.5, 0.25, 4.0]> : tensor<3xf32>
  %0 = stablehlo.multiply %a, %b : tensor<3xf32>
  %1 = stablehlo.add %0, %x : tensor<3xf32>
  func.return %1 : tensor<3xf32>
}""")
    x = np.array([1.0, -1.0, 0.5], np.float32)
    want = np.array([1.5, -0.5, 12.5], np.float32)
    np.testing.assert_array_equal(np.asarray(jax.jit(prog)(x)), want)
    with jax.disable_jit():
        np.testing.assert_array_equal(np.asarray(prog(x)), want)


def test_monoid_reduce_stages_what_lax_reduce_stages():
    """compat.monoid_reduce (lax.reduce without the debug info a monoid reduction never
    uses) gives lax.reduce's jaxpr for each monoid, identity or other init, dtype and
    dimensions; a traced init (no monoid reducer) too."""
    import jax
    from jax import lax
    from shlo2jax import compat

    monoids = [lax.add, lax.mul, lax.max, lax.min, lax.bitwise_or, lax.bitwise_and]
    cases = 0
    for dtype in (np.float32, np.int32, np.uint8, np.bool_, np.complex64):
        spec = jax.ShapeDtypeStruct((3, 4), dtype)
        for fn, init, dims in itertools.product(monoids, (0, 1, -1, np.inf), ((1,), (0, 1))):
            with np.errstate(invalid="ignore"):
                value = np.array(init).astype(dtype)

            def jaxpr(reduce):
                try:
                    return str(jax.make_jaxpr(lambda x: reduce(x, value, fn, dims))(spec))
                except TypeError as e:  # (a monoid lax refuses for the dtype: refused alike)
                    return f"TypeError: {e}"
            assert jaxpr(lax.reduce) == jaxpr(compat.monoid_reduce), (dtype, fn, init, dims)
            cases += 1
    traced = jax.ShapeDtypeStruct((), np.float32)
    assert str(jax.make_jaxpr(lambda x, i: lax.reduce(x, i, lax.add, (1,)))(
        jax.ShapeDtypeStruct((3, 4), np.float32), traced)) == str(jax.make_jaxpr(
            lambda x, i: compat.monoid_reduce(x, i, lax.add, (1,)))(
                jax.ShapeDtypeStruct((3, 4), np.float32), traced))
    assert cases == 240


def test_a_constant_factor_is_scanned_once_while_it_lives(monkeypatch):
    """The plan asks whether a constant is finite and nonzero of every product by it
    (gradients.finite_nonzero_constant): an array is scanned once per question while it
    lives (by identity), an equal array again; the answer goes with the array."""
    import gc
    from shlo2jax import gradients
    scans = []
    scan = gradients._finite_nonzero
    monkeypatch.setattr(gradients, "_finite_nonzero",
                        lambda value, reciprocal: scans.append(reciprocal) or scan(value, reciprocal))
    factor = np.full((4,), 0.5, np.float32)
    with_zero = np.array([0.5, 0.0], np.float32)
    answers = [gradients.finite_nonzero_constant(v, r)
               for v, r in [(factor, False), (factor, False), (factor, True), (factor, True),
                            (with_zero, False), (with_zero, False), (factor.copy(), False)]]
    assert answers == [True, True, True, True, False, False, True]
    assert scans == [False, True, False, False]
    assert gradients.finite_nonzero_constant(np.float32(2)) and len(scans) == 5  # (a scalar)
    keys = {(id(factor), False), (id(factor), True)}
    assert keys <= gradients._SCANNED.keys()
    del factor
    gc.collect()
    assert not keys & gradients._SCANNED.keys()
    assert (id(with_zero), False) in gradients._SCANNED


def test_a_failing_plan_time_view_is_reported_against_its_op(monkeypatch):
    # A `planned` view runs once per region before any op is evaluated; a bug in one (here
    # the range analysis, on whatever a malformed module holds) is the op's TranslationError,
    # as a handler's failure is, never a plain Python exception.
    import shlo2jax.ops._ranges as ranges

    def broken(*args, **kwargs):
        raise TypeError("broken range rule")
    monkeypatch.setattr(ranges, "value_range", broken)
    program = shlo2jax.load("""
func.func @main(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  %m = stablehlo.multiply %x, %y : tensor<4xf32> loc("the_product")
  return %m : tensor<4xf32>
}""")
    with pytest.raises(TranslationError, match="stablehlo.multiply.*broken range rule") as info:
        program(np.ones(4, np.float32), np.ones(4, np.float32))
    assert "the_product" in str(info.value)
