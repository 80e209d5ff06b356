"""Exporting a PyTorch module the way a torchax user does, and writing it as a corpus entry.

`torch.export.export(module, args)` then torchax's `exported_program_to_stablehlo`, which
returns the weights and a `jax.export.Exported` whose function takes `(weights, (inputs,))`:
the artifact is that `Exported`'s `serialize()` (`exported.bin`). Its flat arguments are the
exported program's parameters, then its buffers, then its lifted tensor constants (torchax's
calling convention), then the user inputs; `arg_info` names each with torch's placeholder name
(`p_...`, `b_...`, `c_...` or the input's name) and its fully qualified target.

Goldens come from torch eager on CPU in float32 with the same seeded inputs: the outputs, and
torch autograd's gradient of `sum_i sum(out_i * proj_i)` with respect to every floating
parameter and every floating user input. Two checks of the producer itself are kept in the
metadata's `extra`: the `Exported` run by JAX against torch eager, and `jax.grad` through
torchax's own JAX function (before export) against torch autograd.
"""

from __future__ import annotations

import os
import platform
import zlib

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.utils._pytree as torch_pytree  # noqa: E402
import torchax  # noqa: E402
import torchax.export  # noqa: E402

import entry  # noqa: E402  (tests/corpus is on sys.path: make_corpus.py puts it there)

PRODUCER = "torch"

torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))


def versions() -> dict:
    import jaxlib
    out = {"python": platform.python_version(), "numpy": np.__version__,
           "torch": torch.__version__, "torchax": _version("torchax"),
           "jax": jax.__version__, "jaxlib": jaxlib.__version__}
    for name in ("transformers", "torchvision"):
        out[name] = _version(name)
    return out


class StageError(RuntimeError):
    """A failure of one stage of the export (torch.export or torchax), with the original error."""

    def __init__(self, stage: str, error: BaseException):
        super().__init__(f"{stage}: {type(error).__name__}: {error}")
        self.stage = stage
        self.error = error


def _version(package: str) -> str:
    try:
        from importlib.metadata import version
        return version(package)
    except Exception:  # noqa: BLE001 - a package that is not installed has no version
        return "not installed"


def seed_for(name: str) -> int:
    return zlib.crc32(name.encode())


def rng_for(name: str) -> np.random.Generator:
    """Inputs are fixed per entry and independent of the other entries."""
    return np.random.default_rng(seed_for(name))


def _input_names(exported_program) -> list:
    from torch.export.graph_signature import InputKind
    return [spec.arg.name for spec in exported_program.graph_signature.input_specs
            if spec.kind == InputKind.USER_INPUT]


def state_arg_info(exported_program, model) -> list:
    """Names of torchax's state arguments in its order: parameters, buffers, lifted constants."""
    from torch.export.graph_signature import InputKind
    signature = exported_program.graph_signature
    placeholder = {spec.target: spec.arg.name for spec in signature.input_specs
                   if spec.kind != InputKind.USER_INPUT}
    info = []
    for target in signature.parameters:
        info.append({"name": placeholder[target], "target": target, "role": "param"})
    for target in signature.buffers:
        info.append({"name": placeholder[target], "target": target, "role": "buffer"})
    for target in signature.lifted_tensor_constants:
        info.append({"name": placeholder[target], "target": target, "role": "constant"})
    return info


def _float_tensor(t) -> bool:
    return isinstance(t, torch.Tensor) and t.is_floating_point()


def _flat_outputs(result) -> list:
    leaves, _ = torch_pytree.tree_flatten(result)
    return [leaf for leaf in leaves if isinstance(leaf, torch.Tensor)]


def projection_loss_torch(outputs, projections):
    total = torch.zeros((), dtype=torch.float32)
    for out, proj in zip(outputs, projections):
        if proj is not None:
            total = total + (out.to(torch.float32) * torch.from_numpy(proj).to(torch.float32)).sum()
    return total


def projection_loss_jax(outputs, projections):
    total = jnp.float32(0)
    for out, proj in zip(outputs, projections):
        if proj is not None:
            total = total + jnp.sum(out.astype(jnp.float32) * jnp.asarray(proj, jnp.float32))
    return total


def max_rel_err(got, want) -> float:
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    scale = np.max(np.abs(want)) if want.size else 0.0
    diff = np.max(np.abs(got - want)) if want.size else 0.0
    return float(diff / scale) if scale > 0 else float(diff)


def add_entry(root, name: str, *, model: str, family: str, module: torch.nn.Module, inputs,
              input_names=None, dynamic_shapes=None, vmap: bool = True, gelu: str = "none",
              tolerance=None, notes: str = "", construction: str = "",
              versions_: dict | None = None, output_names=None, vjp_order: int = 0):
    """Exports `module(*inputs)` and writes entry `root/torch/name`.

    inputs: torch tensors (the user inputs, in the module's positional order).
    dynamic_shapes: passed to torch.export.export (then the stored arguments are one concrete
    instance, and the entry is not meant for vmap). gelu: which GELU the model uses ("exact",
    "tanh" or "none"), for the reports. vjp_order: passed to Exported.serialize, so the
    artifact also carries JAX's VJP of torchax's function (with torchax's own derivative
    rules, e.g. torch's padding_idx rule for embeddings, which the forward program cannot
    express).
    """
    module = module.eval()
    inputs = tuple(inputs)
    export_kwargs = {} if dynamic_shapes is None else {"dynamic_shapes": dynamic_shapes}
    try:
        exported_program = torch.export.export(module, inputs, **export_kwargs)
    except Exception as e:
        raise StageError("torch.export.export", e) from e
    try:
        weights, exported = torchax.export.exported_program_to_stablehlo(exported_program)
        artifact = exported.serialize(vjp_order=vjp_order)
    except Exception as e:
        raise StageError("torchax exported_program_to_stablehlo", e) from e

    info = state_arg_info(exported_program, module)
    placeholder_inputs = _input_names(exported_program)
    if len(info) != len(weights):
        raise RuntimeError(f"{name}: {len(info)} named states but torchax passes {len(weights)}")
    flat_avals = exported.in_avals
    if len(flat_avals) != len(weights) + len(inputs):
        raise RuntimeError(f"{name}: exported function takes {len(flat_avals)} arguments, "
                           f"expected {len(weights)} states + {len(inputs)} inputs")

    # Arguments in the exported function's dtypes: with JAX's default x64 off, torchax
    # exports int64 tensors (token ids, masks, position ids) as int32.
    args, arg_info = [], []
    for i, (record, w) in enumerate(zip(info, weights)):
        value = np.asarray(w)
        aval = flat_avals[i]
        if tuple(value.shape) != tuple(aval.shape) or value.dtype != aval.dtype:
            raise RuntimeError(f"{name}: state {record['name']} is {value.dtype}{value.shape} "
                               f"but the export takes {aval}")
        args.append(value)
        arg_info.append(record)
    for k, t in enumerate(inputs):
        aval = flat_avals[len(weights) + k]
        value = t.detach().cpu().numpy()
        if value.dtype != aval.dtype:
            if value.dtype.kind in "iub" and np.dtype(aval.dtype).kind in "iub":
                if not np.array_equal(value.astype(aval.dtype).astype(value.dtype), value):
                    raise RuntimeError(f"{name}: input {k} does not fit {aval.dtype}")
            value = value.astype(aval.dtype)
        args.append(value)
        label = (input_names[k] if input_names else placeholder_inputs[k])
        arg_info.append({"name": label, "placeholder": placeholder_inputs[k], "role": "input",
                         "torch_dtype": str(t.dtype).replace("torch.", "")})

    # Torch eager goldens: outputs and autograd of the projection loss.
    # Tied parameters (a language model's embedding and output projection sharing one tensor)
    # are separate arguments of the export, but torch.export's graph reads only one of them
    # for every use: that one gets the tensor's whole gradient, the unread ones zero (what
    # differentiating the exported function gives). One leaf per distinct tensor.
    params_by_target = dict(module.named_parameters(remove_duplicate=False))
    used = {node.name: bool(node.users) for node in exported_program.graph.nodes
            if node.op == "placeholder"}
    leaf_of_tensor, leaf_by_target, leaves, tied = {}, {}, [], {}
    for index, record in enumerate(arg_info[:len(weights)]):
        record["grad"] = False
        if record["role"] == "param":
            p = params_by_target[record["target"]]
            if id(p) not in leaf_of_tensor:
                leaf = p.detach().clone()
                if p.is_floating_point():
                    leaf.requires_grad_(True)
                leaf_of_tensor[id(p)] = leaf
            leaf = leaf_of_tensor[id(p)]
            if p.is_floating_point():
                record["grad"] = True
                leaves.append((index, leaf))
    for target, p in params_by_target.items():
        if id(p) in leaf_of_tensor:
            leaf_by_target[target] = leaf_of_tensor[id(p)]
        group = sorted(t for t, q in params_by_target.items() if q is p)
        if len(group) > 1:
            tied[group[0]] = group
    for group in tied.values():
        readers = [r["name"] for r in arg_info[:len(weights)]
                   if r.get("target") in group and used.get(r["name"])]
        if len(readers) > 1:
            raise RuntimeError(f"{name}: tied parameters {group} are read through several "
                               f"arguments {readers}; their gradients cannot be told apart")
    torch_inputs = []
    for k, t in enumerate(inputs):
        record = arg_info[len(weights) + k]
        if _float_tensor(t):
            t = t.detach().clone().requires_grad_(True)
            record["grad"] = True
            leaves.append((len(weights) + k, t))
        else:
            record["grad"] = False
        torch_inputs.append(t)
    result = torch.func.functional_call(module, leaf_by_target, tuple(torch_inputs),
                                        strict=False)
    outs_t = _flat_outputs(result)
    outputs = [o.detach().cpu().numpy() for o in outs_t]
    if len(outputs) != len(exported.out_avals):
        raise RuntimeError(f"{name}: eager gives {len(outputs)} outputs, export {len(exported.out_avals)}")
    projections = entry.loss_projections(outputs)
    loss = projection_loss_torch(outs_t, projections)
    grad_values = torch.autograd.grad(loss, [leaf for _, leaf in leaves], allow_unused=True)
    grads = {}
    for (index, leaf), g in zip(leaves, grad_values):
        unread = arg_info[index]["role"] == "param" and not used.get(arg_info[index]["name"], True)
        g = torch.zeros_like(leaf) if g is None or unread else g
        grads[index] = g.detach().cpu().numpy()

    # The producer's own export, run by JAX, against torch eager; and jax.grad through
    # torchax's JAX function (what a torchax user differentiates) against torch autograd.
    jax_args_state = [jnp.asarray(a) for a in args[:len(weights)]]
    jax_args_in = tuple(jnp.asarray(a) for a in args[len(weights):])
    got = exported.call(jax_args_state, (list(jax_args_in),))
    got = list(got) if isinstance(got, (list, tuple)) else [got]
    torchax_forward = max((float(np.max(np.abs(np.asarray(g, np.float64) - o)))
                           if o.size and entry.is_float(o.dtype) else 0.0)
                          for g, o in zip(got, outputs))
    extra = {"torchax_export_vs_eager_forward_max_abs_err": torchax_forward}
    try:
        _, func = torchax.export.exported_program_to_jax(exported_program)
        grad_positions = [i for i, r in enumerate(arg_info) if r["grad"]]

        def loss_of(diff):
            full = list(jax_args_state) + list(jax_args_in)
            for i, v in zip(grad_positions, diff):
                full[i] = v
            outs = func(full[:len(weights)], (full[len(weights):],))
            return projection_loss_jax(list(outs), projections)

        jgrads = jax.grad(loss_of)([jnp.asarray(args[i]) for i in grad_positions])
        errs = [max_rel_err(g, grads[i]) for i, g in zip(grad_positions, jgrads)]
        nan = int(sum(int(np.sum(~np.isfinite(np.asarray(g)))) for g in jgrads))
        extra["torchax_jax_grad_max_rel_err"] = max(errs) if errs else 0.0
        extra["torchax_jax_grad_nonfinite"] = nan
        extra["torchax_jax_grad_mismatches"] = {
            arg_info[i]["name"]: e for i, e in zip(grad_positions, errs) if not e <= 1e-4}
    except Exception as e:  # noqa: BLE001 - informative only; the entry stands without it
        extra["torchax_jax_grad_error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"
    if vjp_order:
        # The shipped VJP, as JAX itself uses it: jax.grad through the deserialized Exported.
        shipped = jax.export.deserialize(bytearray(artifact))
        grad_positions = [i for i, r in enumerate(arg_info) if r["grad"]]
        n_states = len(weights)

        def shipped_loss(diff):
            full = list(jax_args_state) + list(jax_args_in)
            for i, v in zip(grad_positions, diff):
                full[i] = v
            outs = shipped.call(full[:n_states], (full[n_states:],))
            return projection_loss_jax(list(outs), projections)

        sgrads = jax.grad(shipped_loss)([jnp.asarray(args[i]) for i in grad_positions])
        noise_names = set()
        largest = max((float(np.max(np.abs(g))) for g in grads.values() if g.size), default=0.0)
        for i, g in grads.items():
            if g.size and 0 < float(np.max(np.abs(g))) <= 1e-6 * largest:
                noise_names.add(i)
        errs = [max_rel_err(g, grads[i]) for i, g in zip(grad_positions, sgrads)
                if i not in noise_names]
        extra["shipped_vjp_grad_max_rel_err"] = max(errs) if errs else 0.0
        extra["shipped_vjp_grad_nonfinite"] = int(
            sum(int(np.sum(~np.isfinite(np.asarray(g)))) for g in sgrads))
    extra["gelu"] = gelu
    if tied:
        extra["tied_parameters"] = sorted(tied.values())
    # Nonzero gradients below 1e-6 of the entry's largest: rounding dominates them. An
    # attention key's bias has gradient zero in exact arithmetic (softmax ignores a shift shared
    # by a row), so torch's value is noise and any other implementation's differs from it by
    # ~100%; nearly uniform attention (small init) makes q/k gradients differences of nearly
    # equal terms. A per-argument relative comparison cannot pass on these; listed for the tests.
    largest = max((float(np.max(np.abs(g))) for g in grads.values() if g.size), default=0.0)
    noise = [arg_info[i]["name"] for i, g in sorted(grads.items())
             if g.size and 0 < float(np.max(np.abs(g))) <= 1e-6 * largest]
    if noise:
        extra["noise_level_gradients"] = noise
    unread = [r["name"] for r in arg_info[:len(weights)] if not used.get(r["name"], True)]
    if unread:
        extra["unread_arguments"] = unread
    extra["family"] = family
    extra["n_params"] = int(sum(a.size for a, r in zip(args, arg_info) if r["role"] == "param"))
    if construction:
        extra["construction"] = construction
    extra["artifact_format"] = "jax.export.Exported.serialize() of torchax's Exported"

    dyn = "" if dynamic_shapes is None else f", dynamic_shapes={dynamic_shapes!r}"
    serialize = f"serialize(vjp_order={vjp_order})" if vjp_order else "serialize()"
    export_call = (f"weights, exported = torchax.export.exported_program_to_stablehlo("
                   f"torch.export.export(module.eval(), inputs{dyn})); exported.{serialize}")
    n_states = len(weights)
    folder = entry.write_entry(
        pathlib_join(root, PRODUCER, name), producer=PRODUCER, model=model,
        artifact_name="exported.bin", artifact=artifact, args=args, arg_info=arg_info,
        outputs=outputs, projections=projections, grads=grads,
        versions=versions_ or versions(), export_call=export_call, output_names=output_names,
        tolerance=tolerance,
        vmap_args=(list(range(n_states, n_states + len(inputs))) if vmap and dynamic_shapes is None
                   else None),
        notes=notes, extra=extra)
    return folder, extra


def pathlib_join(root, *parts):
    import pathlib
    return pathlib.Path(root).joinpath(*parts)
