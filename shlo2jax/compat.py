"""Every use of a jax internal, and every difference between jax releases, lives here, so a JAX
upgrade touches one file; with them the MLIR context those internals make, completed with the
`quant` dialect jaxlib leaves out.

The features built on jax's primitive machinery (`shlo2jax.gradients`, `shlo2jax.primitives`,
`shlo2jax.executables.direct`) reach its rule tables and lowering helpers through the names
below, never through `jax._src` themselves.
"""

from __future__ import annotations

from typing import Optional

import dataclasses

import jax
from jax._src import compiler, core, dispatch, xla_bridge
from jax._src import config as _config
from jax._src.export import _export
from jax._src.interpreters import ad, batching, mlir
from jax._src.lax import lax as lax_internal
from jax._src.lax import linalg as lax_linalg
from jax._src.lib import xla_client
from jaxlib.mlir.dialects import stablehlo

__all__ = ["core", "dispatch", "ad", "batching", "mlir", "lax_internal"]


# ------------------------------------------------------------------ jax's primitive machinery

def auto_insert_reshard(*args):
    """The arguments of an n-ary primitive with their shard_map varying axes made to agree."""
    return core.auto_insert_reshard(*args)


def unbroadcast(aval, x):
    """`x` summed down to `aval`'s shape where batching broadcast size-1 dimensions."""
    return lax_internal._unbroadcast(aval, x)


def cotangent_aval(aval):
    """The abstract value of a cotangent of a value of `aval`."""
    return aval.to_ct_aval()


def copy_lowerings(source, prim) -> None:
    """Registers `source`'s lowering rules (the default and the platform-specific ones) as
    `prim`'s, with the same inlining."""
    entry = mlir._lowerings[source]
    mlir.register_lowering(prim, entry.rule, inline=entry.inline)
    for platform, table in list(mlir._platform_specific_lowerings.items()):
        if source in table:
            mlir.register_lowering(prim, table[source].rule, platform=platform,
                                   inline=table[source].inline)


def lower_jaxpr(ctx, jaxpr, consts, *args):
    """Lowers `jaxpr` (with its constants' IR values) at the insertion point of a lowering
    rule's context `ctx`: the outputs' IR values."""
    outs, _ = mlir.jaxpr_subcomp(
        ctx.module_context, jaxpr, ctx.name_stack, mlir.TokenSet(), consts, *args,
        dim_var_values=ctx.dim_var_values, const_lowering=ctx.const_lowering,
        outer_traceback=ctx.traceback)
    return outs


def jit_disabled() -> bool:
    """Whether `jax.disable_jit` is in force."""
    return _config.disable_jit.value


def make_ir_context():
    """An MLIR context with every dialect jax registers (func, stablehlo, chlo, sdy, mhlo, ...)."""

    context = mlir.make_ir_context()
    # The conformance `check` and `interpreter` dialects are not registered in jaxlib.
    context.allow_unregistered_dialects = True
    load_quant_dialect(context)  # `!quant.uniform` types must parse
    return context


_QUANT_ARTIFACT: Optional[bytes] = None
QUANT_WARMUP = """func.func @q(%a: tensor<1x!quant.uniform<i8:f32, 1.0>>) -> tensor<1xf32> {
  %d = stablehlo.uniform_dequantize %a : (tensor<1x!quant.uniform<i8:f32, 1.0>>) -> tensor<1xf32>
  return %d : tensor<1xf32>
}"""


def load_quant_dialect(context) -> None:
    """Loads MLIR's `quant` dialect into `context` so `!quant.uniform` types parse.

    jaxlib registers no `quant` dialect with its Python contexts; the StableHLO
    portable-artifact reader loads it as a dependency, so reading a tiny artifact
    with a quantized type (made once by jaxlib's own serializer) brings it in."""
    global _QUANT_ARTIFACT
    if _QUANT_ARTIFACT is None:
        _QUANT_ARTIFACT = bytes(stablehlo.serialize_portable_artifact_str(
            QUANT_WARMUP, stablehlo.get_minimum_version()))
    with context:
        stablehlo.deserialize_portable_artifact(context, _QUANT_ARTIFACT)


def refine_polymorphic_shapes(module):
    """jax's shape refinement of an exported module (StableHLO refinement plus inlining,
    shape assertions and jax.export's dynamic custom calls)."""
    return mlir.refine_polymorphic_shapes(module)


def with_serialized_module(exported, module):
    """`exported` (a `jax.export.Exported`) with `module` serialized as its module bytes, the
    way `jax.export` serializes a module it lowered (a VHLO artifact, jax's target version)."""
    with module.context:
        serialized = _export._module_to_bytecode(module)
    return dataclasses.replace(exported, mlir_module_serialized=serialized)


def compile_mlir_module(module_text, platform: str = "cpu", num_replicas: int = 1,
                        num_partitions: int = 1):
    """Compiles a StableHLO module with XLA directly (no translation) on one device.

    Returns `run(*arrays) -> list of arrays`. This is the oracle for translated
    programs: the same module, compiled as-is by the XLA that jax uses.
    """

    backend = xla_bridge.get_backend(platform)
    initialize_kernels((platform,))
    devices = backend.devices()[:num_replicas * num_partitions]
    options = compiler.get_compile_options(num_replicas=num_replicas,
                                           num_partitions=num_partitions)
    executable = backend.compile_and_load(module_text, executable_devices=xla_client.DeviceList(
        tuple(devices)), compile_options=options)

    def run(*arrays):
        with jax.enable_x64(True):
            args = [jax.device_put(a, devices[0]) for a in arrays]
            results = executable.execute_sharded(args)
            return [per_device[0] for per_device in
                    results.disassemble_into_single_device_arrays()]
    return run


def set_batching_rule(prim, rule):
    """Registers `rule(args, dims, **params) -> (outs, out_dims)` as prim's vmap rule."""
    batching.primitive_batchers[prim] = rule


def lax_geqrf(a):
    """jax's QR factorisation step (Householder reflectors and their taus, LAPACK's geqrf
    format), which `jax.lax.linalg` does not export."""
    return lax_linalg.geqrf(a)


def lax_geqp3(a, jpvt):
    """jax's column-pivoted QR (LAPACK's geqp3), which `jax.lax.linalg` does not export."""
    return lax_linalg.geqp3(a, jpvt)


def stable_custom_call_targets() -> frozenset:
    """The custom call targets whose ABI `jax.export` guarantees stable (jax's own kernels:
    LAPACK, cuSOLVER, ... FFI handlers)."""
    return frozenset(_export._CUSTOM_CALL_TARGETS_GUARANTEED_STABLE)


def registered_custom_call_targets(platform: str) -> frozenset:
    """The custom call targets XLA's `platform` ("cpu", "cuda", ...) implements in this process
    (a few dozen names: asked at each lowering, so a kernel registered later counts)."""
    try:
        return frozenset(xla_client.custom_call_targets(platform))
    except Exception:  # a platform XLA does not know here
        return frozenset()


def initialize_kernels(platforms) -> None:
    """Binds jaxlib's kernels for `platforms` to their libraries before a module that calls them
    is compiled: the CPU LAPACK kernels are registered with XLA at import, but until jax
    initializes them (its linalg lowerings do, and `Exported.call`) they call through null
    function pointers, and the process dies."""
    _export._ensure_backends_initialized(tuple(platforms))


# The program a child process runs to turn HLO into StableHLO (`shlo2jax.sources.hlo`): jaxlib's
# HLO text parser aborts the process on some malformed input, so it never runs in ours. It
# imports jaxlib only (0.4 s, not jax's 1.3 s); the parser and `hlo_to_stablehlo` moved between
# jaxlib releases (`jaxlib._hlo` / `jaxlib._jax` / `jaxlib.xla_extension`). argv[1]: "text"
# (HLO text) or "proto" (a serialized HloModuleProto) on stdin; StableHLO bytecode on stdout;
# exit status 3: a Python exception, its message on stdout.
HLO_TO_STABLEHLO_CHILD = """
import importlib, sys
def find(name):
    for module in ("jaxlib._hlo", "jaxlib._jax", "jaxlib.xla_extension"):
        try:
            found = getattr(importlib.import_module(module), name, None)
        except ImportError:
            continue
        if found is not None:
            return found
    raise ImportError(f"this jaxlib has no {name}")
data = sys.stdin.buffer.read()
try:
    hlo_module = find("HloModule")
    if sys.argv[1] == "text":
        proto = find("hlo_module_from_text")(data.decode("utf-8")).as_serialized_hlo_module_proto()
    else:
        proto = hlo_module.from_serialized_hlo_module_proto(data).as_serialized_hlo_module_proto()
    stablehlo = find("mlir").hlo_to_stablehlo(proto)
except Exception as e:
    sys.stdout.write(f"{type(e).__name__}: {e}")
    sys.exit(3)
sys.stdout.buffer.write(bytes(stablehlo))
"""
