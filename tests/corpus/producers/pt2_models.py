"""The torch.export `.pt2` producer: plain torch.nn models exported with `torch.export.export`
and written with `torch.export.save` (`model.pt2`), which `shlo2jax.load` lowers with torchax.

Each entry folder `pt2/<name>/` holds

- `model.pt2`, as torch wrote it;
- `lowered/`: what shlo2jax's torch front end (`shlo2jax.sources.pt2.lower`) made of it,
  written by `entry.write_lowering`: torchax's StableHLO, the bound values, the bindings. The
  step after torch (`sources.pt2.of_lowered`: the module and its calling convention) is tested
  from these without torch (tests/sources/test_pt2.py);
- the goldens from torch eager on CPU in float32: `data.npz` (the user inputs in the forward's
  order, the outputs, the loss projections, torch autograd's gradient w.r.t. every floating
  input) and `weight_grads.npz` (w.r.t. every parameter the program reads, by state dict name;
  buffers are bound as constants, not trained).

Models are small, seeded and in eval mode. Run in a venv with torch, torchax, the runtime's
jax and shlo2jax (`pip install -e ".[torch]"`):

    python tests/corpus/make_corpus.py --producer pt2 [--only NAME]
"""

from __future__ import annotations

import os
import pathlib
import platform
import shutil
import sys
import zlib

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import jax  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.utils._pytree as torch_pytree  # noqa: E402

from shlo2jax.sources import pt2  # noqa: E402

import entry  # noqa: E402  (found by make_corpus.py's finder)

PRODUCER = "pt2"
torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))

CASES = {}  # name -> builder(name) -> (module, inputs, description)


def case(name):
    def register(builder):
        CASES[name] = builder
        return builder
    return register


def seed_for(name: str) -> int:
    return zlib.crc32(name.encode())


def normal(name, shape):
    rng = np.random.default_rng(seed_for(name))
    return torch.from_numpy(rng.standard_normal(shape).astype(np.float32))


def versions() -> dict:
    from importlib.metadata import version
    return {"python": platform.python_version(), "numpy": np.__version__,
            "torch": torch.__version__, "torchax": version("torchax"), "jax": jax.__version__}


# -- the models

@case("mlp")
def _mlp(name):
    torch.manual_seed(seed_for(name))
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))
    return model, (normal(name, (3, 16)),), "Linear-GELU-Linear"


class CnnBn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.head = torch.nn.Linear(8, 5)

    def forward(self, image):
        return self.head(torch.relu(self.bn(self.conv(image))).mean(dim=(2, 3)))


@case("cnn_bn")
def _cnn_bn(name):
    torch.manual_seed(seed_for(name))
    model = CnnBn()
    with torch.no_grad():  # running statistics that are not the initial 0 / 1
        model.bn.running_mean.copy_(0.1 * torch.randn(8))
        model.bn.running_var.copy_(0.5 + torch.rand(8))
    return model, (normal(name, (2, 3, 8, 8)),), "Conv-BatchNorm (eval)-ReLU, mean pool, Linear"


class Encoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0,
                                                      batch_first=True)
        self.head = torch.nn.Linear(8, 3)

    def forward(self, tokens):
        return self.head(self.layer(tokens))


@case("transformer")
def _transformer(name):
    torch.manual_seed(seed_for(name))
    return Encoder(), (normal(name, (2, 5, 8)),), \
        "nn.TransformerEncoderLayer (d_model 8, 2 heads) and a Linear head"


class Buffers(torch.nn.Module):
    """A persistent buffer (in the state dict), a non-persistent one (not in it), and two inputs
    returned as a dict."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(6, 4)
        self.register_buffer("center", 0.1 * torch.randn(6))
        self.register_buffer("gain", 1.0 + 0.1 * torch.randn(4), persistent=False)

    def forward(self, x, shift):
        y = self.proj(x - self.center) * self.gain
        # (keys in sorted order: a dict jax.vmap rebuilds has its keys sorted, and the vmap
        # check compares leaves in order)
        return {"norm": (y * y).sum(dim=-1), "y": y + shift}


@case("buffers")
def _buffers(name):
    torch.manual_seed(seed_for(name))
    return Buffers(), (normal(name, (3, 6)), normal(name + "/shift", (3, 4))), \
        "Linear with a persistent and a non-persistent buffer, two inputs, dict output"


# -- writing an entry

def _flat(result) -> list:
    leaves, _ = torch_pytree.tree_flatten(result)
    return [leaf for leaf in leaves if isinstance(leaf, torch.Tensor)]


def _autograd(module, inputs, projections, params: list):
    """torch autograd of the loss w.r.t. the parameters `params` and every floating input."""
    named = dict(module.named_parameters())
    leaves = {k: named[k].detach().clone().requires_grad_(True) for k in params}
    xs = [x.detach().clone().requires_grad_(x.is_floating_point()) for x in inputs]
    out = _flat(torch.func.functional_call(module, leaves, tuple(xs), strict=False))
    loss = sum((o * torch.from_numpy(p)).sum() for o, p in zip(out, projections)
               if p is not None)
    wrt = list(leaves.values()) + [x for x in xs if x.requires_grad]
    grads = torch.autograd.grad(loss, wrt, allow_unused=True)
    by_id = {id(v): (g if g is not None else torch.zeros_like(v)) for v, g in zip(wrt, grads)}
    return ({k: by_id[id(v)].numpy() for k, v in leaves.items()},
            {i: by_id[id(x)].numpy() for i, x in enumerate(xs) if x.requires_grad})


def write(root, name: str) -> pathlib.Path:
    module, inputs, description = CASES[name](name)
    module = module.eval()
    folder = pathlib.Path(root) / PRODUCER / name
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    torch.export.save(torch.export.export(module, inputs), str(folder / "model.pt2"))
    data = (folder / "model.pt2").read_bytes()
    lowered = pt2.lower(data, f"{PRODUCER}/{name}/model.pt2")
    entry.write_lowering(folder, lowered._asdict())
    params = [n for kind, n, _ in lowered.arguments if kind == "param"]

    with torch.no_grad():
        outputs = [o.numpy() for o in _flat(module(*inputs))]
    projections = entry.loss_projections(outputs)
    weight_grads, input_grads = _autograd(module, inputs, projections, params)
    arg_info = [{"name": spec[0], "role": "input", "grad": i in input_grads}
                for i, spec in enumerate(lowered.inputs)]
    entry.write_entry(
        folder, producer=PRODUCER, model=description, artifact_name="model.pt2", artifact=data,
        args=[x.numpy() for x in inputs], arg_info=arg_info, outputs=outputs,
        projections=projections, grads=input_grads, versions=versions(),
        export_call="torch.export.save(torch.export.export(model.eval(), args), 'model.pt2')",
        function=pt2.FUNCTION, vmap_args=list(range(len(inputs))),
        notes="buffers and lifted constants are bound as constants: weight_grads.npz holds "
              "the parameters' gradients only",
        extra={"weight_grads": "weight_grads.npz", "lowered": entry.LOWERED,
               "params_read": params})
    np.savez_compressed(folder / "weight_grads.npz", **weight_grads)
    size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    print(f"  {PRODUCER}/{name}: {len(inputs)} inputs, {len(params)} parameters read, "
          f"{size / 1024:.0f} KiB", file=sys.stderr)
    return folder


def build(root, only=None) -> None:
    names = [only] if only else list(CASES)
    for name in names:
        if name not in CASES:
            raise SystemExit(f"no {PRODUCER} entry {name!r}; entries: {', '.join(CASES)}")
        write(root, name)
