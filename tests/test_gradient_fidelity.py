"""Gradients through an export equal the producer's own.

Every module here is written by jax.export from JAX's own functions (the producer), and
the reference gradient is `jax.grad` of the source function: the exporter decomposed the
special functions into polynomial branches and series loops, and the translation's
derivative of what was exported must still agree with the producer's derivative rules.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import jax.scipy.special as jsp
import numpy as np
import pytest
from jax import lax
from jax.test_util import check_grads

import shlo2jax
from shlo2jax.errors import TranslationError


def _roundtrip(fn, *args, **option_values):
    """fn exported by jax.export, serialized, and loaded back."""
    specs = [jax.ShapeDtypeStruct(np.shape(a), np.asarray(a).dtype) for a in args]
    exported = jax.export.export(jax.jit(fn))(*specs)
    return shlo2jax.load(exported.serialize(), **option_values).entry


def _assert_grads_agree(got, want, rtol=1e-4):
    got, want = np.asarray(got), np.asarray(want)
    finite = np.isfinite(want)
    assert np.all(np.isfinite(got[finite])), \
        f"non-finite gradient where the producer's is finite: {got[finite & ~np.isfinite(got)]}"
    scale = np.max(np.abs(want[finite]), initial=0.0)
    err = np.max(np.abs(got[finite] - want[finite]), initial=0.0)
    assert err <= rtol * max(scale, np.finfo(want.dtype).tiny), (err, scale)


# ---------------------------------------------------------------- strong zeros

def _where_problem(x):
    # The unselected branch overflows (1/x at 0, exp of it): its cotangent is exactly zero.
    return jnp.where(x > 0, jnp.exp(1.0 / x), 0.0 * x)


X = np.array([-1.0, 0.0, 0.5, 2.0, 3.0, -0.0], np.float32)


def test_zero_cotangent_times_infinite_derivative_is_zero():
    fn = _roundtrip(_where_problem, X)
    grad = jax.grad(lambda x: fn(x).sum())(X)
    safe = np.where(X > 0, X, 1)
    _assert_grads_agree(grad, np.where(X > 0, -np.exp(1 / safe) / safe ** 2, 0))
    assert grad[1] == 0 and grad[0] == 0


def test_lax_gradients_option_restores_plain_rules():
    fn = _roundtrip(_where_problem, X, gradients="lax")
    grad = jax.grad(lambda x: fn(x).sum())(X)
    assert np.isnan(grad[1])  # 0 * inf, as jax itself computes it for this module


def test_bad_gradients_option():
    with pytest.raises(ValueError, match="gradients must be one of"):
        shlo2jax.load("func.func @main(%x: tensor<f32>) -> tensor<f32> { return %x : tensor<f32> }",
                      gradients="zero")


@pytest.mark.slow
def test_strong_zero_second_order_jit_vmap():
    fn = _roundtrip(_where_problem, X)
    second = jax.jit(jax.grad(lambda x: jax.grad(lambda v: fn(v).sum())(x).sum()))(X)
    assert np.all(np.isfinite(second))
    safe = np.where(X > 0, X, 1).astype(np.float64)
    want = np.where(X > 0, np.exp(1 / safe) * (1 / safe ** 4 + 2 / safe ** 3), 0)
    np.testing.assert_allclose(second, want, rtol=1e-5)
    batch = np.stack([X, X + 1, X - 1])
    per_example = jax.vmap(jax.grad(lambda x: fn(x).sum()))(batch)
    loop = np.stack([jax.grad(lambda x: fn(x).sum())(b) for b in batch])
    np.testing.assert_array_equal(per_example, loop)
    hessian = jax.hessian(lambda x: fn(x).sum())(X)
    assert np.all(np.isfinite(hessian))


def test_strong_zero_forward_mode():
    fn = _roundtrip(_where_problem, X)
    tangent = np.zeros_like(X)
    tangent[2] = 1
    _, out = jax.jvp(fn, (X,), (tangent,))
    assert np.all(np.isfinite(out)) and out[1] == 0
    np.testing.assert_allclose(out[2], -np.exp(2.0) * 4, rtol=1e-5)


def test_strong_zero_values_and_lowering_are_unchanged():
    # The forward values are the spec's: a primal 0 * inf is still NaN.
    fn = _roundtrip(lambda x, y: x * y, np.float32([0.0]), np.float32([np.inf]))
    assert np.isnan(fn(np.float32([0.0]), np.float32([np.inf])))[0]
    from shlo2jax.export import translated_stablehlo
    text = translated_stablehlo(_roundtrip(lambda x: jnp.exp(x) / x, np.float32([1.0, 2.0])))
    assert "stablehlo.exponential" in text and "stablehlo.divide" in text
    assert "stablehlo.select" not in text  # only derivatives get the strong-zero selects


def test_strong_zero_under_shard_map():
    fn = _roundtrip(_where_problem, X)
    mesh = jax.make_mesh((1,), ("x",))
    spec = jax.sharding.PartitionSpec("x")

    grad_sharded = jax.jit(jax.shard_map(jax.grad(lambda v: fn(v).sum()), mesh=mesh,
                                         in_specs=spec, out_specs=spec))
    x = jax.device_put(X, jax.sharding.NamedSharding(mesh, spec))
    np.testing.assert_array_equal(grad_sharded(x), jax.grad(lambda x: fn(x).sum())(X))


# ---------------------------------------------------------------- special functions

POSITIVE = np.linspace(0.3, 5.0, 12).astype(np.float32)
REAL = np.linspace(-3.7, 3.9, 16).astype(np.float32)  # no point on a kink (0)
UNIT = np.linspace(-0.93, 0.95, 12).astype(np.float32)
PROB = np.linspace(0.03, 0.97, 12).astype(np.float32)

# Series and continued fractions are data-dependent loops; float64 takes more terms.
TRIPS = {"max_loop_trips": 1000}


class Special:
    """A special function, its arguments, how the producer differentiates it ("rev":
    jax.grad; "fwd": forward mode only, as jax cannot reverse-differentiate its loop;
    None: jax has no derivative rule, so the reference is numerical) and w.r.t. what."""

    def __init__(self, fn, args, producer="rev", argnums=None, **option_values):
        self.fn, self.args, self.producer = fn, args, producer
        self.argnums = tuple(range(len(args))) if argnums is None else argnums
        self.option_values = option_values


SPECIAL = {
    "erf": Special(lax.erf, (REAL,)),
    "erfc": Special(lax.erfc, (REAL,)),
    "erf_inv": Special(lax.erf_inv, (UNIT,)),
    "gelu_exact": Special(functools.partial(jax.nn.gelu, approximate=False), (REAL,)),
    "lgamma": Special(lax.lgamma, (POSITIVE,)),
    "lgamma_negative": Special(lax.lgamma, (REAL - 0.5,)),
    "digamma": Special(lax.digamma, (POSITIVE,)),
    "polygamma": Special(lambda x: lax.polygamma(jnp.full_like(x, 1), x), (POSITIVE,)),
    "zeta": Special(lambda q: lax.zeta(jnp.full_like(q, 2.5), q), (POSITIVE,), producer=None),
    "igamma": Special(lax.igamma, (POSITIVE, POSITIVE[::-1] * 1.3), **TRIPS),
    "igammac": Special(lax.igammac, (POSITIVE, POSITIVE[::-1] * 1.3), **TRIPS),
    "igamma_grad_a": Special(lax.igamma_grad_a, (POSITIVE, POSITIVE[::-1]), producer=None,
                             **TRIPS),
    "random_gamma_grad": Special(lax.random_gamma_grad, (POSITIVE, POSITIVE[::-1]),
                                 producer="fwd", **TRIPS),
    "betainc": Special(jsp.betainc, (POSITIVE, POSITIVE[::-1], PROB), argnums=(2,), **TRIPS),
    "bessel_i0e": Special(lax.bessel_i0e, (REAL,)),
    "bessel_i1e": Special(lax.bessel_i1e, (REAL,)),
    "i0": Special(jsp.i0, (REAL,)),
    "i1": Special(jsp.i1, (REAL,)),
    "log_ndtr": Special(jsp.log_ndtr, (REAL * 3,)),
    "ndtr": Special(jsp.ndtr, (REAL,)),
    "ndtri": Special(jsp.ndtri, (PROB,)),
    "expit": Special(jsp.expit, (REAL * 10,)),
    "logit": Special(jsp.logit, (PROB,)),
    "xlogy": Special(jsp.xlogy, (POSITIVE, POSITIVE)),
    "xlog1py": Special(jsp.xlog1py, (POSITIVE, POSITIVE)),
    "entr": Special(jsp.entr, (PROB,)),
    "gammaln": Special(jsp.gammaln, (POSITIVE,)),
    "betaln": Special(jsp.betaln, (POSITIVE, POSITIVE[::-1])),
    "multigammaln": Special(lambda x: jsp.multigammaln(x + 2, 3), (POSITIVE,)),
    "spence": Special(jsp.spence, (POSITIVE,)),
    "expi": Special(jsp.expi, (POSITIVE,), **TRIPS),
    "exp1": Special(jsp.exp1, (POSITIVE,), **TRIPS),
    "log_softmax": Special(jax.nn.log_softmax, (REAL * 20,)),
    "logsumexp": Special(jsp.logsumexp, (REAL * 30,)),
    "softplus": Special(jax.nn.softplus, (REAL * 30,)),
}

# Series and continued fractions differentiated term by term converge to the derivative a
# little more slowly than their values converge to the function.
_LOOSER = {"random_gamma_grad": 2e-3}


def _weights(x):
    return jnp.linspace(0.5, 1.5, np.size(x)).reshape(np.shape(x)).astype(x.dtype)


def _loss(fn):
    return lambda *args: jnp.sum(fn(*args) * _weights(args[0]))


def _producer_grads(case):
    if case.producer == "rev":
        return jax.grad(_loss(case.fn), argnums=case.argnums)(*case.args)
    # forward mode, element by element (these functions are element-wise)
    grads = []
    for i in case.argnums:
        tangents = tuple(np.zeros_like(a) if j != i else np.ones_like(a)
                         for j, a in enumerate(case.args))
        _, t = jax.jvp(case.fn, case.args, tangents)
        grads.append(t * _weights(case.args[0]))
    return grads


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(n for n in SPECIAL if SPECIAL[n].producer))
def test_special_function_gradient_matches_producer(name):
    case = SPECIAL[name]
    translated = _roundtrip(case.fn, *case.args, **case.option_values)
    np.testing.assert_allclose(translated(*case.args), case.fn(*case.args), rtol=2e-6,
                               atol=1e-6)
    got = jax.grad(_loss(translated), argnums=case.argnums)(*case.args)
    for g, w in zip(got, _producer_grads(case)):
        _assert_grads_agree(g, w, rtol=_LOOSER.get(name, 1e-4))


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SPECIAL))
def test_special_function_check_grads_order_2(name):
    case = SPECIAL[name]
    with jax.enable_x64(True):
        args = tuple(np.asarray(a, np.float64) for a in case.args)
        translated = _roundtrip(case.fn, *args, **case.option_values)

        def fn(*diff):
            full = list(args)
            for i, d in zip(case.argnums, diff):
                full[i] = d
            return translated(*full)
        check_grads(fn, tuple(args[i] for i in case.argnums), order=2, modes=("fwd", "rev"),
                    atol=1e-4, rtol=1e-4, eps=1e-4)


# ---------------------------------------------------------------- data-dependent while loops

def _newton_sqrt(a):
    # a while loop whose trip count depends on the data: Newton's iteration to a tolerance
    def cond(state):
        x, _ = state
        return jnp.any(jnp.abs(x * x - a) > 1e-5 * a)

    def body(state):
        x, n = state
        return 0.5 * (x + a / x), n + 1

    x, n = lax.while_loop(cond, body, (a, 0))
    return x


A = np.array([2.0, 9.0, 0.25, 30.0], np.float32)


def test_data_dependent_loop_without_bound_names_the_option():
    fn = _roundtrip(_newton_sqrt, A)
    np.testing.assert_allclose(fn(A), np.sqrt(A), rtol=1e-5)
    with pytest.raises(TranslationError, match=r"stablehlo.while at .*max_loop_trips"):
        jax.grad(lambda a: fn(a).sum())(A)
    # forward mode goes through the loop as it is
    _, tangent = jax.jvp(fn, (A,), (np.ones_like(A),))
    np.testing.assert_allclose(tangent, 0.5 / np.sqrt(A), rtol=1e-4)


def test_data_dependent_loop_with_user_bound():
    fn = _roundtrip(_newton_sqrt, A, max_loop_trips=50)
    grad = jax.grad(lambda a: fn(a).sum())(A)
    np.testing.assert_allclose(grad, 0.5 / np.sqrt(A), rtol=1e-4)
    per_example = jax.vmap(jax.grad(lambda a: fn(a).sum()))(np.stack([A, A * 2]))
    np.testing.assert_allclose(per_example[1], 0.5 / np.sqrt(A * 2), rtol=1e-4)
    hessian = jnp.diag(jax.hessian(lambda a: fn(a).sum())(A))
    np.testing.assert_allclose(hessian, -0.25 * A ** -1.5, rtol=1e-3)


def test_bound_by_location_and_too_small_a_bound():
    fn = _roundtrip(_newton_sqrt, A, max_loop_trips=2)
    grad = jax.grad(lambda a: fn(a).sum())(A)
    assert np.all(np.isnan(grad))  # the loop needs more than 2 trips: loudly wrong
    fn = _roundtrip(_newton_sqrt, A)
    location = next(op.location for op in fn.program.module.ops if op.name == "stablehlo.while")
    fn = _roundtrip(_newton_sqrt, A, max_loop_trips={location: 60})
    np.testing.assert_allclose(jax.grad(lambda a: fn(a).sum())(A), 0.5 / np.sqrt(A), rtol=1e-4)


def test_provable_bound_from_a_counter_in_the_condition():
    def capped(a):
        def cond(state):
            x, i = state
            return (i < 40) & jnp.any(jnp.abs(x * x - a) > 1e-5 * a)

        def body(state):
            x, i = state
            return 0.5 * (x + a / x), i + 1
        return lax.while_loop(cond, body, (a, 0))[0]

    fn = _roundtrip(capped, A)  # no max_loop_trips: `i < 40` bounds it
    np.testing.assert_allclose(jax.grad(lambda a: fn(a).sum())(A), 0.5 / np.sqrt(A), rtol=1e-4)


@pytest.mark.parametrize("direction,start,limit,step,trips", [
    ("LT", 0, 10, 1, 10), ("LE", 0, 10, 3, 4), ("GT", 10, 0, -2, 5), ("GE", 5, 5, -1, 1),
    ("LT", 5, 0, 1, 0), ("LT", 0, 10, -1, None), ("LT", 0, 10, 0, None),
])
def test_trip_bound(direction, start, limit, step, trips):
    from shlo2jax.ops.control_flow import CounterBound, _trip_bound
    bound = CounterBound(0, direction, ("value", np.int32(limit)), ("value", np.int32(abs(step))),
                         step < 0)
    assert _trip_bound(bound, np.asarray(np.int32(start)), {}) == trips
    fbound = CounterBound(0, direction, ("value", np.float32(limit)),
                          ("value", np.float32(abs(step))), step < 0)
    if trips is not None:
        assert _trip_bound(fbound, np.asarray(np.float32(start)), {}) == trips


# ---------------------------------------------------------------- the producer's VJP

@jax.custom_vjp
def _clipped_identity(x):
    return x


_clipped_identity.defvjp(lambda x: (x, None), lambda _, ct: (jnp.clip(ct, -0.5, 0.5),))


def _with_custom_rule(x):
    return jnp.sin(_clipped_identity(x) * 2.0)


def test_serialized_vjp_is_used_for_reverse_mode():
    x = np.linspace(-1, 1, 5).astype(np.float32)
    exported = jax.export.export(jax.jit(_with_custom_rule))(jax.ShapeDtypeStruct(x.shape, x.dtype))
    blob = exported.serialize(vjp_order=1)
    fn = shlo2jax.load(blob).entry
    assert fn.uses_producer_vjp
    loss = lambda v: (fn(v) * 3.0).sum()
    want = jax.grad(lambda v: (_with_custom_rule(v) * 3.0).sum())(x)  # the producer's rule
    np.testing.assert_allclose(jax.grad(loss)(x), want, rtol=1e-6)
    plain = shlo2jax.load(blob, producer_vjp=False).entry
    assert not plain.uses_producer_vjp
    translated = jax.grad(lambda v: (plain(v) * 3.0).sum())(x)
    np.testing.assert_allclose(translated, 6 * np.cos(2 * x), rtol=1e-5)  # the true derivative
    assert not np.allclose(translated, want)
    # forward mode is the translation's; vmap of reverse mode uses the producer's VJP
    _, tangent = jax.jvp(fn, (x,), (np.ones_like(x),))
    np.testing.assert_allclose(tangent, 2 * np.cos(2 * x), rtol=1e-5)
    batched = jax.vmap(jax.grad(loss))(np.stack([x, x]))
    np.testing.assert_allclose(batched[0], want, rtol=1e-6)
    assert jax.jit(jax.grad(loss))(x).shape == x.shape


def test_exported_signature_drops_unused_and_platform_index():
    def f(x, unused, y):
        return jnp.sin(x) * y.sum(), y.astype(jnp.int32)
    specs = [jax.ShapeDtypeStruct((4, 3), np.float32), jax.ShapeDtypeStruct((2,), np.float32),
             jax.ShapeDtypeStruct((4,), np.float32)]
    x, u, y = (np.random.default_rng(0).standard_normal(s.shape).astype(np.float32) for s in specs)
    for platforms in (None, ("cuda", "cpu")):
        exported = jax.export.export(jax.jit(f), platforms=platforms)(*specs)
        fn = shlo2jax.load(exported.serialize(vjp_order=1)).entry
        assert [a.shape for a in fn.in_avals] == [(4, 3), (2,), (4,)]
        out, ints = fn(x, u, y)
        np.testing.assert_allclose(out, np.sin(x) * y.sum(), rtol=1e-5)
        gx, gu, gy = jax.grad(lambda *a: fn(*a)[0].sum(), argnums=(0, 1, 2))(x, u, y)
        np.testing.assert_array_equal(gu, 0)
        np.testing.assert_allclose(gx, np.cos(x) * y.sum(), rtol=1e-5)
