"""shlo2jax.primitives: the counted loop (a while loop of a known trip count, lowered as the
loop and differentiated as the scan of its trips), checked against lax.fori_loop, the scan
it stood for, under every transformation a user applies to a translated program. The
scatter and rng_bit_generator primitives are checked by their ops (tests/ops/test_indexing.py,
tests/ops/test_random.py).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.sharding import PartitionSpec as P

import shlo2jax
from shlo2jax.primitives import counted_loop

from _helpers import nested_primitives, staged_jaxpr

COUNTED = "shlo2jax_counted_loop"


def _step(w):
    """One trip of a small recurrent block: a float carry, a second one it feeds and an
    integer one (which has no tangent)."""
    def step(i, carry):
        h, s, n = carry
        return jnp.tanh(h * w[i] + s), s * 0.9 + h, n + i
    return step


def _reference(x, w):
    return lax.fori_loop(1, 5, _step(w), (x, 2 * x, np.int32(3)))


def _counted(x, w):
    return counted_loop(_step(w), 1, 5, (x, 2 * x, np.int32(3)), np.dtype(np.int32))


X, W = jnp.linspace(-1.0, 1.0, 3), jnp.linspace(0.5, 1.5, 6)


def _floats(f):
    return lambda x, w: jnp.sum(f(x, w)[0] ** 2) + jnp.sum(f(x, w)[1])


def test_a_counted_loop_stages_one_while_loop_and_no_scan():
    jaxpr = jax.make_jaxpr(_counted)(X, W).jaxpr
    names = nested_primitives(jaxpr)
    assert names.count(COUNTED) == 1 and "scan" not in names and "while" not in names
    text = jax.jit(_counted).lower(X, W).as_text()
    assert text.count("stablehlo.while") == 1
    for got, want in zip(jax.jit(_counted)(X, W), _reference(X, W)):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("how", ["grad", "grad of jit", "jit of grad"])
def test_reverse_mode_is_the_scans(how):
    grad = {"grad": lambda f: jax.grad(_floats(f), argnums=(0, 1)),
            "grad of jit": lambda f: jax.grad(_floats(jax.jit(f)), argnums=(0, 1)),
            "jit of grad": lambda f: jax.jit(jax.grad(_floats(f), argnums=(0, 1)))}[how]
    for got, want in zip(grad(_counted)(X, W), grad(_reference)(X, W)):
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_forward_mode_and_second_order_are_the_scans():
    for transform in (jax.jacfwd, jax.hessian):
        got = transform(_floats(jax.jit(_counted)))(X, W)
        want = transform(_floats(_reference))(X, W)
        np.testing.assert_allclose(got, want, rtol=1e-5)
    _, tangents = jax.jvp(jax.jit(_counted), (X, W), (jnp.ones_like(X), jnp.zeros_like(W)))
    _, expected = jax.jvp(_reference, (X, W), (jnp.ones_like(X), jnp.zeros_like(W)))
    np.testing.assert_allclose(tangents[0], expected[0], rtol=1e-6)
    assert tangents[2].dtype == jax.dtypes.float0  # the integer carry has none


def test_a_batch_is_the_scans():
    xs = jnp.stack([X, -X, 2 * X])
    for got, want in zip(jax.vmap(jax.jit(_counted), (0, None))(xs, W),
                         jax.vmap(_reference, (0, None))(xs, W)):
        np.testing.assert_allclose(got, want, rtol=1e-6)
    per_example = jax.vmap(jax.grad(_floats(jax.jit(_counted))), (0, None))(xs, W)
    np.testing.assert_allclose(per_example, jax.vmap(jax.grad(_floats(_reference)), (0, None))(
        xs, W), rtol=1e-6)


def test_under_checkpoint_and_shard_map():
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:1]), ("batch",))
    for wrap in (jax.checkpoint,
                 lambda f: jax.shard_map(f, mesh=mesh, in_specs=(P("batch"), P()),
                                         out_specs=(P("batch"), P("batch"), P()))):
        got = jax.jit(jax.grad(_floats(wrap(_counted))))(X, W)
        np.testing.assert_allclose(got, jax.grad(_floats(_reference))(X, W), rtol=1e-6)


def _program(trips: int, carried_weights: bool = False):
    """A StableHLO counted loop as jax exports fori_loop: `h = tanh(h * w[i] + h)`; with
    `carried_weights`, the weights carried through the loop unchanged (as jax exports a scan's
    stacked inputs) rather than captured."""
    w_type = f"tensor<{trips}xf32>"
    carried, carried_type, returned = (
        (", %w = %w0", f", {w_type}", ", %w") if carried_weights else ("", "", ""))
    return shlo2jax.load(f"""func.func @main(%h0: tensor<3xf32>, %w{"0" if carried_weights else ""}: {w_type})
        -> tensor<3xf32> {{
      %zero = stablehlo.constant dense<0> : tensor<i32>
      %0:{3 if carried_weights else 2} = stablehlo.while(%i = %zero, %h = %h0{carried})
          : tensor<i32>, tensor<3xf32>{carried_type}
      cond {{
        %n = stablehlo.constant dense<{trips}> : tensor<i32>
        %c = stablehlo.compare LT, %i, %n : (tensor<i32>, tensor<i32>) -> tensor<i1>
        stablehlo.return %c : tensor<i1>
      }} do {{
        %one = stablehlo.constant dense<1> : tensor<i32>
        %wi = stablehlo.dynamic_slice %w, %i, sizes = [1] : ({w_type}, tensor<i32>) -> tensor<1xf32>
        %ws = stablehlo.reshape %wi : (tensor<1xf32>) -> tensor<f32>
        %wb = stablehlo.broadcast_in_dim %ws, dims = [] : (tensor<f32>) -> tensor<3xf32>
        %m = stablehlo.multiply %h, %wb : tensor<3xf32>
        %a = stablehlo.add %m, %h : tensor<3xf32>
        %t = stablehlo.tanh %a : tensor<3xf32>
        %next = stablehlo.add %i, %one : tensor<i32>
        stablehlo.return %next, %t{returned} : tensor<i32>, tensor<3xf32>{carried_type}
      }}
      return %0#1 : tensor<3xf32>
    }}""")


def test_a_translated_counted_loop_is_one_and_differentiates_as_its_scan():
    program, w = _program(4), W[:4]

    def reference(h, w):
        return lax.fori_loop(0, 4, lambda i, h: jnp.tanh(h * w[i] + h), h)

    names = nested_primitives(staged_jaxpr(program, X, w))
    assert COUNTED in names and "scan" not in names
    np.testing.assert_allclose(program(X, w), reference(X, w), rtol=1e-6)
    loss = lambda f: lambda h, w: jnp.sum(f(h, w) ** 2)  # noqa: E731
    for got, want in zip(jax.grad(loss(program), argnums=(0, 1))(X, w),
                         jax.grad(loss(reference), argnums=(0, 1))(X, w)):
        np.testing.assert_allclose(got, want, rtol=1e-5)


def _counted_eqns(jaxpr) -> list:
    return [eqn for eqn in jaxpr.eqns if eqn.primitive.name == COUNTED]


def test_a_forwarded_carry_is_a_constant_of_the_loop_body():
    # (what lax.while_loop makes of a value its body returns as it is given)
    def counted(x, w):
        return counted_loop(lambda i, c: (jnp.tanh(c[0] * c[1][i]), c[1]), 0, 4, (x, w),
                            np.dtype(np.int32), forwarded=(False, True))

    jaxpr = jax.make_jaxpr(counted)(X, W).jaxpr
    (eqn,) = _counted_eqns(jaxpr)
    assert eqn.params["body_nconsts"] == 1 and len(eqn.outvars) == 2  # (the counter, h)
    reference = lambda x, w: lax.fori_loop(  # noqa: E731
        0, 4, lambda i, c: (jnp.tanh(c[0] * c[1][i]), c[1]), (x, w))
    got, want = jax.jit(counted)(X, W), reference(X, W)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6)
    assert got[1] is W or np.array_equal(got[1], W)
    loss = lambda f: lambda x, w: jnp.sum(f(x, w)[0] ** 2)  # noqa: E731
    for got, want in zip(jax.grad(loss(counted), argnums=(0, 1))(X, W),
                         jax.grad(loss(reference), argnums=(0, 1))(X, W)):
        np.testing.assert_allclose(got, want, rtol=1e-5)


def test_a_carry_whose_type_the_body_changes_is_promoted_as_lax_promotes_it():
    # A weak-typed start value whose step returns a strong one: the loop is staged by
    # lax.while_loop, which promotes it, and is still the one counted loop.
    def counted(x):
        return counted_loop(lambda i, c: (c[0] * x,), 0, 3, (jnp.asarray(1.0),),
                            np.dtype(np.int32))[0]

    x = jnp.float32(1.5)
    assert jax.typeof(jnp.asarray(1.0)).weak_type and not jax.typeof(x).weak_type
    names = nested_primitives(jax.make_jaxpr(counted)(x).jaxpr)
    assert names.count(COUNTED) == 1 and "while" not in names
    np.testing.assert_allclose(jax.jit(counted)(x), x ** 3, rtol=1e-6)
    np.testing.assert_allclose(jax.grad(counted)(x), 3 * x ** 2, rtol=1e-5)


def test_a_translated_loop_takes_what_its_body_forwards_as_constants():
    program, w = _program(4, carried_weights=True), W[:4]
    (eqn,) = _counted_eqns(staged_jaxpr(program, X, w))
    assert eqn.params["body_nconsts"] >= 1 and len(eqn.outvars) == 2  # (the counter, h)
    reference = _program(4)
    np.testing.assert_array_equal(program(X, w), reference(X, w))
    loss = lambda f: lambda h, w: jnp.sum(f(h, w) ** 2)  # noqa: E731
    for got, want in zip(jax.grad(loss(program), argnums=(0, 1))(X, w),
                         jax.grad(loss(reference), argnums=(0, 1))(X, w)):
        np.testing.assert_allclose(got, want, rtol=1e-6)
    np.testing.assert_allclose(jax.vmap(program, in_axes=(0, None))(jnp.stack([X, -X]), w),
                               jnp.stack([reference(X, w), reference(-X, w)]), rtol=1e-6)


def test_under_disable_jit_a_counted_loop_runs_op_by_op():
    with jax.disable_jit():
        for got, want in zip(_counted(X, W), _reference(X, W)):
            np.testing.assert_allclose(got, want, rtol=1e-6)
        program, w = _program(4), W[:4]
        np.testing.assert_allclose(program(X, w), lax.fori_loop(
            0, 4, lambda i, h: jnp.tanh(h * w[i] + h), X), rtol=1e-6)
