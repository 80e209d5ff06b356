"""One row of the writer x reader table of docs/guides/jax_export_artifacts.md: every
artifact of tests/export_artifacts/ loaded by shlo2jax under the installed jax, its forward
values, gradient and vmap checked against the writer's golden, beside what the installed
jax's own `jax.export.deserialize` makes of it.

    /work/venvs/jax072/bin/python tests/export_artifacts/matrix.py

Prints one markdown row: per writer, `loaded/forward/grad/vmap` counts out of its
artifacts (shlo2jax, which always reads them with its flatbuffer reader), and what jax
itself does with them: `jax reads`, `jax refuses` (deserialize raises), `jax misreads`
(reads without error, but differently from the flatbuffer).
"""

from __future__ import annotations

import json
import pathlib
import sys

import jax
import jax.numpy as jnp
import numpy as np

import shlo2jax
from shlo2jax.sources import export_compat, jax_export

HERE = pathlib.Path(__file__).resolve().parent
WRITERS = ["jax-0.4.23", "jax-0.4.30", "jax-0.5.3", "jax-0.7.2", "jax-0.8.3", "jax-0.9.2",
           "jax-0.10.2", "future", "jax-0.11.2", "jax-0.12.0.1"]
JAX_DOES = {"jax": "jax reads", "refused": "jax refuses", "misread": "jax misreads"}


def _reader(data: bytes) -> str:
    return JAX_DOES[export_compat.jax_reading(data, jax_export.deserialize(data))]


def _check(path: pathlib.Path, entry: dict) -> tuple:
    golden = dict(np.load(path.with_suffix(".npz")))
    ins = [golden[f"in{i}"] for i in range(sum(k.startswith("in") for k in golden))]
    try:
        fn = shlo2jax.load(str(path)).entry
    except Exception as e:  # noqa: BLE001 - reported in the table
        return False, False, False, False, f"{type(e).__name__}: {str(e)[:120]}"
    try:
        batched = jax.vmap(fn)(*[np.stack([x, x]) for x in ins])
        batched = list(batched) if isinstance(batched, tuple) else [batched]
        vmap = all(np.allclose(np.asarray(b), np.stack([golden[f"out{j}"]] * 2), rtol=1e-5,
                               atol=1e-6) for j, b in enumerate(batched))
    except Exception:  # noqa: BLE001
        vmap = False
    try:
        outs = fn(*ins)
        outs = list(outs) if isinstance(outs, tuple) else [outs]
        fwd = all(np.allclose(np.asarray(o), golden[f"out{j}"], rtol=1e-5, atol=1e-6)
                  for j, o in enumerate(outs))
    except Exception as e:  # noqa: BLE001
        return True, False, False, vmap, f"{type(e).__name__}: {str(e)[:120]}"
    if not entry["vjp"]:
        return True, fwd, None, vmap, ""
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
        return True, fwd, False, vmap, f"{type(e).__name__}: {str(e)[:120]}"
    return True, fwd, grad, vmap, ""


def main() -> None:
    cells, problems = [], []
    for writer in WRITERS:
        manifest = json.loads((HERE / writer / "manifest.json").read_text())
        n = loaded = fwd = grad = vmap = 0
        readers = set()
        for name, entry in sorted(manifest["artifacts"].items()):
            path = HERE / writer / f"{name}.bin"
            readers.add(_reader(path.read_bytes()))
            ok, f, g, v, why = _check(path, entry)
            n, loaded, fwd, grad, vmap = (n + 1, loaded + ok, fwd + bool(f), grad + bool(g),
                                          vmap + bool(v))
            if why or not (ok and f and v and g in (True, None)):
                problems.append(f"{writer}/{name}: {why or 'values differ'}")
        mark = "✓" if loaded == fwd == grad == vmap == n else "✗"
        cells.append(f"{mark} {loaded}/{fwd}/{grad}/{vmap} of {n} ({', '.join(sorted(readers))})")
    print(f"| {jax.__version__} | " + " | ".join(cells) + " |")
    for p in problems:
        print("  ", p, file=sys.stderr)


if __name__ == "__main__":
    main()
