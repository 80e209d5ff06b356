"""Equinox models for the corpus (producer "equinox"): eqx.nn layers, per-example modules
batched with jax.vmap as equinox users write them, parameters split off with eqx.partition."""

from __future__ import annotations

import equinox as eqx
import numpy as np

from producers import jax_common as jc
from producers.jax_common import jax, jnp

lax = jax.lax
PRODUCER = "equinox"


def split(model):
    """(the model's arrays, a function of (arrays, *inputs) that rebuilds and calls it)."""
    params, static = eqx.partition(model, eqx.is_array)

    def fn(params, *inputs):
        return eqx.combine(params, static)(*inputs)
    return params, fn


class BatchedMLP(eqx.Module):
    mlp: eqx.nn.MLP

    def __call__(self, x):
        return jax.vmap(self.mlp)(x)


class CNN(eqx.Module):
    conv1: eqx.nn.Conv2d
    conv2: eqx.nn.Conv2d
    norm: eqx.nn.GroupNorm
    head: eqx.nn.Linear

    def __init__(self, key):
        k1, k2, k3 = jax.random.split(key, 3)
        self.conv1 = eqx.nn.Conv2d(3, 8, 3, padding=1, key=k1)
        self.conv2 = eqx.nn.Conv2d(8, 8, 3, stride=2, padding=1, key=k2)
        self.norm = eqx.nn.GroupNorm(4, 8)
        self.head = eqx.nn.Linear(8, 5, key=k3)

    def one(self, image):  # CHW
        h = jax.nn.relu(self.conv1(image))
        h = jax.nn.relu(self.norm(self.conv2(h)))
        return jax.nn.log_softmax(self.head(h.mean((1, 2))))

    def __call__(self, images):
        return jax.vmap(self.one)(images)


class LSTM(eqx.Module):
    cell: eqx.nn.LSTMCell
    head: eqx.nn.Linear

    def __init__(self, key, d_in=5, hidden=10, out=3):
        k1, k2 = jax.random.split(key)
        self.cell = eqx.nn.LSTMCell(d_in, hidden, key=k1)
        self.head = eqx.nn.Linear(hidden, out, key=k2)

    def one(self, xs):  # (time, d_in)
        init = (jnp.zeros(self.cell.hidden_size), jnp.zeros(self.cell.hidden_size))

        def step(state, x):
            state = self.cell(x, state)
            return state, state[0]
        (h, _), hs = lax.scan(step, init, xs)
        return self.head(h), hs

    def __call__(self, xs):
        return jax.vmap(self.one)(xs)


class Attention(eqx.Module):
    embed: eqx.nn.Embedding
    attn: eqx.nn.MultiheadAttention
    norm: eqx.nn.LayerNorm
    out: eqx.nn.Linear

    def __init__(self, key, vocab=24, d=16, heads=4):
        k1, k2, k3 = jax.random.split(key, 3)
        self.embed = eqx.nn.Embedding(vocab, d, key=k1)
        self.attn = eqx.nn.MultiheadAttention(heads, d, key=k2)
        self.norm = eqx.nn.LayerNorm(d)
        self.out = eqx.nn.Linear(d, vocab, key=k3)

    def one(self, tokens, pad_mask):
        x = jax.vmap(self.embed)(tokens)
        s = tokens.shape[0]
        mask = jnp.tril(jnp.ones((s, s), bool)) & pad_mask[None, :]
        x = jax.vmap(self.norm)(x + self.attn(x, x, x, mask=mask))
        return jax.vmap(self.out)(x)

    def __call__(self, tokens, pad_mask):
        return jax.vmap(self.one)(tokens, pad_mask)


class Flow(eqx.Module):
    """Maps data to a Beta-like latent through the normal CDF (ndtr) and back out through
    ndtri after a learned power map; the density uses gammaln, digamma and log_ndtr."""

    log_power: jax.Array
    mix: eqx.nn.Linear
    concentration: jax.Array

    def __init__(self, key, d=4):
        k1, k2 = jax.random.split(key)
        self.log_power = 0.3 * jax.random.normal(k1, (d,))
        self.mix = eqx.nn.Linear(d, d, key=k2)
        self.concentration = jnp.full((d,), 2.5)

    def __call__(self, x):
        sp = jax.scipy.special
        u = jnp.clip(sp.ndtr(x), 1e-6, 1 - 1e-6)
        v = jnp.clip(u ** jnp.exp(self.log_power), 1e-6, 1 - 1e-6)
        z = jax.vmap(self.mix)(sp.ndtri(v))
        a = self.concentration
        log_beta = 2 * sp.gammaln(a) - sp.gammaln(2 * a)
        logp = ((a - 1) * (jnp.log(v) + jnp.log1p(-v)) - log_beta).sum(-1)
        return logp, sp.log_ndtr(z), sp.digamma(a + jnp.abs(z))


class Pendulum(eqx.Module):
    """A damped pendulum stepped until it has nearly stopped, with equinox's bounded,
    checkpointed while loop (differentiable in reverse mode); the trip count depends on the
    data."""

    damping: jax.Array
    length: jax.Array

    def __call__(self, theta0, omega0):
        dt = 0.05

        def cond(state):
            t, theta, omega = state
            energy = 0.5 * omega ** 2 + 9.81 / self.length * (1 - jnp.cos(theta))
            return jnp.max(energy) > 0.5

        def body(state):
            t, theta, omega = state
            omega = omega + dt * (-9.81 / self.length * jnp.sin(theta) - self.damping * omega)
            return t + dt, theta + dt * omega, omega

        t, theta, omega = eqx.internal.while_loop(
            cond, body, (jnp.float32(0), theta0, omega0), max_steps=400, kind="checkpointed")
        return t, theta, omega


def build(root, only=None):
    versions = jc.versions(equinox=eqx)

    def add(name, **kw):
        if only in (None, name):
            jc.add_entry(root, PRODUCER, name, versions=versions, **kw)

    rng = jc.rng_for("eqx_mlp")
    params, fn = split(BatchedMLP(eqx.nn.MLP(10, 4, 24, 2, activation=jax.nn.softplus,
                                             key=jax.random.key(0))))
    x = jc.normal(rng, (5, 10))
    add("eqx_mlp", model="eqx.nn.MLP 10-24-24-4 (softplus), vmapped; arrays as arguments",
        fn=fn, params=params, inputs=[x], input_names=["x"],
        source="params, static = eqx.partition(model, eqx.is_array); "
               "f = lambda params, x: eqx.combine(params, static)(x)")

    rng = jc.rng_for("eqx_cnn")
    params, fn = split(CNN(jax.random.key(1)))
    images = jc.normal(rng, (2, 3, 8, 8))
    add("eqx_cnn_closed", model="eqx CNN (Conv2d, GroupNorm, Linear), vmapped over images; "
        "arrays closed over", fn=fn, params=params, inputs=[images], input_names=["images"],
        closed=True)

    rng = jc.rng_for("eqx_lstm")
    params, fn = split(LSTM(jax.random.key(2)))
    xs = jc.normal(rng, (3, 6, 5))
    add("eqx_lstm", model="eqx.nn.LSTMCell stepped by lax.scan, vmapped; arrays as arguments",
        fn=fn, params=params, inputs=[xs], input_names=["xs"])

    rng = jc.rng_for("eqx_attention")
    params, fn = split(Attention(jax.random.key(3)))
    tokens = rng.integers(0, 24, (2, 7)).astype(np.int32)
    pad_mask = np.arange(7)[None] < np.array([[7], [3]])
    add("eqx_attention_mask", model="eqx.nn.MultiheadAttention with causal + padding mask, "
        "Embedding, LayerNorm; arrays as arguments", fn=fn, params=params,
        inputs=[tokens, pad_mask], input_names=["tokens", "pad_mask"])

    rng = jc.rng_for("eqx_flow")
    params, fn = split(Flow(jax.random.key(4)))
    x = jc.normal(rng, (6, 4))
    add("eqx_flow_special", model="flow with ndtr, ndtri, gammaln, digamma, log_ndtr; arrays "
        "as arguments", fn=fn, params=params, inputs=[x], input_names=["x"])
    add("eqx_flow_closed", model="the special-function flow with its arrays closed over",
        fn=fn, params=params, inputs=[x], input_names=["x"], closed=True)

    rng = jc.rng_for("eqx_pendulum")
    params, fn = split(Pendulum(jnp.float32(0.8), jnp.float32(1.3)))
    theta = rng.uniform(0.5, 2.0, (4,)).astype(np.float32)
    omega = rng.uniform(-1, 1, (4,)).astype(np.float32)
    add("eqx_pendulum_while", model="damped pendulum stepped by eqx.internal.while_loop("
        "kind='checkpointed', max_steps=400) until its energy falls: data-dependent trip count; "
        "damping and length as arguments", fn=fn, params=params, inputs=[theta, omega],
        input_names=["theta0", "omega0"])
