"""One row of the jax version x artifact table of docs/guides/jax_export_artifacts.md: every
artifact of tests/export_artifacts/ loaded with the installed jax, its forward values and
gradient checked against the writer's golden, and which reader read it.

    /work/venvs/jax-0.7.2/bin/python tests/export_artifacts/matrix.py

Prints one markdown row: per writer, `loaded/forward/grad` counts out of its artifacts and
the reader: `jax` (jax.export.deserialize), `fb: refused` (jax refused it: the flatbuffer
reader), `fb: misread` (jax read it wrongly without error: the flatbuffer reader).
"""

from __future__ import annotations

import json
import pathlib
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax import export as jax_export

import shlo2jax
from shlo2jax.sources import export_flatbuffer

HERE = pathlib.Path(__file__).resolve().parent
WRITERS = ["jax-0.4.23", "jax-0.4.30", "jax-0.5.3", "jax-0.7.2", "jax-0.8.3", "jax-0.9.2",
           "jax-0.10.2", "future"]


def _reader(data: bytes) -> str:
    record = export_flatbuffer.read(data)
    try:
        theirs = jax_export.deserialize(bytearray(data))
    except Exception:  # noqa: BLE001 - refused: what is being measured
        return "fb: refused"
    return "jax" if export_flatbuffer.agrees(theirs, record) else "fb: misread"


def _check(path: pathlib.Path, entry: dict) -> tuple:
    golden = dict(np.load(path.with_suffix(".npz")))
    ins = [golden[f"in{i}"] for i in range(sum(k.startswith("in") for k in golden))]
    try:
        fn = shlo2jax.load(str(path)).entry
    except Exception as e:  # noqa: BLE001 - reported in the table
        return False, False, False, f"{type(e).__name__}: {str(e)[:120]}"
    try:
        outs = fn(*ins)
        outs = list(outs) if isinstance(outs, tuple) else [outs]
        fwd = all(np.allclose(np.asarray(o), golden[f"out{j}"], rtol=1e-5, atol=1e-6)
                  for j, o in enumerate(outs))
    except Exception as e:  # noqa: BLE001
        return True, False, False, f"{type(e).__name__}: {str(e)[:120]}"
    if not entry["vjp"]:
        return True, fwd, None, ""
    floating = [i for i, a in enumerate(ins) if jnp.issubdtype(a.dtype, jnp.floating)]
    cts = {int(k[2:]): v for k, v in golden.items() if k.startswith("ct")}

    def loss(*fl):
        full = list(ins)
        for i, v in zip(floating, fl):
            full[i] = v
        o = fn(*full)
        o = list(o) if isinstance(o, tuple) else [o]
        return sum(jnp.sum(o[j] * ct) for j, ct in cts.items())
    try:
        grads = jax.grad(loss, argnums=tuple(range(len(floating))))(*[ins[i] for i in floating])
        grad = all(np.allclose(np.asarray(g), golden[f"grad{i}"], rtol=1e-4, atol=1e-5)
                   for i, g in zip(floating, grads))
    except Exception as e:  # noqa: BLE001
        return True, fwd, False, f"{type(e).__name__}: {str(e)[:120]}"
    return True, fwd, grad, ""


def main() -> None:
    cells, problems = [], []
    for writer in WRITERS:
        manifest = json.loads((HERE / writer / "manifest.json").read_text())
        n = loaded = fwd = grad = 0
        readers = set()
        for name, entry in sorted(manifest["artifacts"].items()):
            path = HERE / writer / f"{name}.bin"
            readers.add(_reader(path.read_bytes()))
            ok, f, g, why = _check(path, entry)
            n, loaded, fwd, grad = n + 1, loaded + ok, fwd + bool(f), grad + bool(g)
            if why or not (ok and f and g in (True, None)):
                problems.append(f"{writer}/{name}: {why or 'values differ'}")
        mark = "✓" if loaded == fwd == grad == n else "✗"
        cells.append(f"{mark} {loaded}/{fwd}/{grad} of {n} ({', '.join(sorted(readers))})")
    print(f"| {jax.__version__} | " + " | ".join(cells) + " |")
    for p in problems:
        print("  ", p, file=sys.stderr)


if __name__ == "__main__":
    main()
