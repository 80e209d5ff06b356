"""The release self-check: how each compatibility point resolves on the installed jax, and a
smoke translation that runs what users run (`python -m shlo2jax.compat`).

A point that resolves says only that jax still has the name shlo2jax reaches for; a release
can keep every name and change what is behind it (jax 0.12 kept every point's name and merged
`ClosedJaxpr` into `Jaxpr`, and the first op of every program failed). So the check also
translates a small program the way users do — its forward values, `jax.grad`, `jax.vmap`,
`jit`, a `jax.export` round trip each way and the direct lowering — each step against jax's
own computation of the same function, and names the step that broke.
"""

from __future__ import annotations

import sys
from typing import Callable

from shlo2jax.compat.points import POINTS


def points() -> dict:
    """`{point: (ok, variant or error)}` for each compatibility point on the installed jax."""
    results = {}
    for name, probe in POINTS.items():
        try:
            results[name] = (True, str(probe()))
        except Exception as e:  # a point with no variant for this jax: reported, not raised
            results[name] = (False, f"{type(e).__name__}: {e}")
    return results


# ------------------------------------------------------------------ the smoke translation

def _source(params, x):
    """The smoke program: a dense layer, a softmax (reduce max/sum, broadcasts), a counted
    loop (while, compare, a carried tuple), a gather and a cumulative sum (reduce_window)."""
    import jax
    import jax.numpy as jnp
    h = jnp.tanh(x @ params["w"] + params["b"])
    p = jax.nn.softmax(h, axis=-1)
    p = jax.lax.fori_loop(0, 3, lambda i, v: v * 0.5 + jnp.sin(v) * 0.25, p)
    return jnp.cumsum(p[:, ::-1], axis=-1)[:, jnp.array([0, 2])] + jnp.max(h, axis=0)[:2]


def _inputs():
    import numpy as np
    rng = np.random.default_rng(0)
    return ({"w": rng.standard_normal((5, 4)).astype(np.float32),
             "b": rng.standard_normal(4).astype(np.float32)},
            rng.standard_normal((3, 5)).astype(np.float32))


def _close(got, want, what):
    import numpy as np
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape or not np.allclose(got, want, rtol=1e-4, atol=1e-5):
        raise AssertionError(f"{what}: got {got.ravel()[:4]}..., jax gives {want.ravel()[:4]}...")


def _steps() -> list:
    """(name, run) for each smoke step; each step raises where the installed jax breaks it."""
    import jax
    import jax.numpy as jnp
    from shlo2jax.loader import load as load_program

    params, x = _inputs()
    flat = (params["b"], params["w"], x)  # jax.export's flat order: the dict's sorted keys

    def as_dict(b, w, xs):
        return _source({"w": w, "b": b}, xs)

    exported = jax.export.export(jax.jit(as_dict))(*flat)
    text = exported.mlir_module()
    state = {}

    def load():
        state["fn"] = load_program(text, source_name="smoke").entry

    def forward():
        _close(state["fn"](*flat), as_dict(*flat), "forward")

    def jit():
        _close(jax.jit(state["fn"])(*flat), as_dict(*flat), "jit")

    def grad():
        def loss(f):
            return lambda b, w, xs: jnp.sum(f(b, w, xs) ** 2)
        got = jax.grad(loss(state["fn"]), argnums=(0, 1, 2))(*flat)
        want = jax.grad(loss(as_dict), argnums=(0, 1, 2))(*flat)
        for g, w, name in zip(got, want, ("b", "w", "x")):
            _close(g, w, f"gradient of {name}")

    def vmap():
        xs = jnp.stack([x, x * 2.0])
        got = jax.vmap(state["fn"], in_axes=(None, None, 0))(flat[0], flat[1], xs)
        _close(got, jax.vmap(as_dict, in_axes=(None, None, 0))(flat[0], flat[1], xs), "vmap")

    def export_in():
        fn = load_program(exported.serialize(), source_name="smoke").entry
        _close(fn(*flat), as_dict(*flat), "a serialized jax.export read back")

    def export_out():
        again = jax.export.deserialize(jax.export.export(jax.jit(state["fn"]))(*flat).serialize())
        _close(again.call(*flat), as_dict(*flat), "the translation exported and called")

    def direct():
        fn = load_program(text, source_name="smoke", lowering="direct").entry
        _close(jax.jit(fn)(*flat), as_dict(*flat), "direct lowering")

    return [("load", load), ("forward", forward), ("jit", jit), ("jax.grad", grad),
            ("jax.vmap", vmap), ("jax.export read", export_in),
            ("jax.export write", export_out), ("direct lowering", direct)]


def smoke() -> dict:
    """`{step: (ok, detail)}` for each step of the smoke translation; a step after a failed
    `load` is not run (reported as such)."""
    results: dict = {}
    try:
        steps: list[tuple[str, Callable[[], None]]] = _steps()
    except Exception as e:  # noqa: BLE001 - jax itself could not build the program
        return {"jax builds the smoke program": (False, f"{type(e).__name__}: {e}")}
    for name, run in steps:
        if name != "load" and not results.get("load", (True,))[0]:
            results[name] = (False, "not run: load failed")
            continue
        try:
            run()
            results[name] = (True, "agrees with jax")
        except Exception as e:  # noqa: BLE001 - reported by name: the point of the check
            first = str(e).strip().splitlines()[0] if str(e).strip() else ""
            results[name] = (False, f"{type(e).__name__}: {first[:300]}")
    return results


def check(file=None, translate: bool = True) -> dict:
    """How each compatibility point resolves on the installed jax and, with `translate`, how
    each smoke step runs: `{name: (ok, variant or error)}` (smoke steps keyed `smoke: STEP`),
    printed to `file` (stdout by default; pass `False` to print nothing).

    The way to try a jax newer than pyproject.toml's range (docs/guides/jax_versions.md):
    install it, then shlo2jax with `pip install -e . --no-deps`, then
    `python -m shlo2jax.compat`, which exits 1 when a point or a step fails."""
    import jax
    import jaxlib
    results = points()
    steps = smoke() if translate else {}
    if file is not False:
        out = sys.stdout if file is None else file
        print(f"jax {jax.__version__}, jaxlib {jaxlib.__version__}", file=out)
        width = max(map(len, list(results) + list(steps)))
        for name, (ok, detail) in results.items():
            print(f"  {'ok  ' if ok else 'FAIL'} {name:<{width}}  {detail}", file=out)
        failed = sum(not ok for ok, _ in results.values())
        print(f"{len(results) - failed} of {len(results)} compatibility points resolve", file=out)
        if steps:
            print("smoke translation:", file=out)
            for name, (ok, detail) in steps.items():
                print(f"  {'ok  ' if ok else 'FAIL'} {name:<{width}}  {detail}", file=out)
            broken = [name for name, (ok, _) in steps.items() if not ok]
            print(f"{len(steps) - len(broken)} of {len(steps)} smoke steps run"
                  + (f"; broken on this jax: {', '.join(broken)}" if broken else ""), file=out)
    results.update({f"smoke: {name}": value for name, value in steps.items()})
    return results


def main() -> int:
    return 0 if all(ok for ok, _ in check().values()) else 1
