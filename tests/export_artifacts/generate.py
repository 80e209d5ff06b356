"""Writes the `jax.export` artifacts of tests/export_artifacts/ with the jax that runs it.

Run it once per writer, each in its own throw-away venv (the venvs are never committed):

    python3.11 -m venv /tmp/w && /tmp/w/bin/pip install jax==0.4.23 jaxlib==0.4.23 "numpy<2" \
        "scipy<1.13" "ml_dtypes<0.5" absl-py flatbuffers
    /tmp/w/bin/python tests/export_artifacts/generate.py

It writes, under `jax-<version>/`, for each program below that this jax can export:
`<name>.bin` (`Exported.serialize()`, the VJP included where `vjp` is set) and
`<name>.npz`, the golden computed by the same jax: the flat inputs `in<i>`, the flat
outputs `out<i>`, and, where a VJP ships, the gradient `grad<i>` of
`sum(out<j> * ct<j>)` with respect to each floating input (cotangents `ct<j>` stored too).
`manifest.json` lists each artifact with the flatbuffer serialization version and calling
convention it carries, and the programs this jax could not export (with why). `sharded`
(named shardings on a one-device mesh, serialized with their abstract mesh) is written by
the writers from jax 0.11 on only, `linsolve` (LAPACK's FFI calls) by those from 0.12 on
(those before were run before they were added).

jax 0.11 and 0.12 need Python >= 3.12 and write serialization version 12 themselves:

    python3.12 -m venv /tmp/w12 && /tmp/w12/bin/pip install jax==0.12.0.1 jaxlib==0.12.0.1 \
        numpy ml_dtypes absl-py flatbuffers
    /tmp/w12/bin/python tests/export_artifacts/generate.py

With `--future`, run under jax 0.10.2, it also writes `future/`: the same programs as jax
after 0.11 writes them (jax-ml/jax 06d802bf: the real serialization version, 12, stored,
and the new `jax_version` field), made by this jax's serializer with those two fields
changed. jax up to 0.7.2 refuses that version number; a reader that knows the fields reads it.
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np

import jax
import jax.numpy as jnp
import jaxlib

try:  # jax >= 0.4.30
    from jax import export as jexport
    NEW_API = hasattr(jexport, "export") and hasattr(jexport.Exported, "serialize")
except ImportError:
    NEW_API = False
if not NEW_API:  # jax 0.4.2x: jax.experimental.export's modules
    from jax.experimental.export import export as jexport
    from jax.experimental.export import serialization as jserialization

HERE = os.path.dirname(os.path.abspath(__file__))
RNG = np.random.default_rng(0)


def _f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def mlp(params, x):
    h = jnp.tanh(x @ params["w1"] + params["b1"])
    return jax.nn.softmax(h @ params["w2"] + params["b2"], axis=-1)


def poly(x):
    return jnp.sin(x) * 2.0 + jnp.sum(x * x, axis=1, keepdims=True), jnp.max(x, axis=0)


def two_platforms(x, unused, y):
    del unused  # jax drops it from the module: module_kept_var_idx != all
    return jnp.cos(x @ y) + 1.0


def int_arg(x, k):
    return x * k.astype(x.dtype), k * 2


def sharded(a, b):
    return jnp.tanh(a) * b, jnp.sum(a)


def linsolve(a, b):
    return jnp.linalg.solve(a, b)


PROGRAMS = {
    # name: (function, example inputs (a pytree), export options)
    "mlp": (mlp, ({"w1": _f32(3, 5), "b1": _f32(5), "w2": _f32(5, 2), "b2": _f32(2)},
                  _f32(4, 3)), dict(vjp=True)),
    "poly": (poly, (_f32(4, 3),), dict(vjp=True, poly=("b, 3",))),
    "two_platforms": (two_platforms, (_f32(2, 3), _f32(7), _f32(3, 2)),
                      dict(vjp=True, platforms=("cpu", "cuda"))),
    # an integer input: its cotangent in the VJP is float0 (serialization version >= 2)
    "int_arg": (int_arg, (_f32(3), np.array(3, np.int32)), dict(vjp=True)),
    # named shardings on a one-device mesh (jax >= 0.9 serializes them with their abstract
    # mesh: schema version 6 on); written by the writers from jax 0.11 on only
    "sharded": (sharded, (_f32(4, 3), _f32(4, 3)), dict(vjp=True, sharded=True)),
    # LAPACK's typed FFI calls (LU, triangular solves), whose attributes jax 0.12 writes as
    # `mhlo.backend_config` dictionaries; written by the writers from jax 0.12 on only
    "linsolve": (linsolve, (_f32(3, 3) + 3 * np.eye(3, dtype=np.float32), _f32(3)),
                 dict(vjp=True, since=(0, 12))),
}


def _export(fun, args, *, platforms=None, poly=None, sharded=False):
    jitted = jax.jit(fun)
    if sharded:
        from jax.sharding import Mesh, NamedSharding, PartitionSpec
        rows = NamedSharding(Mesh(np.array(jax.devices()[:1]), ("x",)), PartitionSpec("x", None))
        jitted = jax.jit(fun, in_shardings=(rows, None), out_shardings=(rows, None))
    if poly is not None:
        specs = [jax.ShapeDtypeStruct(jexport.symbolic_shape(p), a.dtype)
                 for p, a in zip(poly, args)]
    else:
        specs = jax.tree_util.tree_map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), args)
    if NEW_API:
        return jexport.export(jitted, platforms=platforms)(*specs)
    return jexport.export(jitted, lowering_platforms=platforms)(*specs)


def _serialize(exp, vjp_order: int) -> bytes:
    if NEW_API:
        return bytes(exp.serialize(vjp_order=vjp_order))
    return bytes(jserialization.serialize(exp, vjp_order=vjp_order))


def _golden(fun, args, vjp: bool) -> dict:
    flat, tree = jax.tree_util.tree_flatten(args)
    outs = jax.tree_util.tree_leaves(jax.jit(fun)(*args))  # dtypes as jax gives them
    golden = {f"in{i}": np.asarray(a) for i, a in enumerate(flat)}
    golden.update({f"out{j}": np.asarray(o) for j, o in enumerate(outs)})
    if vjp:
        cts = [_f32(*np.shape(o)) if jnp.issubdtype(o.dtype, jnp.floating) else None
               for o in outs]
        floating = [i for i, a in enumerate(flat) if jnp.issubdtype(a.dtype, jnp.floating)]

        def loss(*fl):
            full = list(flat)
            for i, v in zip(floating, fl):
                full[i] = v
            o = jax.tree_util.tree_leaves(fun(*jax.tree_util.tree_unflatten(tree, full)))
            return sum(jnp.sum(oj * ct) for oj, ct in zip(o, cts) if ct is not None)

        grads = jax.grad(loss, argnums=tuple(range(len(floating))))(*[flat[i] for i in floating])
        golden.update({f"ct{j}": ct for j, ct in enumerate(cts) if ct is not None})
        golden.update({f"grad{i}": np.asarray(g) for i, g in zip(floating, grads)})
    return golden


def _fields(blob: bytes) -> dict:
    """The serialization version and calling convention the blob carries (read with the
    flatbuffers runtime: slots 0 and 14 of the root table)."""
    import flatbuffers
    from flatbuffers import number_types as N
    buf = bytearray(blob)
    tab = flatbuffers.table.Table(buf, flatbuffers.encode.Get(N.UOffsetTFlags.packer_type, buf, 0))

    def u16(slot):
        o = tab.Offset(4 + 2 * slot)
        return tab.Get(N.Uint16Flags, o + tab.Pos) if o else 0
    return {"serialization_version": u16(0), "calling_convention_version": u16(14)}


def write(out_dir: str, extra_configs=()) -> None:
    os.makedirs(out_dir, exist_ok=True)
    manifest = {"jax": jax.__version__, "jaxlib": jaxlib.__version__, "artifacts": {},
                "not_exported": {}}
    v = tuple(int(p) for p in jax.__version__.split(".")[:2])
    since = {name: opts.get("since", (0, 11) if opts.get("sharded") else (0, 0))
             for name, (_, _, opts) in PROGRAMS.items()}
    runs = [(name, name, {}) for name in PROGRAMS if v >= since[name]]
    runs += [(f"{name}_{suffix}", name, cfg) for suffix, name, cfg in extra_configs]
    for artifact, name, cfg in runs:
        fun, args, opts = PROGRAMS[name]
        saved = {k: getattr(jax.config, k) for k in cfg}
        try:
            for k, v in cfg.items():
                jax.config.update(k, v)
            exp = _export(fun, args, platforms=opts.get("platforms"), poly=opts.get("poly"),
                          sharded=opts.get("sharded", False))
            blob = _serialize(exp, 1 if opts.get("vjp") else 0)
        except Exception as e:  # noqa: BLE001 - this writer cannot export it: recorded
            manifest["not_exported"][artifact] = f"{type(e).__name__}: {str(e)[:300]}"
            continue
        finally:
            for k, v in saved.items():
                jax.config.update(k, v)
        with open(os.path.join(out_dir, artifact + ".bin"), "wb") as f:
            f.write(blob)
        np.savez(os.path.join(out_dir, artifact + ".npz"), **_golden(fun, args, opts.get("vjp")))
        manifest["artifacts"][artifact] = dict(_fields(blob), program=name, bytes=len(blob),
                                               vjp=bool(opts.get("vjp")),
                                               platforms=list(opts.get("platforms") or ["cpu"]))
    with open(os.path.join(out_dir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
        f.write("\n")
    print(out_dir, sorted(manifest["artifacts"]), manifest["not_exported"])


def _future_writer():
    """Patches this jax's (0.10.x) serializer to write what jax after 06d802bf writes: the
    serialization version 12 and the `jax_version` string (slot 26 of `Exported`)."""
    from jax._src.export import serialization_generated as gen
    pending = []

    def start(builder):
        pending.append(builder.CreateString("0.12.0.1"))  # strings are made outside a table
        builder.StartObject(27)  # this jax's Exported has 26 fields; jax_version is the 27th

    def version(builder, _v, _orig=gen.ExportedAddSerializationVersion):
        _orig(builder, 12)

    def end(builder, _orig=gen.ExportedEnd):
        builder.PrependUOffsetTRelativeSlot(26, pending.pop(), 0)
        return _orig(builder)

    gen.ExportedStart, gen.ExportedAddSerializationVersion, gen.ExportedEnd = start, version, end


def _cc(version):
    key = "jax_export_calling_convention_version" if NEW_API else "jax_serialization_version"
    return {key: version}


if __name__ == "__main__":
    extra = []
    v = tuple(int(p) for p in jax.__version__.split(".")[:3])
    # calling conventions by default: 8 (0.4.2x), 9 (0.4.30-0.6), 10 (0.7 on)
    if v < (0, 4, 30):  # 0.4.2x also writes 9 on request
        extra.append(("cc9", "mlp", _cc(9)))
    write(os.path.join(HERE, f"jax-{jax.__version__}"), extra)
    if "--future" in sys.argv:
        _future_writer()
        write(os.path.join(HERE, "future"))
