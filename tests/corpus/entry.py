"""The real-producer corpus's entry format: writing (producers' venvs) and reading (the tests).

Needs numpy only, so every producer's environment can write entries and the tests can read
them without any producer installed.

An entry is a folder `tests/corpus/<producer>/<name>/` holding

- the artifact exactly as the producer wrote it: `exported.bin` (a serialized
  `jax.export.Exported`), `model.mlir.bc` (MLIR or VHLO bytecode), `model.mlir` (text),
  `model.hlo` (XLA's HLO text), `bundle/` (a folder: a PyTorch/XLA StableHLO bundle) or
  `saved_model/` (a TensorFlow SavedModel folder jax2tf wrote), `model.pt2` (a torch.export
  archive, `torch.export.save`; beside it `lowered/`, what shlo2jax's torch front end made of
  it: see `write_lowering`);
- `data.npz`: `arg_<i>` the seeded arguments of the exported function, in its order;
  `out_<i>` the producer's own outputs for them; `proj_<i>` a fixed projection for every
  floating output; `grad_<i>` the producer's gradient of the scalar loss
  `sum_i sum(out_i * proj_i)` (floating outputs only) with respect to argument i, for
  every argument whose `grad` is true in the metadata;
- `meta.json`: what made it (see `write_entry`).
"""

from __future__ import annotations

import json
import pathlib
from typing import Optional, Sequence

import numpy as np

CORPUS = pathlib.Path(__file__).resolve().parent

ARTIFACT_NAMES = ("exported.bin", "model.mlir.bc", "model.mlir", "model.hlo", "bundle",
                  "model.hlo.pb", "saved_model", "model.pt2")
# Artifacts that are folders: the producer writes them itself (write_entry's artifact None).
FOLDER_ARTIFACTS = ("bundle", "saved_model")

# Default comparison tolerances. Forward: |got - want| <= atol + rtol * max|want| over
# each output (producers and XLA order float reductions differently). Gradients: the
# brief's 1e-4 relative, |got - want|_inf <= grad_rtol * |want|_inf per argument.
DEFAULT_TOLERANCE = {"forward_rtol": 1e-4, "forward_atol": 1e-5, "grad_rtol": 1e-4}


def is_float(dtype) -> bool:
    dtype = np.dtype(dtype)
    return dtype.kind in "fc" or dtype.name in ("bfloat16",) or dtype.name.startswith("float8")


def loss_projections(outputs: Sequence[np.ndarray], seed: int = 1234) -> list:
    """One fixed, seeded projection per floating output (None for the others)."""
    rng = np.random.default_rng(seed)
    projections = []
    for out in outputs:
        out = np.asarray(out)
        projections.append(rng.standard_normal(out.shape).astype(out.dtype)
                           if is_float(out.dtype) else None)
    return projections


def write_entry(folder, *, producer: str, model: str, artifact_name: str, artifact: bytes,
                args: Sequence[np.ndarray], arg_info: Sequence[dict],
                outputs: Sequence[np.ndarray], projections: Sequence[Optional[np.ndarray]],
                grads: dict, versions: dict, export_call: str,
                function: str = "main", output_names: Optional[Sequence[str]] = None,
                tolerance: Optional[dict] = None, vmap_args: Optional[Sequence[int]] = None,
                notes: str = "", extra: Optional[dict] = None) -> pathlib.Path:
    """Writes one entry.

    arg_info[i]: {"name": the producer's name for argument i (parameter path, placeholder
    name, ...), "role": "param" | "input" | "buffer" | "platform_index" | ..., "grad":
    whether grads[i] is given}. grads: {arg index: the producer's gradient}. vmap_args:
    the argument indices a vmap test batches over (the others are broadcast), or None when
    the entry is not meant for vmap (e.g. a shape-checked dynamic export). extra: anything
    else worth keeping (e.g. gradients of closed-over weights keyed by parameter path).
    """
    if artifact_name not in ARTIFACT_NAMES:
        raise ValueError(f"artifact_name must be one of {ARTIFACT_NAMES}")
    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for name in ARTIFACT_NAMES:
        if name not in FOLDER_ARTIFACTS:
            (folder / name).unlink(missing_ok=True)
    if artifact_name in FOLDER_ARTIFACTS:
        if artifact is not None or not (folder / artifact_name).is_dir():
            raise ValueError(f"{artifact_name} is a folder the producer writes: artifact=None")
    else:
        (folder / artifact_name).write_bytes(artifact)
    if len(arg_info) != len(args):
        raise ValueError(f"{len(args)} args but {len(arg_info)} arg_info records")
    arrays = {}
    for i, a in enumerate(args):
        arrays[f"arg_{i}"] = np.asarray(a)
    for i, o in enumerate(outputs):
        arrays[f"out_{i}"] = np.asarray(o)
    for i, p in enumerate(projections):
        if p is not None:
            arrays[f"proj_{i}"] = np.asarray(p)
    for i, g in grads.items():
        if not arg_info[i].get("grad"):
            raise ValueError(f"gradient for argument {i}, whose arg_info has grad false")
        arrays[f"grad_{i}"] = np.asarray(g)
    for i, info in enumerate(arg_info):
        if info.get("grad") and i not in grads:
            raise ValueError(f"argument {i} is marked grad but has no gradient")
    np.savez_compressed(folder / "data.npz", **arrays)
    meta = {
        "name": folder.name,
        "producer": producer,
        "model": model,
        "artifact": artifact_name,
        "function": function,
        "versions": versions,
        "export_call": export_call,
        "args": [{**info, "shape": list(np.shape(a)), "dtype": str(np.asarray(a).dtype)}
                 for info, a in zip(arg_info, args)],
        "outputs": [{"name": (output_names[i] if output_names else f"out_{i}"),
                     "shape": list(np.shape(o)), "dtype": str(np.asarray(o).dtype)}
                    for i, o in enumerate(outputs)],
        "loss": "sum over floating outputs i of sum(out_i * proj_i)",
        "tolerance": {**DEFAULT_TOLERANCE, **(tolerance or {})},
        "vmap_args": None if vmap_args is None else list(vmap_args),
        "notes": notes,
        "extra": extra or {},
    }
    (folder / "meta.json").write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")
    return folder


LOWERED = "lowered"


def write_lowering(folder, lowering: dict) -> None:
    """Writes `lowered/` beside a `.pt2` artifact: the fields of shlo2jax's
    `sources.pt2.Lowered` (as a dict), so the step after torch is tested without torch:
    `module.mlir.bc` (torchax's StableHLO), `values.npz` (the bound state dict values) and
    `lowering.json` (the arguments' bindings, the inputs, the output pytree spec)."""
    out = pathlib.Path(folder) / LOWERED
    out.mkdir(parents=True, exist_ok=True)
    (out / "module.mlir.bc").write_bytes(lowering["module"])
    np.savez_compressed(out / "values.npz", **lowering["values"])
    record = {"arguments": [list(a) for a in lowering["arguments"]],
              "inputs": [[n, list(shape), dtype] for n, shape, dtype in lowering["inputs"]],
              "outputs": lowering["outputs"]}
    (out / "lowering.json").write_text(json.dumps(record, indent=1) + "\n")


def read_lowering(folder) -> dict:
    """What `write_lowering` wrote, as the fields of `sources.pt2.Lowered`."""
    folder = pathlib.Path(folder) / LOWERED
    record = json.loads((folder / "lowering.json").read_text())
    with np.load(folder / "values.npz", allow_pickle=False) as data:
        values = dict(data)
    return {"module": (folder / "module.mlir.bc").read_bytes(),
            "arguments": tuple(tuple(a) for a in record["arguments"]),
            "inputs": tuple((n, tuple(shape), dtype) for n, shape, dtype in record["inputs"]),
            "values": values, "outputs": record["outputs"]}


class Entry:
    """One corpus entry, read back."""

    def __init__(self, folder):
        self.folder = pathlib.Path(folder)
        self.meta = json.loads((self.folder / "meta.json").read_text())
        self.id = f"{self.meta['producer']}/{self.folder.name}"
        self.artifact_path = self.folder / self.meta["artifact"]
        with np.load(self.folder / "data.npz", allow_pickle=False) as data:
            arrays = dict(data)
        n_args, n_out = len(self.meta["args"]), len(self.meta["outputs"])
        self.args = [arrays[f"arg_{i}"] for i in range(n_args)]
        self.outputs = [arrays[f"out_{i}"] for i in range(n_out)]
        self.projections = [arrays.get(f"proj_{i}") for i in range(n_out)]
        self.grads = {i: arrays[f"grad_{i}"] for i in range(n_args) if f"grad_{i}" in arrays}
        self.tolerance = self.meta["tolerance"]
        # Gradients w.r.t. weights a folder artifact binds (a PyTorch/XLA bundle's data/),
        # keyed by their names (`Function.params`), and rows checked apart (`rows_apart`).
        self.weight_grads, self.rows_apart = {}, {}
        extra = self.meta.get("extra", {})
        if extra.get("weight_grads"):
            with np.load(self.folder / extra["weight_grads"], allow_pickle=False) as data:
                self.weight_grads = dict(data)
        for name, record in extra.get("rows_apart", {}).items():
            with np.load(self.folder / record["true"], allow_pickle=False) as data:
                self.rows_apart[name] = (record["rows"], data[name])

    def __repr__(self):
        return f"<corpus entry {self.id}>"


def entries(root=CORPUS) -> list:
    """Every entry below `root`, sorted by id."""
    found = [Entry(p.parent) for p in pathlib.Path(root).glob("*/*/meta.json")]
    return sorted(found, key=lambda e: e.id)


def known_failures_of_jaxlib(version: Optional[str] = None, root=CORPUS) -> dict:
    """{(entry id, check): reason} from `known_failures_by_jaxlib.json`: the records naming
    the installed jaxlib (or `version`) among the releases each was measured on (an older
    XLA rounding differently; a newer jaxlib that cannot read a producer's plain MLIR
    bytecode)."""
    if version is None:
        import jaxlib
        version = jaxlib.__version__
    records = json.loads((pathlib.Path(root) / "known_failures_by_jaxlib.json").read_text())
    return {(r["entry"], r["check"]): f"{r['reason']} (jaxlib {version})"
            for r in records if version in r["jaxlib"]}


def known_failures(root=CORPUS) -> dict:
    """{(entry id, check): reason} from every `<producer>/known_failures.json`
    (a list of {"entry": name, "check": "forward" | "grad" | ..., "reason": ...})."""
    out = {}
    for path in sorted(pathlib.Path(root).glob("*/known_failures.json")):
        producer = path.parent.name
        for record in json.loads(path.read_text()):
            out[(f"{producer}/{record['entry']}", record["check"])] = record["reason"]
    return out
