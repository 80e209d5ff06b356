"""Plain-JAX models for the corpus (producer "jax"): jax.numpy / jax.lax written by hand, as a
JAX user writes them, exported with jax.export for cpu and lowered for cuda, rocm and tpu."""

from __future__ import annotations

import numpy as np

from producers import jax_common as jc
from producers.jax_common import jax, jnp

lax = jax.lax
PRODUCER = "jax"


def dense_params(rng, sizes, scale=1.0):
    return [{"w": jc.normal(rng, (a, b), scale / np.sqrt(a)), "b": jc.normal(rng, (b,), 0.1)}
            for a, b in zip(sizes[:-1], sizes[1:])]


def mlp(params, x, act=jax.nn.relu):
    for layer in params[:-1]:
        x = act(x @ layer["w"] + layer["b"])
    return x @ params[-1]["w"] + params[-1]["b"]


def mlp_softmax(params, x):
    return jax.nn.log_softmax(mlp(params, x, jnp.tanh))


def gelu_exact_mlp(params, x):
    return mlp(params, x, lambda h: jax.nn.gelu(h, approximate=False))


def layer_norm(x, scale, bias, eps=1e-5):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) * lax.rsqrt(var + eps) * scale + bias


def mlp_layernorm(params, x):
    h = jax.nn.silu(x @ params["w1"] + params["b1"])
    h = layer_norm(h, params["ln_scale"], params["ln_bias"])
    return h @ params["w2"]


# A decoder-only transformer: embeddings, a stack of pre-norm layers run with lax.scan over the
# stacked layer weights, causal plus key-padding attention mask.
def transformer_params(rng, vocab=32, d=16, heads=2, layers=2, ff=32, seq=8):
    def stack(shape, scale):
        return jc.normal(rng, (layers,) + shape, scale)
    return {
        "embed": jc.normal(rng, (vocab, d), 0.5), "pos": jc.normal(rng, (seq, d), 0.1),
        "layers": {
            "ln1_s": 1 + stack((d,), 0.1), "ln1_b": stack((d,), 0.1),
            "wq": stack((d, d), d ** -0.5), "wk": stack((d, d), d ** -0.5),
            "wv": stack((d, d), d ** -0.5), "wo": stack((d, d), d ** -0.5),
            "ln2_s": 1 + stack((d,), 0.1), "ln2_b": stack((d,), 0.1),
            "w1": stack((d, ff), d ** -0.5), "b1": stack((ff,), 0.1),
            "w2": stack((ff, d), ff ** -0.5), "b2": stack((d,), 0.1),
        },
        "ln_f_s": 1 + jc.normal(rng, (d,), 0.1), "ln_f_b": jc.normal(rng, (d,), 0.1),
    }


def transformer(params, tokens, pad_mask, heads=2):
    b, s = tokens.shape
    x = params["embed"][tokens] + params["pos"][:s]
    causal = jnp.tril(jnp.ones((s, s), bool))
    mask = causal[None, None] & pad_mask[:, None, None, :]

    def layer(x, p):
        h = layer_norm(x, p["ln1_s"], p["ln1_b"])
        d = h.shape[-1]
        split = lambda t: t.reshape(b, s, heads, d // heads).transpose(0, 2, 1, 3)
        q, k, v = split(h @ p["wq"]), split(h @ p["wk"]), split(h @ p["wv"])
        logits = jnp.einsum("bhqd,bhkd->bhqk", q, k) / np.sqrt(d // heads)
        logits = jnp.where(mask, logits, -1e9)
        att = jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(logits, -1), v)
        x = x + att.transpose(0, 2, 1, 3).reshape(b, s, d) @ p["wo"]
        h = layer_norm(x, p["ln2_s"], p["ln2_b"])
        x = x + jax.nn.gelu(h @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]
        return x, None

    x, _ = lax.scan(layer, x, params["layers"])
    x = layer_norm(x, params["ln_f_s"], params["ln_f_b"])
    return x @ params["embed"].T


def transformer_inputs(rng, b=2, s=8, vocab=32):
    tokens = rng.integers(0, vocab, (b, s)).astype(np.int32)
    lengths = np.array([s, s - 3])[:b]
    pad_mask = np.arange(s)[None, :] < lengths[:, None]
    return [tokens, pad_mask]


def gru_params(rng, d_in=6, d_h=12, d_out=4):
    g = lambda shape, fan: jc.normal(rng, shape, fan ** -0.5)
    return {"wx": g((d_in, 3 * d_h), d_in), "wh": g((d_h, 3 * d_h), d_h),
            "b": jc.normal(rng, (3 * d_h,), 0.1), "wo": g((d_h, d_out), d_h)}


def gru(params, xs):
    """xs: (batch, time, d_in) -> final readout and every hidden state, via lax.scan."""
    d_h = params["wh"].shape[0]

    def cell(h, x):
        gx = x @ params["wx"] + params["b"]
        gh = h @ params["wh"]
        r = jax.nn.sigmoid(gx[:, :d_h] + gh[:, :d_h])
        z = jax.nn.sigmoid(gx[:, d_h:2 * d_h] + gh[:, d_h:2 * d_h])
        n = jnp.tanh(gx[:, 2 * d_h:] + r * gh[:, 2 * d_h:])
        h = (1 - z) * n + z * h
        return h, h

    h0 = jnp.zeros((xs.shape[0], d_h), xs.dtype)
    h, hs = lax.scan(cell, h0, xs.transpose(1, 0, 2))
    return h @ params["wo"], hs.transpose(1, 0, 2)


def moe_params(rng, d=8, ff=16, experts=4):
    return {"router": jc.normal(rng, (d, experts), d ** -0.5),
            "w1": jc.normal(rng, (experts, d, ff), d ** -0.5),
            "w2": jc.normal(rng, (experts, ff, d), ff ** -0.5)}


def moe(params, x):
    """Top-2 mixture of experts over tokens x: (tokens, d); routes with lax.top_k and gathers
    the chosen experts' weights. Returns the mixed output and the chosen expert indices."""
    logits = x @ params["router"]
    top_logits, top_idx = lax.top_k(logits, 2)
    gates = jax.nn.softmax(top_logits, -1)
    w1 = params["w1"][top_idx]  # (tokens, 2, d, ff)
    w2 = params["w2"][top_idx]
    h = jax.nn.relu(jnp.einsum("td,tkdf->tkf", x, w1))
    y = jnp.einsum("tkf,tkfd->tkd", h, w2)
    return jnp.einsum("tk,tkd->td", gates, y), top_idx


def flow_params(rng, d=4):
    return {"a": jc.normal(rng, (d,), 0.3), "w": jc.normal(rng, (d, d), 0.3),
            "df": np.float32(4.5) + np.zeros((d,), np.float32)}


def flow(params, x):
    """A Gaussianisation flow: each coordinate through its standard-normal CDF (erf), a
    learned monotone map on (0, 1), back through the inverse CDF (erf_inv), then a mixing
    layer; the base density is a Student-t (lgamma); also log_ndtr of the result."""
    u = 0.5 * (1 + lax.erf(x / np.sqrt(2)))
    u = jnp.clip(u, 1e-6, 1 - 1e-6)
    a = jnp.exp(params["a"])
    v = u ** a / (u ** a + (1 - u) ** a)
    v = jnp.clip(v, 1e-6, 1 - 1e-6)
    z = np.sqrt(2) * lax.erf_inv(2 * v - 1)
    y = z @ (jnp.eye(z.shape[-1]) + 0.1 * params["w"])
    df = params["df"]
    logp_t = (lax.lgamma((df + 1) / 2) - lax.lgamma(df / 2) - 0.5 * jnp.log(df * np.pi)
              - (df + 1) / 2 * jnp.log1p(y ** 2 / df))
    return logp_t.sum(-1), jax.scipy.special.log_ndtr(y), lax.erfc(x)


def physics_while(params, pos, vel):
    """A projectile with quadratic drag, stepped (semi-implicit Euler) until every particle
    falls below the ground: the trip count depends on the data."""
    drag, dt = params["drag"], 0.05

    def cond(state):
        t, p, v, steps = state
        return jnp.any(p[:, 1] > 0) & (steps < 500)

    def body(state):
        t, p, v, steps = state
        alive = (p[:, 1] > 0)[:, None]
        speed = jnp.linalg.norm(v, axis=-1, keepdims=True)
        acc = jnp.array([0.0, -9.81]) - drag * speed * v
        v = jnp.where(alive, v + dt * acc, v)
        p = jnp.where(alive, p + dt * v, p)
        return t + dt * alive[:, 0], p, v, steps + 1

    t0 = jnp.zeros(pos.shape[0], pos.dtype)
    t, p, v, steps = lax.while_loop(cond, body, (t0, pos, vel, jnp.int32(0)))
    return p, t, steps


def linalg_model(params, x, y):
    """Gaussian-process regression pieces: Cholesky + triangular solves for the posterior
    mean and log-determinant, eigh, singular values and a general (LU) solve. Every output is
    invariant to the sign conventions of the factorizations."""
    n = x.shape[0]
    sq = ((x[:, None, :] - x[None, :, :]) ** 2).sum(-1)
    k = jnp.exp(params["log_amp"]) * jnp.exp(-0.5 * sq / jnp.exp(2 * params["log_len"]))
    k = k + (0.1 + jnp.exp(params["log_noise"])) * jnp.eye(n)
    chol = jnp.linalg.cholesky(k)
    alpha = jax.scipy.linalg.cho_solve((chol, True), y)
    logdet = 2 * jnp.log(jnp.diag(chol)).sum()
    evals = jnp.linalg.eigh(k)[0]
    s = jnp.linalg.svd(x, compute_uv=False)
    sol = jnp.linalg.solve(k + x @ x.T, y)
    return alpha, logdet, evals, s, sol


def qr_lstsq(params, x, y):
    """Least squares through a QR factorization: the fit, the projection onto the column space
    and |diag R| (all free of the factorization's signs)."""
    xw = x * jnp.exp(params["log_scale"])
    q, r = jnp.linalg.qr(xw)
    coef = jax.scipy.linalg.solve_triangular(r, q.T @ y)
    return coef, q @ (q.T @ y), jnp.abs(jnp.diag(r))


def linalg_params():
    return {"log_amp": np.float32(0.2), "log_len": np.float32(-0.1),
            "log_noise": np.float32(-1.0)}


def conv_params(rng, c_in=3, c=8, classes=5):
    return {"k1": jc.normal(rng, (3, 3, c_in, c), (9 * c_in) ** -0.5),
            "b1": jc.normal(rng, (c,), 0.1),
            "k2": jc.normal(rng, (3, 3, c, c), (9 * c) ** -0.5),
            "b2": jc.normal(rng, (c,), 0.1),
            "w": jc.normal(rng, (c, classes), c ** -0.5)}


def convnet(params, images):
    """NHWC conv -> relu -> strided conv -> relu -> avg pool -> global mean -> dense."""
    dn = ("NHWC", "HWIO", "NHWC")
    h = lax.conv_general_dilated(images, params["k1"], (1, 1), "SAME", dimension_numbers=dn)
    h = jax.nn.relu(h + params["b1"])
    h = lax.conv_general_dilated(h, params["k2"], (2, 2), "SAME", dimension_numbers=dn)
    h = jax.nn.relu(h + params["b2"])
    h = lax.reduce_window(h, 0.0, lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID") / 4
    return jax.nn.log_softmax(h.mean((1, 2)) @ params["w"])


def build(root, only=None):
    versions = jc.versions()

    def add(name, **kw):
        if only in (None, name):
            jc.add_entry(root, PRODUCER, name, versions=versions, **kw)

    rng = jc.rng_for("mlp")
    p = dense_params(rng, [16, 32, 32, 8])
    x = jc.normal(rng, (4, 16))
    add("mlp", model="MLP 16-32-32-8, tanh, log_softmax; weights as arguments",
        fn=mlp_softmax, params=p, inputs=[x], input_names=["x"])
    add("mlp_closed", model="MLP 16-32-32-8, tanh, log_softmax; weights closed over",
        fn=mlp_softmax, params=p, inputs=[x], input_names=["x"], closed=True)
    add("mlp_cuda", model="MLP 16-32-32-8 lowered for cuda; weights as arguments",
        fn=mlp_softmax, params=p, inputs=[x], input_names=["x"], platforms=("cuda",))
    add("mlp_cpu_cuda", model="MLP 16-32-32-8 lowered for cpu and cuda (platform index argument)",
        fn=mlp_softmax, params=p, inputs=[x], input_names=["x"], platforms=("cpu", "cuda"))

    rng = jc.rng_for("gelu_mlp")
    p = dense_params(rng, [8, 32, 32, 4], scale=2.0)
    for layer in p:  # biases start at zero, as frameworks initialise them
        layer["b"] = np.zeros_like(layer["b"])
    x = jc.normal(rng, (6, 8), 2.0)
    x[4:] = 0  # zero-padded rows: exactly-zero pre-activations, as padding gives
    add("gelu_mlp", model="MLP with exact GELU (jax.nn.gelu(approximate=False)); weights as arguments",
        fn=gelu_exact_mlp, params=p, inputs=[x], input_names=["x"])
    add("gelu_mlp_vjp", model="exact-GELU MLP serialized with vjp_order=1 (the artifact carries "
        "its VJP); weights as arguments",
        fn=gelu_exact_mlp, params=p, inputs=[x], input_names=["x"], vjp_order=1)

    rng = jc.rng_for("mlp_poly")
    p = {"w1": jc.normal(rng, (6, 24), 0.4), "b1": jc.normal(rng, (24,), 0.1),
         "ln_scale": 1 + jc.normal(rng, (24,), 0.1), "ln_bias": jc.normal(rng, (24,), 0.1),
         "w2": jc.normal(rng, (24, 3), 0.2)}
    x = jc.normal(rng, (5, 6))
    add("mlp_poly", model="MLP with layer norm, batch dimension symbolic ('b'); args for b=5",
        fn=mlp_layernorm, params=p, inputs=[x], input_names=["x"], symbolic_batch=True)

    rng = jc.rng_for("transformer_scan")
    p = transformer_params(rng)
    ins = transformer_inputs(rng)
    add("transformer_scan", model="decoder transformer, 2 layers via lax.scan over stacked "
        "weights, causal + padding mask; weights as arguments",
        fn=transformer, params=p, inputs=ins, input_names=["tokens", "pad_mask"])
    add("transformer_tpu", model="the scanned transformer lowered for tpu; weights closed over",
        fn=transformer, params=p, inputs=ins, input_names=["tokens", "pad_mask"],
        closed=True, platforms=("tpu",))

    rng = jc.rng_for("gru_scan")
    p = gru_params(rng)
    xs = jc.normal(rng, (3, 7, 6))
    add("gru_scan", model="GRU over 7 steps via lax.scan; weights as arguments",
        fn=gru, params=p, inputs=[xs], input_names=["xs"])

    rng = jc.rng_for("moe_topk")
    p = moe_params(rng)
    x = jc.normal(rng, (10, 8))
    add("moe_topk", model="top-2 mixture of 4 experts (lax.top_k routing, gathered expert "
        "weights); weights as arguments", fn=moe, params=p, inputs=[x], input_names=["tokens"])

    rng = jc.rng_for("flow_special")
    p = flow_params(rng)
    x = jc.normal(rng, (8, 4))
    add("flow_special", model="Gaussianisation flow: erf, erf_inv, lgamma (Student-t base), "
        "log_ndtr, erfc; weights as arguments",
        fn=flow, params=p, inputs=[x], input_names=["x"])

    rng = jc.rng_for("physics_while")
    p = {"drag": np.float32(0.05)}
    pos = np.stack([np.zeros(4), rng.uniform(0.5, 2.0, 4)], -1).astype(np.float32)
    vel = np.stack([rng.uniform(1, 4, 4), rng.uniform(0, 6, 4)], -1).astype(np.float32)
    add("physics_while", model="projectile with drag stepped by lax.while_loop until all land "
        "(data-dependent trip count); drag as argument",
        fn=physics_while, params=p, inputs=[pos, vel], input_names=["pos", "vel"],
        grad_mode="fwd", notes="JAX cannot reverse-differentiate lax.while_loop: the golden "
        "gradient is forward mode (jax.jacfwd of the scalar loss)")

    rng = jc.rng_for("linalg")
    p = linalg_params()
    x = jc.normal(rng, (6, 3))
    y = jc.normal(rng, (6, 2))
    kw = dict(fn=linalg_model, params=p, inputs=[x, y], input_names=["x", "y"], vmap=True)
    add("linalg_cpu", model="GP regression with cholesky, cho_solve, eigh, svd, solve "
        "(LAPACK custom calls); hyperparameters as arguments", **kw)
    add("linalg_cuda", model="the linalg model lowered for cuda (cuSOLVER custom calls)",
        platforms=("cuda",), **kw)
    add("linalg_rocm", model="the linalg model lowered for rocm (hipSOLVER custom calls)",
        platforms=("rocm",), **kw)
    add("linalg_cpu_cuda", model="the linalg model lowered for cpu and cuda (both "
        "platforms' custom calls behind a platform-index case)", platforms=("cpu", "cuda"), **kw)

    rng = jc.rng_for("qr_lstsq")
    p = {"log_scale": jc.normal(rng, (3,), 0.2)}
    x = jc.normal(rng, (7, 3))
    y = jc.normal(rng, (7, 2))
    kw = dict(fn=qr_lstsq, params=p, inputs=[x, y], input_names=["x", "y"])
    add("qr_cpu", model="least squares via jnp.linalg.qr + solve_triangular (LAPACK geqrf/"
        "orgqr custom calls); column scales as arguments", **kw)
    add("qr_cuda", model="QR least squares lowered for cuda (cuSOLVER geqrf/orgqr)",
        platforms=("cuda",), **kw)

    rng = jc.rng_for("convnet")
    p = conv_params(rng)
    images = jc.normal(rng, (2, 8, 8, 3))
    add("convnet_rocm", model="small NHWC conv net lowered for rocm; weights as arguments",
        fn=convnet, params=p, inputs=[images], input_names=["images"], platforms=("rocm",))
    add("convnet_closed", model="small NHWC conv net; weights closed over",
        fn=convnet, params=p, inputs=[images], input_names=["images"], closed=True)
