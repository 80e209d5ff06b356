"""A dropped program is freed: nothing shlo2jax holds, and none of jax's jit caches (which keep
a jaxpr for as long as the function it traced lives), keeps it, or its weights, once the user
lets it go (issue 32; benchmarks/memory.py measures the memory that comes back)."""

import gc
import weakref

import jax
import jax.extend.core as jax_core
import numpy as np
import pytest

import shlo2jax

TEXT = """func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c = stablehlo.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %0 = stablehlo.multiply %x, %c : tensor<4xf32>
  %1 = stablehlo.custom_call @mhlo.erf(%0) : (tensor<4xf32>) -> tensor<4xf32>
  return %1 : tensor<4xf32>
}"""


def _exported() -> bytes:
    w = np.linspace(-1, 1, 16, dtype=np.float32).reshape(4, 4)
    exported = jax.export.export(jax.jit(lambda x: jax.numpy.tanh(x @ w)))(
        jax.ShapeDtypeStruct((4,), np.float32))
    return exported.serialize()


@pytest.mark.parametrize("lowering", ["translate", "direct"])
@pytest.mark.parametrize("source", ["text", "jax.export"])
def test_a_dropped_program_is_freed_after_calls_jit_and_grad(lowering, source):
    program = shlo2jax.load(TEXT if source == "text" else _exported(), lowering=lowering)
    fn = program["main"]
    assert fn.lowering == lowering, fn.lowering_note
    x = np.linspace(0.1, 0.4, 4, dtype=np.float32)
    jax.block_until_ready(fn(x))
    jax.block_until_ready(jax.jit(fn)(x))
    jax.block_until_ready(jax.grad(lambda v: fn(v).sum())(x))
    jax.block_until_ready(jax.vmap(fn)(np.stack([x, x])))
    held = [weakref.ref(program), weakref.ref(fn)]
    if lowering == "direct":  # (jax's abstract evaluation cache keeps the callee, a handle)
        held.append(weakref.ref(fn.executable.state))
    del program, fn
    gc.collect()
    assert [ref() for ref in held] == [None] * len(held)


def test_a_jaxpr_kept_beyond_its_direct_program_says_so():
    """The direct-call primitive's param holds its function's module and translation weakly
    (so that jax's caches, which keep params, do not keep a dropped program's weights): a
    jaxpr kept after the program went is a shlo2jax error when lowered or differentiated."""
    from shlo2jax.errors import Shlo2JaxError
    program = shlo2jax.load(TEXT, lowering="direct")
    x = np.linspace(0.1, 0.4, 4, dtype=np.float32)
    closed = jax.make_jaxpr(program.entry)(x)
    del program
    gc.collect()
    run = jax_core.jaxpr_as_fun(closed)
    with pytest.raises(Shlo2JaxError, match="the program of @main was dropped"):
        jax.jit(run)(x)
    with pytest.raises(Shlo2JaxError, match="the program of @main was dropped"):
        jax.grad(lambda v: run(v)[0].sum())(x)


def test_a_dropped_polymorphic_program_is_freed():
    """A program with `?` dimensions keeps a specialisation per shape: they go with it."""
    program = shlo2jax.load("""func.func @main(%x: tensor<?xf32>) -> tensor<?xf32> {
  %0 = stablehlo.sine %x : tensor<?xf32>
  return %0 : tensor<?xf32>
}""")
    fn = program.entry
    for n in (3, 4):
        x = np.linspace(0, 1, n, dtype=np.float32)
        jax.block_until_ready((fn(x), jax.jit(fn)(x), jax.grad(lambda v: fn(v).sum())(x)))
    held = [weakref.ref(program), weakref.ref(fn)]
    del program, fn
    gc.collect()
    assert [ref() for ref in held] == [None, None]
