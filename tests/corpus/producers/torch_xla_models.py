"""The PyTorch/XLA producer: plain torch.nn models exported with `torch.export.export` and
PyTorch/XLA's `torch_xla.stablehlo.exported_program_to_stablehlo(ep).save(DIR)`.

Each entry folder `torch_xla/<name>/` holds the bundle exactly as torch_xla saved it, under
`bundle/` (`functions/forward.bytecode|.mlir|.meta`, `data/<state_dict key>`,
`constants/<i>`), and beside it the goldens from torch eager on CPU in float32:

- `data.npz`: the user inputs `arg_i` (in torch's order: what `program["forward"]` takes),
  torch's outputs, the loss projections and torch autograd's gradient of the loss w.r.t.
  every floating user input;
- `weight_grads.npz`: torch autograd's gradient of the same loss w.r.t. every floating
  state_dict entry the function reads (parameters and buffers), keyed by state_dict name;
- for an embedding with `padding_idx`, torch's rule zeroes the gradient of the padding row;
  the exported gather has no such rule, and its true derivative there is the sum of the
  cotangents of the padding positions. `padding_rows.npz` holds that true derivative of those
  rows (torch autograd of the same model with `padding_idx` left out), and `meta.json`
  `extra.rows_apart` names them; the corpus check compares those rows with it and the other
  rows with torch's.

Models are small, seeded (torch.manual_seed and numpy generators seeded by the entry's name)
and in eval mode. Run with `PJRT_DEVICE=CPU` (make_corpus.py sets it):

    python tests/corpus/make_corpus.py --producer torch_xla [--only NAME]
"""

from __future__ import annotations

import copy
import json
import os
import pathlib
import platform
import shutil
import sys
import zlib

os.environ.setdefault("PJRT_DEVICE", "CPU")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.utils._pytree as torch_pytree  # noqa: E402
import torch_xla  # noqa: E402
from torch_xla.stablehlo import exported_program_to_stablehlo  # noqa: E402

import entry  # noqa: E402  (found by make_corpus.py's finder)

PRODUCER = "torch_xla"
torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))

CASES = {}  # name -> builder(name) -> (module, inputs, notes, extra keyword arguments)


def case(name):
    def register(builder):
        CASES[name] = builder
        return builder
    return register


def seed_for(name: str) -> int:
    return zlib.crc32(name.encode())


def rng_for(name: str) -> np.random.Generator:
    return np.random.default_rng(seed_for(name))


def normal(name, shape):
    return torch.from_numpy(rng_for(name).standard_normal(shape).astype(np.float32))


def versions() -> dict:
    return {"python": platform.python_version(), "numpy": np.__version__,
            "torch": torch.__version__, "torch_xla": torch_xla.__version__}


# -- the models

@case("mlp")
def _mlp(name):
    torch.manual_seed(seed_for(name))
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 32),
                                torch.nn.Tanh(), torch.nn.Linear(32, 4))
    return model, (normal(name, (3, 16)),), "Linear-GELU-Linear-Tanh-Linear", {}


class CnnBn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = torch.nn.BatchNorm2d(8)
        self.conv2 = torch.nn.Conv2d(8, 8, 3, stride=2, padding=1)
        self.bn2 = torch.nn.BatchNorm2d(8)
        self.head = torch.nn.Linear(8, 5)

    def forward(self, x):
        x = torch.relu(self.bn1(self.conv1(x)))
        x = torch.relu(self.bn2(self.conv2(x)))
        return self.head(x.mean(dim=(2, 3)))


@case("cnn_bn")
def _cnn_bn(name):
    torch.manual_seed(seed_for(name))
    model = CnnBn()
    # Running statistics that are not the initial 0 / 1, so eval-mode batch norm does work.
    with torch.no_grad():
        for bn in (model.bn1, model.bn2):
            bn.running_mean.copy_(0.1 * torch.randn(8))
            bn.running_var.copy_(0.5 + torch.rand(8))
            bn.weight.copy_(1 + 0.1 * torch.randn(8))
            bn.bias.copy_(0.1 * torch.randn(8))
    return model, (normal(name, (2, 3, 8, 8)),), "Conv-BN-ReLU x2, mean pool, Linear (eval)", {
        "notes": "the gradients w.r.t. the running statistics (buffers) are torch autograd of "
                 "the same eval-mode formula: native_batch_norm cannot differentiate them"}


# torch 2.9.0's decomposition of aten.lstm (torch/_decomp/decompositions.py, one_layer_lstm)
# returns each layer's final state as [1, batch, hidden] where the native kernel returns
# [batch, hidden] (pytorch/pytorch#151200): torch.export records h_n and c_n as
# [layers * directions, 1, batch, hidden], and torch_xla lowers that shape. The output sequence
# is right. A view to the eager shape, with sizes that are not read from h_n, is exported
# right; h.squeeze(0) and h[-1] keep the extra dimension.
class Lstm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTM(6, 12, num_layers=1, batch_first=True)
        self.head = torch.nn.Linear(12, 3)

    def forward(self, x):
        out, (h, c) = self.lstm(x)
        batch = x.shape[0]
        return self.head(out), h.view(batch, 12), c.view(batch, 12)


@case("lstm")
def _lstm(name):
    torch.manual_seed(seed_for(name))
    return Lstm(), (normal(name, (2, 5, 6)),), "one-layer LSTM (batch_first) and a Linear head", {
        "notes": "h_n and c_n returned as a view to (batch, hidden): torch 2.9.0's lstm "
                 "decomposition gives them as [1, 1, batch, hidden] in torch.export "
                 "(pytorch/pytorch#151200), and torch_xla exports that shape"}


class LstmSequence(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTM(6, 8, num_layers=2)

    def forward(self, x):
        return self.lstm(x)[0]


@case("lstm_sequence")
def _lstm_sequence(name):
    torch.manual_seed(seed_for(name))
    return LstmSequence(), (normal(name, (4, 3, 6)),), \
        "two-layer LSTM (sequence first) returning its output sequence", {}


# Importing torch_xla replaces torch.nn.GRU by its scan-based GRU (torch_xla/experimental/
# gru.py), which torch.export cannot trace ("Unable to cast NotImplemented to Tensor" in
# F.linear under the scan); torch's own GRU, which the patch keeps as `_orig`, exports.
TorchGru = getattr(torch.nn.GRU, "_orig", None) or torch.nn.GRU


class GruState(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = TorchGru(6, 8, num_layers=2)

    def forward(self, x):
        return self.gru(x)  # (output, h_n): a GRU's h_n is exported in torch's shape


@case("gru_state")
def _gru_state(name):
    torch.manual_seed(seed_for(name))
    return GruState(), (normal(name, (4, 3, 6)),), \
        "two-layer GRU (sequence first) returning (output, h_n)", {
            "notes": "torch's nn.GRU (torch_xla's import replaces it by a scan-based GRU that "
                     "torch.export cannot trace)"}


class LstmNested(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTM(6, 8, num_layers=2, batch_first=True)
        self.head = torch.nn.Linear(8, 3)

    def forward(self, x):
        out, (h, c) = self.lstm(x)
        state = (2, x.shape[0], 8)  # [layers, batch, hidden]: see Lstm
        return self.head(out), (h.view(state), c.view(state))


@case("lstm_nested")
def _lstm_nested(name):
    torch.manual_seed(seed_for(name))
    return LstmNested(), (normal(name, (3, 4, 6)),), \
        "two-layer LSTM (batch_first) returning (head(output), (h_n, c_n)), nested tuples", {
            "notes": "h_n and c_n returned as a view to [layers, batch, hidden]: torch 2.9.0's "
                     "lstm decomposition gives them as [layers, 1, batch, hidden] in "
                     "torch.export (pytorch/pytorch#151200), and torch_xla exports that shape"}


class Encoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        layer = torch.nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, dropout=0.0,
                                                 batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.head(self.encoder(x))


@case("transformer_encoder")
def _encoder(name):
    torch.manual_seed(seed_for(name))
    return Encoder(), (normal(name, (2, 6, 16)),), \
        "nn.TransformerEncoder, 2 layers, d_model 16, 2 heads", {}


class Decoder(torch.nn.Module):
    """A decoder-only language model: token and position embeddings, causal self-attention."""

    def __init__(self, vocab=40, d=16, seq=7):
        super().__init__()
        self.tokens = torch.nn.Embedding(vocab, d)
        self.positions = torch.nn.Parameter(0.1 * torch.randn(seq, d))
        layer = torch.nn.TransformerEncoderLayer(d, 2, dim_feedforward=32, dropout=0.0,
                                                 batch_first=True, norm_first=True)
        self.blocks = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.norm = torch.nn.LayerNorm(d)
        self.lm_head = torch.nn.Linear(d, vocab, bias=False)
        self.seq = seq

    def forward(self, ids):
        mask = torch.nn.Transformer.generate_square_subsequent_mask(self.seq)
        x = self.tokens(ids) + self.positions
        x = self.blocks(x, mask=mask, is_causal=True)
        return self.lm_head(self.norm(x))


@case("causal_decoder")
def _decoder(name):
    torch.manual_seed(seed_for(name))
    ids = torch.from_numpy(rng_for(name).integers(0, 40, (2, 7)).astype(np.int64))
    return (Decoder(), (ids,),
            "decoder-only LM: embeddings, 2 pre-norm blocks with a causal mask", {})


class Bag(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(30, 8, padding_idx=0)
        self.proj = torch.nn.Linear(8, 4)

    def forward(self, ids, scale):
        e = self.emb(ids) * scale[:, :, None]
        return self.proj(e.sum(dim=1))


@case("embedding_padding_idx")
def _embedding(name):
    torch.manual_seed(seed_for(name))
    rng = rng_for(name)
    ids = rng.integers(1, 30, (3, 6)).astype(np.int64)
    ids[1, 4:] = 0  # padding
    ids[2, 5] = 0
    scale = torch.from_numpy(rng.uniform(0.5, 1.5, (3, 6)).astype(np.float32))
    return Bag(), (torch.from_numpy(ids), scale), \
        "nn.Embedding(padding_idx=0) scaled per position, summed, Linear", \
        {"padding": {"emb.weight": [0]}}


# -- writing an entry

def _flat(result) -> list:
    leaves, _ = torch_pytree.tree_flatten(result)
    return [leaf for leaf in leaves if isinstance(leaf, torch.Tensor)]


def _loss(outputs, projections):
    total = torch.zeros((), dtype=torch.float32)
    for out, proj in zip(outputs, projections):
        if proj is not None:
            total = total + (out * torch.from_numpy(proj)).sum()
    return total


def _autograd(module, state: dict, inputs, projections, padding=None):
    """torch autograd of the loss w.r.t. every floating state entry and input."""
    leaves = {k: v.detach().clone().requires_grad_(v.is_floating_point())
              for k, v in state.items()}
    xs = [x.detach().clone().requires_grad_(x.is_floating_point()) for x in inputs]
    module = _differentiable_buffers(module)
    if padding:  # the same model with padding_idx left out: the gather's true derivative
        module = _without_padding_idx(module)
    out = _flat(torch.func.functional_call(module, leaves, tuple(xs)))
    wrt = [v for v in leaves.values() if v.requires_grad] + [x for x in xs if x.requires_grad]
    grads = torch.autograd.grad(_loss(out, projections), wrt, allow_unused=True)
    by_id = {id(v): (g if g is not None else torch.zeros_like(v)) for v, g in zip(wrt, grads)}
    return ({k: by_id[id(v)].numpy() for k, v in leaves.items() if v.requires_grad},
            {i: by_id[id(x)].numpy() for i, x in enumerate(xs) if x.requires_grad})


def _differentiable_buffers(module):
    """A copy whose eval-mode batch norms compute the same formula with ops torch can
    differentiate w.r.t. the running statistics (native_batch_norm cannot)."""
    clone = copy.deepcopy(module)
    for m in clone.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            def forward(x, m=m):
                shape = (1, -1) + (1,) * (x.dim() - 2)
                scale = (m.weight / torch.sqrt(m.running_var + m.eps)).reshape(shape)
                return (x - m.running_mean.reshape(shape)) * scale + m.bias.reshape(shape)
            m.forward = forward
    return clone


def _without_padding_idx(module):
    clone = copy.deepcopy(module)
    for m in clone.modules():
        if isinstance(m, torch.nn.Embedding):
            m.padding_idx = None
    return clone


def write(root, name: str) -> pathlib.Path:
    module, inputs, description, options = CASES[name](name)
    module = module.eval()
    folder = pathlib.Path(root) / PRODUCER / name
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    exported_program = torch.export.export(module, inputs)
    bundle = exported_program_to_stablehlo(exported_program)
    bundle.save(str(folder / "bundle"))
    meta = json.loads((folder / "bundle" / "functions" / "forward.meta").read_text())
    read = [loc["name"] for loc in meta["input_locations"] if loc["type_"] == "parameter"]

    with torch.no_grad():
        outs_t = _flat(module(*inputs))
    outputs = [o.numpy() for o in outs_t]
    projections = entry.loss_projections(outputs)
    state = dict(module.state_dict())
    weight_grads, input_grads = _autograd(module, state, inputs, projections)
    weight_grads = {k: g for k, g in weight_grads.items() if k in read}

    # The producer's own run of its bundle (torch_xla's StableHLOGraphModule) against eager.
    got = [g.cpu().numpy() for g in _flat(bundle(*inputs))]
    shapes = [(g.shape, o.shape) for g, o in zip(got, outputs) if g.shape != o.shape]
    if shapes or len(got) != len(outputs):
        raise RuntimeError(f"{name}: torch_xla's run of its bundle gives shapes {shapes} "
                           f"({len(got)} outputs), eager {len(outputs)}")
    self_check = max(float(np.max(np.abs(g - o), initial=0.0)) for g, o in zip(got, outputs))

    extra = {"bundle": "bundle", "weight_grads": "weight_grads.npz",
             "weights_read": read, "torch_xla_vs_eager_max_abs": self_check}
    notes = [options["notes"]] if "notes" in options else []
    padding = options.get("padding")
    if padding:
        true_grads, _ = _autograd(module, state, inputs, projections, padding=True)
        rows = {k: {"rows": v, "true": "padding_rows.npz"} for k, v in padding.items()}
        extra["rows_apart"] = rows
        np.savez_compressed(folder / "padding_rows.npz",
                            **{k: true_grads[k][v] for k, v in padding.items()})
        notes.append("padding_idx rows: torch's rule zeroes their gradient (weight_grads.npz); "
                     "the exported gather's true derivative does not (padding_rows.npz holds "
                     "it: torch autograd with padding_idx left out); those rows are checked "
                     "against it, the others against torch")
    arg_info = [{"name": f"args[{i}]", "role": "input", "grad": i in input_grads,
                 "torch_dtype": str(x.dtype).replace("torch.", "")}
                for i, x in enumerate(inputs)]
    entry.write_entry(
        folder, producer=PRODUCER, model=description, artifact_name="bundle", artifact=None,
        args=[x.numpy() for x in inputs], arg_info=arg_info, outputs=outputs,
        projections=projections, grads=input_grads, versions=versions(),
        export_call="torch_xla.stablehlo.exported_program_to_stablehlo("
                    "torch.export.export(model, args)).save('bundle')",
        # vmap over every input (checks.perturbations repeats integer ids: the batched
        # gathers, masks and loops are still exercised)
        function="forward", vmap_args=list(range(len(inputs))),
        notes="; ".join(notes), extra=extra)
    np.savez_compressed(folder / "weight_grads.npz", **weight_grads)
    size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    print(f"  {PRODUCER}/{name}: {len(inputs)} inputs, {len(read)} weights read, "
          f"{size / 1024:.0f} KiB, torch_xla vs eager {self_check:.2g}", file=sys.stderr)
    return folder


def build(root, only=None) -> None:
    names = [only] if only else list(CASES)
    for name in names:
        if name not in CASES:
            raise SystemExit(f"no torch_xla entry {name!r}; entries: {', '.join(CASES)}")
        write(root, name)
