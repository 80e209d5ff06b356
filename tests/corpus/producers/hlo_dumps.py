"""What the HLO producers that are not JAX share (TensorFlow: hlo_tf_models.py, PyTorch/XLA:
hlo_torch_xla_models.py): each model runs in a child process of the generator environment with
`XLA_FLAGS=--xla_dump_to=DIR`, exactly as a user dumps a program, and the module files that the
model's own computation left in DIR become the entries, one per optimization stage, the files
kept byte for byte.

The child (`python -c ...`, with tests/corpus/producers on sys.path and nothing else of
tests/corpus, whose producer folders would shadow the frameworks) calls the producer module's
`child(name, out)`, which runs the model once with the dump on, then computes the goldens with
it off, and writes `out/golden.npz` (`arg_i`, `out_i`, `grad_i`) and `out/info.json`
({"module": the dump files' `module_NNNN.NAME` prefix, "arg_info", "model", "export_call",
"output_names", "vmap_args", "notes", "versions", "tolerance"}). Numpy only.
"""

from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

import numpy as np

PRODUCER = "hlo"
PRODUCERS_DIR = pathlib.Path(__file__).resolve().parent
STAGES = {"before_opt": "before_optimizations", "after_opt": "cpu_after_optimizations"}
EXTENSIONS = {"hlo.pb": "model.hlo.pb", "txt": "model.hlo"}


def corpus_entry():
    """tests/corpus/entry.py, imported by path (the child has no make_corpus finder)."""
    if "entry" in sys.modules:
        return sys.modules["entry"]
    spec = importlib.util.spec_from_file_location("entry", PRODUCERS_DIR.parent / "entry.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules["entry"] = module
    return module


def loss_projections(outputs):
    return corpus_entry().loss_projections(outputs)


def run_child(module_name: str, name: str, out: pathlib.Path, xla_flags: str, env=None) -> None:
    """Runs `<module_name>.child(name, out)` in a fresh interpreter with the dump flags."""
    code = (f"import sys; sys.path.insert(0, {str(PRODUCERS_DIR)!r}); "
            f"import {module_name} as m; m.child({name!r}, {str(out)!r})")
    environ = dict(os.environ, XLA_FLAGS=f"--xla_dump_to={out / 'dump'} {xla_flags}".strip(),
                   **(env or {}))
    subprocess.run([sys.executable, "-c", code], env=environ, cwd=out, check=True)


def new_module(dump: pathlib.Path, before: set) -> str:
    """The `module_NNNN.NAME` prefix of the one module whose before_optimizations dump appeared
    in `dump` since `before` (a set of file names)."""
    new = sorted(n for n in os.listdir(dump) if n not in before and
                 n.endswith((".before_optimizations.txt", ".before_optimizations.hlo.pb")))
    prefixes = sorted({n.split(".before_optimizations")[0] for n in new})
    if len(prefixes) != 1:
        raise RuntimeError(f"expected one new module in {dump}, found {prefixes}")
    return prefixes[0]


def build(root, only, module_name: str, models, ext: str, xla_flags: str = "",
          env_for=lambda name: None) -> None:
    """For each model name in `models` (that `only` selects): the child's dump and goldens,
    written as `<PRODUCER>/<name>_<stage>` entries holding the dump file `<prefix>.<stage>.<ext>`.
    """
    entry = corpus_entry()
    root = pathlib.Path(root)
    for name in models:
        stages = [s for s in STAGES if only in (None, name, f"{name}_{s}")]
        if not stages:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            out = pathlib.Path(tmp)
            run_child(module_name, name, out, xla_flags, env_for(name))
            info = json.loads((out / "info.json").read_text())
            with np.load(out / "golden.npz") as data:
                arrays = dict(data)
            args = [arrays[f"arg_{i}"] for i in range(len(info["arg_info"]))]
            outputs = [arrays[f"out_{i}"] for i in range(len(info["output_names"]))]
            grads = {i: arrays[f"grad_{i}"] for i in range(len(args)) if f"grad_{i}" in arrays}
            for stage in stages:
                file = out / "dump" / f"{info['module']}.{STAGES[stage]}.{ext}"
                folder = root / PRODUCER / f"{name}_{stage}"
                if folder.exists():
                    shutil.rmtree(folder)
                entry.write_entry(
                    folder, producer=PRODUCER, model=info["model"],
                    artifact_name=EXTENSIONS[ext], artifact=file.read_bytes(), args=args,
                    arg_info=info["arg_info"], outputs=outputs,
                    projections=loss_projections(outputs), grads=grads,
                    versions=info["versions"],
                    export_call=f"{info['export_call']}; the dump's {file.name.split('.', 2)[0]}"
                                f".*.{STAGES[stage]}.{ext} (XLA_FLAGS=--xla_dump_to=DIR "
                                f"{xla_flags})".replace(" )", ")"),
                    output_names=info["output_names"], tolerance=info.get("tolerance"),
                    vmap_args=info["vmap_args"], notes=info.get("notes", ""),
                    extra={"hlo_stage": stage, "hlo_producer": info["producer"],
                           "dump_file": file.name, **info.get("extra", {})})
                print(f"  {PRODUCER}/{folder.name}: {file.stat().st_size / 1024:.1f} KiB "
                      f"({file.name[:60]}...)", file=sys.stderr)


def write_golden(out, *, module: str, producer: str, args, arg_info, outputs, grads, model: str,
                 export_call: str, versions: dict, output_names=None, vmap_args=None,
                 notes: str = "", tolerance=None, extra=None) -> None:
    """The child's half: what `build` reads back."""
    out = pathlib.Path(out)
    arrays = {f"arg_{i}": np.asarray(a) for i, a in enumerate(args)}
    arrays.update({f"out_{i}": np.asarray(o) for i, o in enumerate(outputs)})
    arrays.update({f"grad_{i}": np.asarray(g) for i, g in grads.items()})
    np.savez(out / "golden.npz", **arrays)
    info = {"module": module, "producer": producer, "arg_info": arg_info, "model": model,
            "export_call": export_call, "versions": versions,
            "output_names": output_names or [f"out_{i}" for i in range(len(outputs))],
            "vmap_args": vmap_args, "notes": notes, "tolerance": tolerance, "extra": extra or {}}
    (out / "info.json").write_text(json.dumps(info, indent=1))
