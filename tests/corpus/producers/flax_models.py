"""Flax models for the corpus (producer "flax"): nnx (models split into graphdef + state, the
state passed as arguments or closed over) and linen (`model.apply(variables, ...)`), built with
the libraries' own layers and initialisers, exported with jax.export."""

from __future__ import annotations

import functools

import flax
import numpy as np
from flax import linen as nn
from flax import nnx

from producers import jax_common as jc
from producers.jax_common import jax, jnp

PRODUCER = "flax"


# ---- nnx ---------------------------------------------------------------------------------

class NnxMLP(nnx.Module):
    def __init__(self, sizes, act, rngs):
        self.layers = nnx.List([nnx.Linear(a, b, rngs=rngs) for a, b in zip(sizes[:-1], sizes[1:])])
        self.act = act

    def __call__(self, x):
        for layer in self.layers[:-1]:
            x = self.act(layer(x))
        return self.layers[-1](x)


class NnxCNN(nnx.Module):
    """conv-BN-relu x2 with a strided second conv, global average pool, dense."""

    def __init__(self, rngs, c_in=3, c=8, classes=5):
        self.conv1 = nnx.Conv(c_in, c, (3, 3), rngs=rngs)
        self.bn1 = nnx.BatchNorm(c, rngs=rngs)
        self.conv2 = nnx.Conv(c, c, (3, 3), strides=(2, 2), rngs=rngs)
        self.bn2 = nnx.BatchNorm(c, rngs=rngs)
        self.head = nnx.Linear(c, classes, rngs=rngs)

    def __call__(self, x):
        x = nnx.relu(self.bn1(self.conv1(x)))
        x = nnx.relu(self.bn2(self.conv2(x)))
        return self.head(x.mean((1, 2)))


class NnxBlock(nnx.Module):
    def __init__(self, c_in, c, stride, rngs):
        self.conv1 = nnx.Conv(c_in, c, (3, 3), strides=stride, use_bias=False, rngs=rngs)
        self.bn1 = nnx.BatchNorm(c, rngs=rngs)
        self.conv2 = nnx.Conv(c, c, (3, 3), use_bias=False, rngs=rngs)
        self.bn2 = nnx.BatchNorm(c, rngs=rngs)
        self.proj = (nnx.Conv(c_in, c, (1, 1), strides=stride, use_bias=False, rngs=rngs)
                     if stride != 1 or c_in != c else None)

    def __call__(self, x):
        h = nnx.relu(self.bn1(self.conv1(x)))
        h = self.bn2(self.conv2(h))
        return nnx.relu(h + (x if self.proj is None else self.proj(x)))


class NnxResNet(nnx.Module):
    def __init__(self, rngs, classes=4):
        self.stem = nnx.Conv(3, 8, (3, 3), use_bias=False, rngs=rngs)
        self.bn = nnx.BatchNorm(8, rngs=rngs)
        self.blocks = nnx.List([NnxBlock(8, 8, 1, rngs), NnxBlock(8, 16, 2, rngs)])
        self.head = nnx.Linear(16, classes, rngs=rngs)

    def __call__(self, x):
        x = nnx.relu(self.bn(self.stem(x)))
        for block in self.blocks:
            x = block(x)
        return self.head(x.mean((1, 2)))


class NnxAttention(nnx.Module):
    def __init__(self, rngs, vocab=24, d=16, heads=4):
        self.embed = nnx.Embed(vocab, d, rngs=rngs)
        self.attn = nnx.MultiHeadAttention(num_heads=heads, in_features=d, decode=False,
                                           rngs=rngs)
        self.norm = nnx.LayerNorm(d, rngs=rngs)
        self.out = nnx.Linear(d, vocab, rngs=rngs)

    def __call__(self, tokens, pad_mask):
        x = self.embed(tokens)
        mask = nnx.combine_masks(nnx.make_attention_mask(pad_mask, pad_mask),
                                 nnx.make_causal_mask(tokens))
        x = self.norm(x + self.attn(x, mask=mask))
        return self.out(x)


def nnx_fn(graphdef):
    def fn(state, *inputs):
        return nnx.merge(graphdef, state)(*inputs)
    return fn


def nnx_train_fn(graphdef):
    """Batch norm in training mode: the output and the updated running statistics."""
    def fn(state, x):
        model = nnx.merge(graphdef, state)
        y = model(x)
        return y, nnx.state(model, nnx.BatchStat)
    return fn


def warm_batch_stats(model, rng, shape, steps=3):
    """A few training-mode forward passes so the running statistics are not the initial 0/1."""
    model.train()
    for _ in range(steps):
        model(jnp.asarray(jc.normal(rng, shape, 1.5) + 0.3))
    model.eval()


# ---- linen -------------------------------------------------------------------------------

class LinenRNN(nn.Module):
    cell: str = "lstm"
    hidden: int = 12
    out: int = 3

    @nn.compact
    def __call__(self, xs):
        cell = (nn.OptimizedLSTMCell(self.hidden) if self.cell == "lstm"
                else nn.GRUCell(self.hidden))
        hs = nn.RNN(cell)(xs)
        return nn.Dense(self.out)(hs[:, -1]), hs


class LinenCNN(nn.Module):
    @nn.compact
    def __call__(self, x, train: bool = False):
        x = nn.Conv(8, (3, 3))(x)
        x = nn.relu(nn.BatchNorm(use_running_average=not train)(x))
        x = nn.Conv(8, (3, 3), strides=2)(x)
        x = nn.relu(nn.BatchNorm(use_running_average=not train)(x))
        x = nn.avg_pool(x, (2, 2), (2, 2))
        return nn.Dense(5)(x.reshape(x.shape[0], -1))


class LinenBlock(nn.Module):
    d: int
    heads: int

    @nn.compact
    def __call__(self, x, mask):
        h = nn.LayerNorm()(x)
        x = x + nn.SelfAttention(num_heads=self.heads, deterministic=True)(h, mask=mask)
        h = nn.LayerNorm()(x)
        x = x + nn.Dense(self.d)(nn.gelu(nn.Dense(2 * self.d)(h)))
        return x, None


class LinenScanTransformer(nn.Module):
    vocab: int = 20
    d: int = 16
    heads: int = 2
    layers: int = 2

    @nn.compact
    def __call__(self, tokens, pad_mask):
        x = nn.Embed(self.vocab, self.d)(tokens)
        mask = nn.combine_masks(nn.make_attention_mask(pad_mask, pad_mask),
                                nn.make_causal_mask(tokens))
        stack = nn.scan(LinenBlock, variable_axes={"params": 0}, split_rngs={"params": True},
                        in_axes=nn.broadcast, length=self.layers)
        x, _ = stack(self.d, self.heads)(x, mask)
        return nn.Dense(self.vocab)(nn.LayerNorm()(x))


def timestep_embedding(t, dim):
    half = dim // 2
    freqs = jnp.exp(-np.log(10000.0) * jnp.arange(half) / half)
    args = t[:, None] * freqs[None]
    return jnp.concatenate([jnp.sin(args), jnp.cos(args)], -1)


class ResBlock(nn.Module):
    c: int

    @nn.compact
    def __call__(self, x, temb):
        h = nn.Conv(self.c, (3, 3))(nn.swish(nn.GroupNorm(num_groups=4)(x)))
        h = h + nn.Dense(self.c)(nn.swish(temb))[:, None, None]
        h = nn.Conv(self.c, (3, 3))(nn.swish(nn.GroupNorm(num_groups=4)(h)))
        skip = x if x.shape[-1] == self.c else nn.Conv(self.c, (1, 1))(x)
        return skip + h


class TinyUNet(nn.Module):
    """A diffusion UNet: sinusoidal time embedding, GroupNorm/swish residual blocks, a strided
    down-sampling conv, a nearest-neighbour up-sampling, skip connections."""

    @nn.compact
    def __call__(self, x, t):
        temb = nn.Dense(32)(nn.swish(nn.Dense(32)(timestep_embedding(t, 16))))
        h0 = nn.Conv(8, (3, 3))(x)
        h1 = ResBlock(8)(h0, temb)
        d = nn.Conv(16, (3, 3), strides=2)(h1)
        d = ResBlock(16)(d, temb)
        u = jax.image.resize(d, (d.shape[0], h1.shape[1], h1.shape[2], d.shape[3]), "nearest")
        u = ResBlock(8)(jnp.concatenate([u, h1], -1), temb)
        return nn.Conv(x.shape[-1], (3, 3))(nn.swish(nn.GroupNorm(num_groups=4)(u)))


def linen_fn(module, **kw):
    def fn(variables, *inputs):
        return module.apply(variables, *inputs, **kw)
    return fn


def build(root, only=None):
    versions = jc.versions(flax=flax)

    def add(name, **kw):
        if only in (None, name):
            jc.add_entry(root, PRODUCER, name, versions=versions, **kw)

    # nnx
    rng = jc.rng_for("nnx_mlp")
    model = NnxMLP([12, 24, 24, 6], nnx.relu, nnx.Rngs(0))
    graphdef, state = nnx.split(model)
    x = jc.normal(rng, (4, 12))
    add("nnx_mlp", model="nnx MLP 12-24-24-6 (nnx.Linear, relu); state as arguments",
        fn=nnx_fn(graphdef), params=state, inputs=[x], input_names=["x"],
        source="graphdef, state = nnx.split(model); f = lambda state, x: nnx.merge(graphdef, state)(x)")

    rng = jc.rng_for("nnx_gelu")
    model = NnxMLP([8, 32, 4], functools.partial(nnx.gelu, approximate=False), nnx.Rngs(1))
    graphdef, state = nnx.split(model)
    x = jc.normal(rng, (6, 8), 2.0)
    x[4:] = 0  # zero-padded rows meet nnx.Linear's zero-initialised biases: pre-activations are 0
    add("nnx_gelu_closed", model="nnx MLP with exact GELU (nnx.gelu(approximate=False)), default "
        "(zero) bias init, zero-padded rows; state closed over",
        fn=nnx_fn(graphdef), params=state, inputs=[x], input_names=["x"], closed=True)

    rng = jc.rng_for("nnx_cnn_bn")
    model = NnxCNN(nnx.Rngs(2))
    warm_batch_stats(model, rng, (4, 8, 8, 3))
    graphdef, state = nnx.split(model)
    images = jc.normal(rng, (2, 8, 8, 3))
    add("nnx_cnn_bn", model="nnx CNN with BatchNorm in eval mode (running statistics); state "
        "as arguments", fn=nnx_fn(graphdef), params=state, inputs=[images],
        input_names=["images"])
    model.train()
    graphdef, state = nnx.split(model)
    add("nnx_cnn_bn_train", model="the nnx CNN with BatchNorm in train mode: returns the logits "
        "and the updated running statistics; state as arguments",
        fn=nnx_train_fn(graphdef), params=state, inputs=[images], input_names=["images"],
        vmap=False, notes="batch statistics couple the examples: no vmap over them")
    add("nnx_cnn_bn_train_vjp", model="the train-mode nnx CNN serialized with vjp_order=1: the "
        "artifact carries the producer's VJP, which keeps BatchNorm's stop_gradient on the "
        "running-statistics update; state as arguments",
        fn=nnx_train_fn(graphdef), params=state, inputs=[images], input_names=["images"],
        vmap=False, vjp_order=1, notes="batch statistics couple the examples: no vmap over them")

    rng = jc.rng_for("nnx_resnet")
    model = NnxResNet(nnx.Rngs(3))
    warm_batch_stats(model, rng, (4, 8, 8, 3))
    graphdef, state = nnx.split(model)
    images = jc.normal(rng, (2, 8, 8, 3))
    add("nnx_resnet_closed", model="nnx ResNet (stem + 2 basic blocks, projection shortcut), "
        "BatchNorm eval; state closed over",
        fn=nnx_fn(graphdef), params=state, inputs=[images], input_names=["images"], closed=True)

    rng = jc.rng_for("nnx_attention")
    model = NnxAttention(nnx.Rngs(4))
    graphdef, state = nnx.split(model)
    tokens = rng.integers(0, 24, (2, 7)).astype(np.int32)
    pad_mask = np.arange(7)[None] < np.array([[7], [4]])
    add("nnx_attention_mask", model="nnx.MultiHeadAttention (4 heads) with padding + causal "
        "masks, embedding, LayerNorm; state as arguments",
        fn=nnx_fn(graphdef), params=state, inputs=[tokens, pad_mask],
        input_names=["tokens", "pad_mask"])

    # linen
    rng = jc.rng_for("linen_lstm")
    module = LinenRNN("lstm")
    xs = jc.normal(rng, (3, 6, 5))
    variables = module.init(jax.random.key(5), xs)
    add("linen_lstm", model="linen nn.RNN(nn.OptimizedLSTMCell(12)) over 6 steps + Dense; "
        "variables as arguments", fn=linen_fn(module), params=variables, inputs=[xs],
        input_names=["xs"], source="f = lambda variables, xs: module.apply(variables, xs)")

    rng = jc.rng_for("linen_gru")
    module = LinenRNN("gru")
    xs = jc.normal(rng, (3, 6, 5))
    variables = module.init(jax.random.key(6), xs)
    add("linen_gru_closed", model="linen nn.RNN(nn.GRUCell(12)) + Dense; variables closed over",
        fn=linen_fn(module), params=variables, inputs=[xs], input_names=["xs"], closed=True)

    rng = jc.rng_for("linen_cnn_bn")
    module = LinenCNN()
    images = jc.normal(rng, (2, 8, 8, 3))
    variables = module.init(jax.random.key(7), images)
    for _ in range(3):  # running statistics from a few training steps
        _, updates = module.apply(variables, jnp.asarray(jc.normal(rng, (4, 8, 8, 3), 1.5) + 0.3),
                                  train=True, mutable=["batch_stats"])
        variables = {**variables, **updates}
    add("linen_cnn_bn_closed", model="linen CNN with nn.BatchNorm(use_running_average=True); "
        "variables closed over", fn=linen_fn(module), params=variables, inputs=[images],
        input_names=["images"], closed=True)

    rng = jc.rng_for("linen_scan_transformer")
    module = LinenScanTransformer()
    tokens = rng.integers(0, 20, (2, 8)).astype(np.int32)
    pad_mask = np.arange(8)[None] < np.array([[8], [5]])
    variables = module.init(jax.random.key(8), tokens, pad_mask)
    add("linen_scan_transformer", model="linen transformer, 2 pre-norm blocks stacked with "
        "nn.scan (nn.SelfAttention, causal + padding mask); variables as arguments",
        fn=linen_fn(module), params=variables, inputs=[tokens, pad_mask],
        input_names=["tokens", "pad_mask"])

    rng = jc.rng_for("linen_unet")
    module = TinyUNet()
    x = jc.normal(rng, (2, 8, 8, 2))
    t = rng.uniform(0, 1000, (2,)).astype(np.float32)
    variables = module.init(jax.random.key(9), x, t)
    add("linen_unet", model="linen diffusion UNet (time embedding, GroupNorm, swish, strided "
        "down-sampling, nearest up-sampling, skips); variables as arguments",
        fn=linen_fn(module), params=variables, inputs=[x, t], input_names=["x", "t"])
