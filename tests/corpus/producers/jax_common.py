"""What every JAX-based producer (plain JAX, Flax, Equinox, Keras on JAX) shares: export a
model with `jax.export`, run it, differentiate it with `jax.grad` of the source, write the entry.

A model is `fn(params, *inputs)` returning an array or a pytree of arrays; `params` is any
pytree of arrays (or None). With `closed=False` the exported function takes the flattened
parameters followed by the inputs; with `closed=True` the parameters are closed over (baked into
the artifact as constants) and the producer's gradients with respect to them are written beside
the entry in `param_grads.npz` (and their values in `params.npz`), keyed by parameter path.
"""

from __future__ import annotations

import os
import pathlib
import platform
import sys
import zlib

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import entry  # noqa: E402  (make_corpus.py's finder provides it)

# The producers' gradients and outputs are computed in float32 as the models are written; x64
# stays off so the exported programs are what a default-configured JAX user exports.
jax.config.update("jax_enable_x64", False)


def versions(**modules) -> dict:
    out = {"python": platform.python_version(), "numpy": np.__version__, "jax": jax.__version__}
    import jaxlib
    out["jaxlib"] = jaxlib.__version__
    for name, module in modules.items():
        out[name] = getattr(module, "__version__", "?")
    return out


def rng_for(name: str) -> np.random.Generator:
    """A generator seeded by the entry's name: each entry's inputs are fixed and independent."""
    return np.random.default_rng(zlib.crc32(name.encode()))


def normal(rng, shape, scale=1.0, dtype=np.float32):
    return (scale * rng.standard_normal(shape)).astype(dtype)


def path_name(path) -> str:
    return jax.tree_util.keystr(path, simple=True, separator=".") or "."


def _promote(x):
    return x.astype(jnp.promote_types(x.dtype, jnp.float32))


def projection_loss(outputs, projections):
    """sum_i sum(out_i * proj_i) over the floating outputs (in at least float32)."""
    total = jnp.float32(0)
    for out, proj in zip(outputs, projections):
        if proj is not None:
            total = total + jnp.sum(_promote(out) * _promote(jnp.asarray(proj)))
    return total


def _describe_platforms(platforms):
    return "" if platforms is None else f", platforms={tuple(platforms)!r}"


def add_entry(root, producer: str, name: str, *, model: str, fn, params, inputs,
              input_names, versions: dict, closed: bool = False, platforms=None,
              vjp_order: int = 0, symbolic_batch: bool = False, vmap: bool = True,
              tolerance=None, notes: str = "", source: str = "", grad_mode: str = "rev"):
    """Exports `fn(params, *inputs)` and writes entry `root/producer/name`.

    symbolic_batch: the leading dimension of every input is exported as the symbolic "b"
    (the stored arguments are concrete). vmap: whether the vmap test batches over the inputs.
    source: how the producer built the function, for the metadata's export call.
    grad_mode: "rev" (jax.grad) or "fwd" (jax.jacfwd of the scalar loss, for functions JAX
    cannot reverse-differentiate, e.g. a lax.while_loop).
    """
    grad = {"rev": jax.grad, "fwd": jax.jacfwd}[grad_mode]
    inputs = [np.asarray(x) for x in inputs]
    leaves_paths, treedef = jax.tree_util.tree_flatten_with_path(params)
    param_leaves = [np.asarray(leaf) for _, leaf in leaves_paths]
    param_names = [path_name(p) for p, _ in leaves_paths]

    def call(leaves, xs):
        return fn(jax.tree_util.tree_unflatten(treedef, list(leaves)), *xs)

    out_struct = jax.eval_shape(lambda *a: call(a[:len(param_leaves)], a[len(param_leaves):]),
                                *param_leaves, *inputs)
    out_paths = [path_name(p) for p, _ in jax.tree_util.tree_flatten_with_path(out_struct)[0]]

    if closed:
        frozen = [jnp.asarray(leaf) for leaf in param_leaves]

        def flat_fn(*xs):
            return tuple(jax.tree_util.tree_leaves(call(frozen, xs)))
        flat_args = list(inputs)
        flat_info = [{"name": n, "role": "input", "grad": entry.is_float(x.dtype)}
                     for n, x in zip(input_names, inputs)]
    else:
        def flat_fn(*args):
            return tuple(jax.tree_util.tree_leaves(
                call(args[:len(param_leaves)], args[len(param_leaves):])))
        flat_args = param_leaves + list(inputs)
        flat_info = ([{"name": n, "role": "param", "grad": entry.is_float(x.dtype)}
                      for n, x in zip(param_names, param_leaves)]
                     + [{"name": n, "role": "input", "grad": entry.is_float(x.dtype)}
                        for n, x in zip(input_names, inputs)])
    n_fixed = len(flat_args) - len(inputs)

    # Export.
    if symbolic_batch:
        (b,) = jax.export.symbolic_shape("b")
        specs = ([jax.ShapeDtypeStruct(a.shape, a.dtype) for a in flat_args[:n_fixed]]
                 + [jax.ShapeDtypeStruct((b,) + x.shape[1:], x.dtype) for x in inputs])
    else:
        specs = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in flat_args]
    exported = jax.export.export(jax.jit(flat_fn), platforms=platforms)(*specs)
    artifact = exported.serialize(vjp_order=vjp_order)
    if exported.ordered_effects or exported.unordered_effects:
        raise NotImplementedError(f"{name}: effects are not modelled in the corpus")

    # The producer's outputs and gradients, from the source function.
    outputs = [np.asarray(o) for o in jax.jit(flat_fn)(*flat_args)]
    projections = entry.loss_projections(outputs)
    float_idx = [i for i, info in enumerate(flat_info) if info["grad"]]

    def loss_of_floats(float_args):
        args = list(flat_args)
        for i, a in zip(float_idx, float_args):
            args[i] = a
        return projection_loss(flat_fn(*args), projections)
    grads = jax.jit(grad(loss_of_floats))([jnp.asarray(flat_args[i]) for i in float_idx])
    grads = {i: np.asarray(g) for i, g in zip(float_idx, grads)}

    # The exported function's own (flat) signature, as `exported.call` takes it: a loader
    # supplies what the module's @main adds or drops (a multi-platform module's platform
    # index; arguments jax dropped as unused, `module_kept_var_idx`).
    kept = list(exported.module_kept_var_idx)
    args, arg_info, arg_grads = list(flat_args), list(flat_info), dict(grads)
    dropped = [flat_info[i]["name"] for i in range(len(flat_args)) if i not in kept]
    vmap_args = None
    if vmap:
        vmap_args = [j for j, info in enumerate(arg_info) if info["role"] == "input"]

    call_desc = (f"jax.export.export(jax.jit(f){_describe_platforms(platforms)})(*specs)"
                 f".serialize({'vjp_order=%d' % vjp_order if vjp_order else ''})")
    if symbolic_batch:
        call_desc += ' with specs batch dimension jax.export.symbolic_shape("b")'
    export_call = (f"{call_desc}; f = {'a closure over the parameters' if closed else 'the model with parameters as arguments'}"
                   f", flattened: f(*{'inputs' if closed else 'params_leaves, *inputs'})")
    if source:
        export_call += f"; model: {source}"

    note_parts = [notes] if notes else []
    if platforms is not None and tuple(platforms) != ("cpu",):
        note_parts.append(f"lowered for {tuple(exported.platforms)} without such a device: the "
                          "goldens are the same JAX function run on CPU")
    if dropped:
        note_parts.append(f"jax.export dropped unused argument(s) {dropped}")
    extra = {"platforms": list(exported.platforms), "vjp_order": vjp_order,
             "output_paths": out_paths,
             "grad_by": "jax.grad" if grad_mode == "rev" else "jax.jacfwd (forward mode)"}
    folder = pathlib.Path(root) / producer / name
    if closed and param_leaves:
        pgrads = jax.jit(grad(
            lambda leaves: projection_loss(tuple(jax.tree_util.tree_leaves(
                call(leaves, [jnp.asarray(x) for x in inputs]))), projections)))(
            [jnp.asarray(leaf) for leaf in param_leaves])
        float_params = [(n, leaf, g) for n, leaf, g in zip(param_names, param_leaves, pgrads)
                        if entry.is_float(leaf.dtype)]
        extra["closed_params"] = {
            "values": "params.npz", "grads": "param_grads.npz",
            "paths": [n for n, _, _ in float_params],
            "note": "the producer's gradient of the same loss w.r.t. each closed-over "
                    "(constant) floating parameter, keyed by parameter path"}
    entry.write_entry(
        folder, producer=producer, model=model, artifact_name="exported.bin", artifact=artifact,
        args=args, arg_info=arg_info, outputs=outputs, projections=projections,
        grads=arg_grads, versions=versions, export_call=export_call,
        output_names=out_paths, tolerance=tolerance, vmap_args=vmap_args,
        notes="; ".join(note_parts), extra=extra)
    for stale in ("params.npz", "param_grads.npz"):
        (folder / stale).unlink(missing_ok=True)
    if closed and param_leaves:
        np.savez_compressed(folder / "params.npz", **{n: v for n, v, _ in float_params})
        np.savez_compressed(folder / "param_grads.npz",
                            **{n: np.asarray(g) for n, _, g in float_params})
    size = sum(p.stat().st_size for p in folder.iterdir())
    print(f"  {producer}/{name}: {len(args)} args, {len(outputs)} outputs, "
          f"{size / 1024:.0f} KiB", file=sys.stderr)
    return folder
