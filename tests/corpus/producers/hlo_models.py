"""XLA's own HLO for the corpus (producer "hlo"): plain-JAX models (producers/jax_models.py)
as XLA:CPU sees them, before and after its optimizations, with jax's outputs and gradients as
goldens (issue 29).

Each model gives two entries, `model.hlo` (HLO text) each:

- `<name>_before_opt`: `jax.jit(f).lower(*args).as_text(dialect="hlo")`, the module an
  `XLA_FLAGS=--xla_dump_to=DIR` folder's `*.before_optimizations.txt` holds;
- `<name>_after_opt`: `.compile()`'s optimized module (the dump's
  `*.cpu_after_optimizations.txt`), printed with its large constants (`as_text()` elides them
  as `{...}`): fusions, copies, layouts, XLA:CPU's `TopK` custom call, scheduled.

`f` is the jax entry's exported function (`jax.export`, then `Exported.call` jitted with every
argument kept), so the arguments, their order and the goldens are the jax producer's.
"""

from __future__ import annotations

import json
import pathlib
import shutil
import sys
import tempfile

import numpy as np

import entry
from producers import jax_common as jc
from producers import jax_models as jm
from producers.jax_common import jax

PRODUCER = "hlo"
STAGES = {
    "before_opt": ('jax.jit(f, keep_unused=True).lower(*args).as_text(dialect="hlo") (an '
                   "--xla_dump_to folder's before_optimizations.txt)"),
    "after_opt": ("jax.jit(f, keep_unused=True).lower(*args).compile(), its optimized HLO "
                  "module printed with print_large_constants (XLA:CPU's optimized module: an "
                  "--xla_dump_to folder's cpu_after_optimizations.txt)"),
}


def _models():
    rng = jc.rng_for("mlp")
    p = jm.dense_params(rng, [16, 32, 32, 8])
    x = jc.normal(rng, (4, 16))
    yield "mlp", dict(model="MLP 16-32-32-8, tanh, log_softmax; weights as arguments",
                      fn=jm.mlp_softmax, params=p, inputs=[x], input_names=["x"])
    yield "mlp_closed", dict(model="MLP 16-32-32-8; weights closed over (HLO constants)",
                             fn=jm.mlp_softmax, params=p, inputs=[x], input_names=["x"],
                             closed=True)

    rng = jc.rng_for("transformer_scan")
    p = jm.transformer_params(rng)
    ins = jm.transformer_inputs(rng)
    yield "transformer_scan", dict(
        model="decoder transformer, 2 layers via lax.scan (an HLO while over a tuple), causal "
              "+ padding mask; weights as arguments",
        fn=jm.transformer, params=p, inputs=ins, input_names=["tokens", "pad_mask"])

    rng = jc.rng_for("gru_scan")
    p = jm.gru_params(rng)
    xs = jc.normal(rng, (3, 7, 6))
    yield "gru_scan", dict(model="GRU over 7 steps via lax.scan; weights as arguments",
                           fn=jm.gru, params=p, inputs=[xs], input_names=["xs"])

    rng = jc.rng_for("moe_topk")
    p = jm.moe_params(rng)
    x = jc.normal(rng, (10, 8))
    yield "moe_topk", dict(model="top-2 mixture of 4 experts (topk, gathers); weights as "
                                 "arguments", fn=jm.moe, params=p, inputs=[x],
                           input_names=["tokens"])

    rng = jc.rng_for("physics_while")
    p = {"drag": np.float32(0.05)}
    pos = np.stack([np.zeros(4), rng.uniform(0.5, 2.0, 4)], -1).astype(np.float32)
    vel = np.stack([rng.uniform(1, 4, 4), rng.uniform(0, 6, 4)], -1).astype(np.float32)
    yield "physics_while", dict(
        model="projectile with drag stepped by lax.while_loop until all land (data-dependent "
              "trip count); drag as argument",
        fn=jm.physics_while, params=p, inputs=[pos, vel], input_names=["pos", "vel"],
        grad_mode="fwd", notes="JAX cannot reverse-differentiate lax.while_loop: the golden "
        "gradient is forward mode (jax.jacfwd of the scalar loss)")

    rng = jc.rng_for("convnet")
    p = jm.conv_params(rng)
    images = jc.normal(rng, (2, 8, 8, 3))
    yield "convnet", dict(model="small NHWC conv net; weights as arguments", fn=jm.convnet,
                          params=p, inputs=[images], input_names=["images"])


def _optimized_text(compiled) -> str:
    """The optimized module's text with its constants' data (`Compiled.as_text()` prints
    large constants as `{...}`)."""
    try:
        from jaxlib._hlo import HloPrintOptions
    except ImportError:  # jaxlib before 0.8
        from jaxlib.xla_extension import HloPrintOptions
    options = HloPrintOptions()
    options.print_large_constants = True
    return compiled.runtime_executable().hlo_modules()[0].to_string(options)


def build(root, only=None):
    versions = jc.versions()
    root = pathlib.Path(root)
    for name, kw in _models():
        stages = [s for s in STAGES if only in (None, name, f"{name}_{s}")]
        if not stages:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            # the jax producer's entry: the arguments, outputs, projections and gradients
            source = jc.add_entry(tmp, PRODUCER, name, versions=versions, **kw)
            exported = jax.export.deserialize(bytearray((source / "exported.bin").read_bytes()))
            args = entry.Entry(source).args
            lowered = jax.jit(exported.call, keep_unused=True).lower(*args)
            for stage in stages:
                text = (lowered.as_text(dialect="hlo") if stage == "before_opt"
                        else _optimized_text(lowered.compile()))
                folder = root / PRODUCER / f"{name}_{stage}"
                if folder.exists():
                    shutil.rmtree(folder)
                shutil.copytree(source, folder)
                (folder / "exported.bin").unlink()
                (folder / "model.hlo").write_text(text)
                meta = json.loads((folder / "meta.json").read_text())
                meta["artifact"] = "model.hlo"
                meta["export_call"] = (f"{STAGES[stage]}; f = jax.export.deserialize(the jax "
                                       f"producer's artifact).call: {meta['export_call']}")
                meta["extra"]["hlo_stage"] = stage
                (folder / "meta.json").write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")
                print(f"  {PRODUCER}/{folder.name}: {len(text) / 1024:.0f} KiB of HLO text",
                      file=sys.stderr)
