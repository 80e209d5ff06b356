"""PyTorch/XLA's HLO for the corpus (producer "hlo", entries `xla_*`): torch modules run on the
XLA device (`PJRT_DEVICE=CPU`) with `XLA_FLAGS=--xla_dump_to=DIR`, as a PyTorch/XLA user dumps
the graph `torch_xla.sync()` compiles (issue 29).

Each model gives `xla_<model>_before_opt` and `xla_<model>_after_opt`, whose artifact is the
dump's text file as XLA wrote it (`module_0001.SyncTensorsGraph.80.before_optimizations.txt`,
`....cpu_after_optimizations.txt`). The graph's parameters are the device data it reads, in the
order `torch_xla._XLAC._get_tensors_xla_device_data_node` gives (its weights, its inputs, and
scalars PyTorch/XLA moved to the device itself): the entry's arguments, in that order, named by
the module's parameter paths. `xla_mlp_wrapped` is dumped with
`XLA_PARAMETER_WRAPPING_THREADSHOLD=2`: its graph takes one tuple parameter. Goldens: the
outputs `torch_xla.sync()` computes, and `torch.autograd.grad` of the corpus loss on the XLA
device. Runs in the gen-torch-xla environment.
"""

from __future__ import annotations

import os
import pathlib
import zlib

import numpy as np

try:
    from producers import hlo_dumps  # under make_corpus.py
except ImportError:  # the child: tests/corpus/producers is on sys.path
    import hlo_dumps

MODELS = ("xla_mlp", "xla_mlp_wrapped", "xla_transformer", "xla_lstm", "xla_topk",
          "xla_cnn_bn_eval", "xla_cnn_train_step")
ENV = {"PJRT_DEVICE": "CPU"}


def build(root, only=None):
    hlo_dumps.build(root, only, "hlo_torch_xla_models", MODELS, "txt", env_for=lambda name: dict(
        ENV, **({"XLA_PARAMETER_WRAPPING_THREADSHOLD": "2"} if name == "xla_mlp_wrapped" else {})))


# ------------------------------------------------------------ the child (gen-torch-xla venv)

def _model(torch, name):
    """(description, module, {input name: array}, output names, notes)."""
    nn = torch.nn
    torch.manual_seed(zlib.crc32(name.encode()))
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    if name in ("xla_mlp", "xla_mlp_wrapped"):
        class MLP(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc1, self.norm = nn.Linear(16, 32), nn.LayerNorm(32)
                self.fc2 = nn.Linear(32, 8)

            def forward(self, x):
                return torch.log_softmax(self.fc2(torch.tanh(self.norm(self.fc1(x)))), -1)
        wrapped = " (XLA_PARAMETER_WRAPPING_THREADSHOLD=2: one tuple parameter)" * (
            name == "xla_mlp_wrapped")
        return (f"MLP 16-32-8 with LayerNorm (lowered to batch-norm-training), tanh, "
                f"log_softmax{wrapped}", MLP(),
                {"x": rng.standard_normal((4, 16)).astype(np.float32)}, ["log_probs"], "")
    if name == "xla_transformer":
        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = nn.Embedding(20, 16)
                self.layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
                self.head = nn.Linear(16, 20)

            def forward(self, tokens):
                return self.head(self.layer(self.embed(tokens)))
        tokens = rng.integers(0, 20, (2, 6)).astype(np.int64)
        return ("token embedding (s64 ids), one post-norm transformer encoder layer (2 heads, "
                "LayerNorm as batch-norm-training), vocabulary head", Block(),
                {"tokens": tokens}, ["logits"], "")
    if name == "xla_lstm":
        class Seq(nn.Module):
            def __init__(self):
                super().__init__()
                self.lstm = nn.LSTM(6, 8, batch_first=True)
                self.head = nn.Linear(8, 3)

            def forward(self, xs):
                out, (h, c) = self.lstm(xs)
                return self.head(out), c
        return ("one-layer LSTM over 5 steps (unrolled by PyTorch/XLA) and a linear head", Seq(),
                {"xs": rng.standard_normal((3, 5, 6)).astype(np.float32)}, ["logits", "cell"],
                "")
    if name == "xla_topk":
        class Router(nn.Module):
            def __init__(self):
                super().__init__()
                self.gate = nn.Linear(6, 10)

            def forward(self, x):
                scores = self.gate(x)
                values, indices = torch.topk(scores, 3, dim=-1)
                ranked, order = torch.sort(scores, dim=0, descending=True, stable=True)
                return values, indices, ranked, order
        return ("top-3 routing (torch.topk: s64 indices) and a stable descending sort with its "
                "permutation", Router(), {"x": rng.standard_normal((5, 6)).astype(np.float32)},
                ["values", "indices", "ranked", "order"], "")
    if name == "xla_cnn_bn_eval":
        class CNNBN(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv, self.bn = nn.Conv2d(3, 6, 3, padding=1), nn.BatchNorm2d(6)
                self.fc = nn.Linear(6 * 4 * 4, 4)
                with torch.no_grad():  # running statistics of a trained model
                    self.bn.running_mean.normal_(0, 0.5)
                    self.bn.running_var.uniform_(0.5, 2.0)

            def forward(self, images):
                h = torch.max_pool2d(torch.relu(self.bn(self.conv(images))), 2)
                return self.fc(h.flatten(1))
        return ("NCHW conv net with BatchNorm2d in eval mode (batch-norm-inference on its "
                "running statistics, arguments of role buffer), max-pool, linear head",
                CNNBN().eval(), {"images": rng.standard_normal((2, 3, 8, 8)).astype(np.float32)},
                ["logits"], "")
    if name == "xla_cnn_train_step":
        class CNN(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv1, self.conv2 = nn.Conv2d(3, 8, 3, padding=1), nn.Conv2d(8, 8, 3,
                                                                                   padding=1)
                self.fc = nn.Linear(8, 5)

            def forward(self, images):
                h = torch.max_pool2d(torch.relu(self.conv1(images)), 2)
                h = torch.relu(self.conv2(h)).mean((2, 3))
                return self.fc(h)
        return ("a training step of an NCHW conv net (conv-relu-maxpool-conv-relu-mean-linear): "
                "its cross-entropy loss and gradient w.r.t. each weight (max-pool's gradient is "
                "a select-and-scatter)", CNN(),
                {"images": rng.standard_normal((2, 3, 8, 8)).astype(np.float32),
                 "labels": np.array([1, 3], np.int64)}, None,
                "the outputs are gradients: no golden gradient of the corpus loss (it would be "
                "second order)")
    raise KeyError(name)


def _train_step(torch, module, names):
    def step(images, labels):
        loss = torch.nn.functional.cross_entropy(module(images), labels)
        grads = torch.autograd.grad(loss, [p for _, p in names])
        return (loss,) + tuple(grads)
    return step


_XLA_TYPES = {"f32": "torch.float32", "s64": "torch.int64", "s32": "torch.int32",
              "pred": "torch.bool"}


def _check_parameters(text_file, values):
    """The dumped module's parameter types are those of the device data, in order."""
    import re
    header = text_file.read_text().split("\n", 1)[0]
    params = header.split("entry_computation_layout={(", 1)[1].split(")->", 1)[0]
    found = [(_XLA_TYPES[t], [int(d) for d in dims.split(",") if d])
             for t, dims in re.findall(r"(\w+)\[([\d,]*)\]", params)]
    want = [(str(v.dtype), list(v.shape)) for v in values]
    if found != want:
        raise RuntimeError(f"{text_file.name}: parameters {found}, device data {want}")


def child(name, out):
    import platform
    import torch
    import torch_xla
    dev = torch_xla.device()
    model, module, inputs, output_names, notes = _model(torch, name)
    module = module.to(dev)
    params = list(module.named_parameters())
    names = {torch_xla._XLAC._xla_get_tensor_id(p): (n, "param") for n, p in params}
    names.update({torch_xla._XLAC._xla_get_tensor_id(b): (n, "buffer")
                  for n, b in module.named_buffers()})
    xs = {}
    for n, a in inputs.items():
        xs[n] = torch.from_numpy(a).to(dev)
        names[torch_xla._XLAC._xla_get_tensor_id(xs[n])] = (n, "input")
    train = name == "xla_cnn_train_step"
    if train:
        run = _train_step(torch, module, params)
        output_names = ["loss"] + [f"d_{n}" for n, _ in params]
        outs = run(*xs.values())
    else:
        with torch.no_grad():
            outs = module(*xs.values())
    outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
    ids, values = torch_xla._XLAC._get_tensors_xla_device_data_node(outs)
    dump = pathlib.Path(out) / "dump"
    before = set(os.listdir(dump)) if dump.exists() else set()
    # only these outputs (torch_xla.sync() would compile every live tensor's pending graph,
    # with other outputs and another parameter order)
    torch_xla._XLAC._xla_sync_multi(outs, [], True)
    prefix = hlo_dumps.new_module(dump, before)
    _check_parameters(dump / f"{prefix}.before_optimizations.txt", values)
    outputs = [o.cpu().detach().numpy() for o in outs]
    args, arg_info, wrt = [], [], []
    for k, (i, v) in enumerate(zip(ids, values)):
        arg_name, role = names.get(i, (f"device_data.{k}", "constant"))
        args.append(v.cpu().detach().numpy())
        grad = role in ("param", "input") and args[-1].dtype.kind == "f" and not train
        arg_info.append({"name": arg_name, "role": role, "grad": grad})
        if grad:
            wrt.append(k)
    grads = {}
    if wrt:
        # the producer's gradient: the same module on the XLA device, leaves for each argument;
        # on the CPU for BatchNorm in eval mode, whose backward PyTorch/XLA 2.9 refuses ("the
        # size of offset factor is 0")
        if name == "xla_cnn_bn_eval":
            dev = "cpu"
            module = module.to(dev)
            params = list(module.named_parameters())
            notes = "golden gradient by PyTorch on the CPU: PyTorch/XLA 2.9 refuses BatchNorm's " \
                    "backward in eval mode"
        leaves = {arg_info[k]["name"]: torch.from_numpy(args[k]).to(dev).requires_grad_()
                  for k in wrt}
        state = {n: leaves.get(n, p) for n, p in params}
        call_inputs = [leaves.get(n, xs[n].to(dev)) for n in xs]
        result = torch.func.functional_call(module, state, tuple(call_inputs))
        result = list(result) if isinstance(result, (tuple, list)) else [result]
        loss = sum((r * torch.from_numpy(p).to(dev)).sum()
                   for r, p in zip(result, hlo_dumps.loss_projections(outputs)) if p is not None)
        found = torch.autograd.grad(loss, [leaves[arg_info[k]["name"]] for k in wrt])
        torch_xla.sync()
        grads = {k: g.cpu().numpy() for k, g in zip(wrt, found)}
    vmap_args = [k for k, info in enumerate(arg_info) if info["role"] == "input"]
    hlo_dumps.write_golden(
        out, module=prefix, producer="torch_xla", args=args, arg_info=arg_info,
        outputs=outputs, grads=grads, model=model,
        export_call="module.to(torch_xla.device()); outputs = module(*inputs) (under "
                    "torch.no_grad(), or the training step); torch_xla.sync() with PJRT_DEVICE=CPU",
        versions={"python": platform.python_version(), "numpy": np.__version__,
                  "torch": torch.__version__, "torch_xla": torch_xla.__version__},
        output_names=output_names, vmap_args=vmap_args, notes=notes)
