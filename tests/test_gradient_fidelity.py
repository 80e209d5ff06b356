"""Gradients through an export equal the producer's own.

Every module here is written by jax.export from JAX's own functions (the producer), and
the reference gradient is `jax.grad` of the source function: the exporter decomposed the
special functions into polynomial branches and series loops, and the translation's
derivative of what was exported must still agree with the producer's derivative rules.
"""

from __future__ import annotations

import functools
import warnings

import jax
import jax.numpy as jnp
import jax.scipy.special as jsp
import numpy as np
import pytest
from jax import lax
from jax.test_util import check_grads

import shlo2jax
from shlo2jax import compat
from shlo2jax.errors import TranslationError
from shlo2jax.gradients import LoopBoundWarning


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
    with compat.enable_x64():
        args = tuple(np.asarray(a, np.float64) for a in case.args)
        translated = _roundtrip(case.fn, *args, **case.option_values)

        def fn(*diff):
            full = list(args)
            for i, d in zip(case.argnums, diff):
                full[i] = d
            return translated(*full)
        check_grads(fn, tuple(args[i] for i in case.argnums), order=2, modes=("fwd", "rev"),
                    atol=1e-4, rtol=1e-4, eps=1e-4)


# ---------------------------------------------------------------- jax.scipy.special, default options

# Every function jax.scipy.special exports that jax can differentiate, with arguments in its
# domain and the arguments differentiated (jax has no derivative for the others: integer
# orders, betainc's a and b). Their exports are series, continued fractions and
# Lentz iterations in data-dependent while loops (gammainc, gammaincc, exp1, expi, expn,
# hyp1f1, hyp2f1, betainc) or polynomial branches: all differentiate with default options.
N = 12
_POS = np.linspace(0.3, 5.0, N).astype(np.float32)
_REAL = np.linspace(-3.7, 3.9, N).astype(np.float32)
_INT2 = np.full(N, 2, np.int32)
SCIPY_SPECIAL = {
    "beta": ((_POS, _POS[::-1]), (0, 1)),
    "betainc": ((_POS, _POS[::-1], PROB), (2,)),
    "betaln": ((_POS, _POS[::-1]), (0, 1)),
    "dawsn": ((_REAL,), (0,)),
    "digamma": ((_POS,), (0,)),
    "erf": ((_REAL,), (0,)),
    "erfc": ((_REAL,), (0,)),
    "erfcx": ((_REAL,), (0,)),
    "erfinv": ((UNIT,), (0,)),
    "erfcinv": ((UNIT + 1,), (0,)),  # (jax >= 0.12)
    "exp1": ((_POS,), (0,)),
    "expi": ((_POS,), (0,)),
    "expn": ((_INT2, _POS), (1,)),
    "gamma": ((_POS,), (0,)),
    "gammainc": ((_POS, _POS[::-1] * 1.3), (0, 1)),
    "gammaincc": ((_POS, _POS[::-1] * 1.3), (0, 1)),
    "gammaln": ((_POS,), (0,)),
    "hyp1f1": ((_POS / 3, _POS[::-1] / 2, _POS / 4), (0, 1, 2)),
    "hyp2f1": ((_POS / 3, _POS[::-1] / 2, _POS + 1, PROB * 0.9), (0, 1, 2, 3)),
    "i0": ((_REAL,), (0,)),
    "i0e": ((_REAL,), (0,)),
    "i1": ((_REAL,), (0,)),
    "i1e": ((_REAL,), (0,)),
    "log_ndtr": ((_REAL * 3,), (0,)),
    "loggamma": ((_POS,), (0,)),
    "ndtr": ((_REAL,), (0,)),
    "ndtri": ((PROB,), (0,)),
    "owens_t": ((_REAL, _POS), (0, 1)),
    "poch": ((_POS, _POS[::-1]), (0, 1)),
    "polygamma": ((np.full(N, 1, np.int32), _POS), (1,)),
    "spence": ((_POS,), (0,)),
    "zeta": ((_POS + 1.5, _POS), (0, 1)),
    # elementary and normalising functions
    "boxcox": ((_POS, _POS / 5), (0, 1)),
    "boxcox1p": ((_POS, _POS / 5), (0, 1)),
    "comb": ((_POS + 4, _POS), (0, 1)),
    "entr": ((PROB,), (0,)),
    "expit": ((_REAL,), (0,)),
    "factorial": ((_POS,), (0,)),
    "kl_div": ((_POS, _POS[::-1]), (0, 1)),
    "log_softmax": ((_REAL,), (0,)),
    "logit": ((PROB,), (0,)),
    "logsumexp": ((_REAL,), (0,)),
    "multigammaln": ((_POS + 2, 3), (0,)),
    "rel_entr": ((_POS, _POS[::-1]), (0, 1)),
    "softmax": ((_REAL,), (0,)),
    "xlog1py": ((_POS, _POS), (0, 1)),
    "xlogy": ((_POS, _POS), (0, 1)),
}
# What jax.scipy.special exports and cannot differentiate (or not with real outputs)
NOT_DIFFERENTIABLE = {
    "bernoulli": "integer argument", "bessel_jn": "no derivative rule in jax",
    "fresnel": "tuple output, no derivative rule", "sici": "tuple output, no derivative rule",
    "sph_harm_y": "integer degrees, complex output", "wofz": "complex output",
    "gammasgn": "piecewise constant",
}
FAST = ("gammainc", "gammaincc")


def test_scipy_special_list_is_complete():
    public = {n for n in dir(jsp) if not n.startswith("_")}
    listed = set(SCIPY_SPECIAL) | set(NOT_DIFFERENTIABLE)
    assert public - listed == set()


def _scipy_case(name):
    args, argnums = SCIPY_SPECIAL[name]
    fn = getattr(jsp, name, None)
    if fn is None:
        pytest.skip(f"this jax's jax.scipy.special has no {name}")
    if name == "multigammaln":
        return (lambda a: fn(a, args[1])), args[:1], argnums
    return fn, args, argnums


@pytest.mark.parametrize("name", [n if n in FAST else pytest.param(n, marks=pytest.mark.slow)
                                  for n in sorted(SCIPY_SPECIAL)])
def test_scipy_special_gradient_default_options(name):
    """Default options: jax.grad of the export agrees with jax.grad of the source, and is
    finite wherever the source's is (a data-dependent loop needs no `max_loop_trips`)."""
    fn, args, argnums = _scipy_case(name)
    translated = _roundtrip(fn, *args)
    loss = lambda f: lambda *a: jnp.sum(f(*a) * _weights(np.asarray(args[-1], np.float32)))
    with warnings.catch_warnings():
        warnings.simplefilter("error", LoopBoundWarning)
        got = jax.grad(loss(translated), argnums=argnums)(*args)
    want = jax.grad(loss(fn), argnums=argnums)(*args)
    for g, w in zip(got, want):
        _assert_grads_agree(g, w, rtol=1e-4)


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


def _while_op(fn):
    return next(op for op in fn.program.module.ops if op.name == "stablehlo.while")


def test_elementwise_loop_differentiates_by_default():
    # element-wise body: reverse mode is read off forward mode, exactly, with no bound
    fn = _roundtrip(_newton_sqrt, A)
    np.testing.assert_allclose(fn(A), np.sqrt(A), rtol=1e-5)
    np.testing.assert_allclose(jax.grad(lambda a: fn(a).sum())(A), 0.5 / np.sqrt(A), rtol=1e-4)
    np.testing.assert_allclose(jax.jit(jax.grad(lambda a: (fn(a) * A).sum()))(A),
                               0.5 * A / np.sqrt(A), rtol=1e-4)
    per_example = jax.vmap(jax.grad(lambda a: fn(a).sum()))(np.stack([A, A * 2]))
    np.testing.assert_allclose(per_example[1], 0.5 / np.sqrt(A * 2), rtol=1e-4)
    hessian = jnp.diag(jax.hessian(lambda a: fn(a).sum())(A))
    np.testing.assert_allclose(hessian, -0.25 * A ** -1.5, rtol=1e-3)
    _, tangent = jax.jvp(fn, (A,), (np.ones_like(A),))
    np.testing.assert_allclose(tangent, 0.5 / np.sqrt(A), rtol=1e-4)


def test_elementwise_loop_reverse_over_reverse_names_the_loop():
    fn = _roundtrip(_newton_sqrt, A)
    with pytest.raises(TranslationError, match=r"stablehlo.while at .*max_loop_trips"):
        jax.grad(lambda a: jax.grad(lambda v: fn(v).sum())(a).sum())(A)
    fn = _roundtrip(_newton_sqrt, A, max_loop_trips=50)  # bounded: to every order
    second = jax.grad(lambda a: jax.grad(lambda v: fn(v).sum())(a).sum())(A)
    np.testing.assert_allclose(second, -0.25 * A ** -1.5, rtol=1e-3)


def test_elementwise_loop_with_a_scalar_input():
    # a scalar captured by an element-wise body reaches every element: its cotangent sums
    def scaled_newton(a, s):
        def body(state):
            x, n = state
            return 0.5 * (x + s * a / x), n + 1
        return lax.while_loop(lambda st: jnp.any(jnp.abs(st[0] ** 2 - s * a) > 1e-5 * a),
                              body, (a, 0))[0]

    s = np.float32(1.7)
    fn = _roundtrip(scaled_newton, A, s)
    ga, gs = jax.grad(lambda a, s: (fn(a, s) * A).sum(), argnums=(0, 1))(A, s)
    np.testing.assert_allclose(ga, A * 0.5 * np.sqrt(s / A), rtol=1e-4)
    np.testing.assert_allclose(gs, np.sum(A * 0.5 * np.sqrt(A / s)), rtol=1e-4)


def _jacobi(m, b):
    # not element-wise (a matrix product): reverse mode runs it as a bounded loop
    d = jnp.diag(m)
    r = m - jnp.diag(d)

    def body(state):
        x, n = state
        return (b - r @ x) / d, n + 1
    return lax.while_loop(lambda st: jnp.max(jnp.abs(m @ st[0] - b)) > 1e-5, body,
                          (jnp.zeros_like(b), 0))[0]


M = (np.eye(4) * 4 + np.arange(16).reshape(4, 4) % 3 * 0.3).astype(np.float32)
B = np.array([1.0, -2.0, 0.5, 3.0], np.float32)


def test_coupled_loop_runs_bounded_by_default():
    from shlo2jax.ops.control_flow import _elementwise_loop  # noqa: F401 (the analysis)
    fn = _roundtrip(_jacobi, M, B)
    np.testing.assert_allclose(fn(M, B), np.linalg.solve(M, B), rtol=1e-4, atol=1e-5)
    w = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error", LoopBoundWarning)
        gb = jax.grad(lambda b: (fn(M, b) * w).sum())(B)
    np.testing.assert_allclose(gb, np.linalg.solve(M.T, w), rtol=1e-4)


def _slow_decay(x):
    # a shift (not element-wise) that needs about 1380 trips: more than DEFAULT_LOOP_TRIPS
    return lax.while_loop(lambda v: jnp.sum(v) > 1e-3, lambda v: 0.995 * jnp.roll(v, 1), x)


def test_default_bound_overflow_is_nan_and_warns():
    x = np.full(4, 0.25, np.float32)
    fn = _roundtrip(_slow_decay, x)
    with pytest.warns(LoopBoundWarning, match=r"stablehlo.while at .*more than 1000 trips"):
        grad = jax.grad(lambda v: fn(v).sum())(x)
    assert np.all(np.isnan(grad))
    fn = _roundtrip(_slow_decay, x, max_loop_trips=2000)
    trips = int(np.ceil(np.log(1e-3) / np.log(0.995)))
    np.testing.assert_allclose(jax.grad(lambda v: fn(v).sum())(x), np.full(4, 0.995 ** trips),
                               rtol=6e-3)


def test_bound_by_location_and_too_small_a_bound():
    fn = _roundtrip(_newton_sqrt, A, max_loop_trips=2)  # a user's bound is a bounded loop
    with pytest.warns(LoopBoundWarning, match="max_loop_trips"):
        grad = jax.grad(lambda a: fn(a).sum())(A)
    assert np.all(np.isnan(grad))  # the loop needs more than 2 trips: loudly wrong
    location = _while_op(_roundtrip(_newton_sqrt, A)).location
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

    fn = _roundtrip(capped, A)  # `i < 40` bounds it (element-wise too)
    np.testing.assert_allclose(jax.grad(lambda a: fn(a).sum())(A), 0.5 / np.sqrt(A), rtol=1e-4)

    def capped_coupled(m, b):
        d = jnp.diag(m)

        def body(state):
            x, i = state
            return (b - (m - jnp.diag(d)) @ x) / d, i + 1
        return lax.while_loop(lambda st: (st[1] < 3) & (jnp.max(jnp.abs(st[0])) < 1e9), body,
                              (jnp.zeros_like(b), 0))[0]

    fn = _roundtrip(capped_coupled, M, B)
    ops = [op for op in fn.program.module.ops if op.name == "stablehlo.while"]
    assert ops and ops[0].params.bounds  # the counter is found
    got = jax.grad(lambda b: fn(M, b).sum())(B)
    d = np.diag(M)
    unrolled = lambda b: lax.fori_loop(0, 3, lambda i, x: (b - (M - np.diag(d)) @ x) / d,
                                       jnp.zeros_like(b))  # three trips, as the loop takes
    want = jax.grad(lambda b: unrolled(b).sum())(B)
    np.testing.assert_allclose(got, want, rtol=1e-5)


@pytest.mark.parametrize("body,elementwise", [
    ("x * x + a", True), ("jnp.where(x > 0, x, -x) * s + a", True), ("x + jnp.sum(x)", False),
    ("jnp.roll(x, 1) + a", False), ("x[::-1] + a", False), ("jnp.cumsum(x) + a", False),
])
def test_elementwise_analysis(body, elementwise, monkeypatch):
    import shlo2jax.ops.control_flow as control_flow

    def f(a, s):
        step = eval("lambda x: " + body, {"jnp": jnp, "a": a, "s": s})
        return lax.while_loop(lambda x: jnp.sum(x) < 100.0, step, a)

    fn = _roundtrip(f, A, np.float32(2.0))
    seen, analysis = [], control_flow._elementwise_loop
    monkeypatch.setattr(control_flow, "_elementwise_loop",
                        lambda ctx, op: seen.append(analysis(ctx, op)) or seen[-1])
    got = jax.grad(lambda a: fn(a, np.float32(2.0)).sum())(A)
    assert seen == [elementwise]
    bounded = _roundtrip(f, A, np.float32(2.0), max_loop_trips=50)  # the other way
    want = jax.grad(lambda a: bounded(a, np.float32(2.0)).sum())(A)
    np.testing.assert_allclose(got, want, rtol=1e-5)


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
