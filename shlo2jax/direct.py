"""`load(..., lowering="direct")`: a function lowers to the module's own ops.

Translating a function traces one lax primitive per op and JAX lowers each again: about
10,000-15,000 ops/s, the same per-primitive cost as JAX tracing a program written in lax.
A user who runs a program (jit, call) and transforms it only sometimes can skip that: the
function becomes one primitive (`_jax_internals.direct_call_primitive`) whose lowering is
the module's function itself, merged into the lowered module as `Exported.call` merges an
export. The compiled program is then what XLA compiles from the module directly (no op
growth, the same compile time), and loading is the whole cost. `jax.grad`, `jvp` and `vmap`
still work: the primitive's derivative and batching rules are the translation's, traced
when a transformation asks for them.

A function lowers directly only where that is exactly what XLA would run: static tensor
types that XLA holds (no quantized or f6 values, no tokens or tuples), ops of the
stablehlo/chlo/func dialects other than custom calls, side effects and collectives, one
device. Anywhere else the translation runs, and `Function.lowering` says which one did and why.
"""

from __future__ import annotations

from typing import Optional

from shlo2jax import types as T

LOWERINGS = ("translate", "direct")

# Ops whose direct lowering is not what the translation gives or may not compile as-is on
# every backend: host transfers and tokens, collectives and sharding, custom calls (the
# translation maps legacy and foreign kernels), and the ops the translation gives semantics
# XLA's CPU backend lacks.
_TRANSLATED_ONLY = frozenset({
    "stablehlo.custom_call", "stablehlo.infeed", "stablehlo.outfeed", "stablehlo.send",
    "stablehlo.recv", "stablehlo.after_all", "stablehlo.create_token", "stablehlo.optimization_barrier",
    "stablehlo.all_reduce", "stablehlo.all_gather", "stablehlo.reduce_scatter",
    "stablehlo.all_to_all", "stablehlo.collective_permute", "stablehlo.collective_broadcast",
    "stablehlo.replica_id", "stablehlo.partition_id", "stablehlo.composite",
    "stablehlo.get_tuple_element", "stablehlo.tuple", "stablehlo.rng",
    "stablehlo.uniform_quantize", "stablehlo.uniform_dequantize",
})
_DIALECTS = ("stablehlo.", "chlo.", "func.")


def _plain(t) -> bool:
    """A static tensor XLA holds (a quantized or f6 tensor has `quant` set)."""
    return type(t) is T.TensorType and t.quant is None and t.is_static


def why_not_direct(program, fn) -> Optional[str]:
    """None when `fn` of `program` can lower directly, else the reason it cannot."""
    if fn.name != "main":
        return f"only @main lowers directly (this is @{fn.name})"
    if program.sharding.num_devices > 1:
        return "the program runs on several devices"
    for t in tuple(fn.input_types) + tuple(fn.output_types):
        if not _plain(t):
            return f"a signature type the translation carries ({t})"
    for op in program.module.ops:
        if op.name in _TRANSLATED_ONLY or not op.name.startswith(_DIALECTS):
            return f"{op.name} at {op.location} runs translated"
        for t in op.result_types:
            if not _plain(t):
                return f"{op.name} at {op.location} has a type the translation carries ({t})"
    return None


class DirectCallee:
    """What the direct-call primitive lowers and differentiates (identity-hashed: one per
    Function)."""

    def __init__(self, name: str, bytecode: bytes, out_avals: tuple, translated):
        self.name, self.bytecode, self.out_avals = name, bytecode, out_avals
        self.translated = translated  # the translation of the same function: JVP and vmap

    def __repr__(self):
        return f"<shlo2jax direct @{self.name}>"


def module_bytecode(mlir_module) -> bytes:
    """The module as MLIR bytecode (parsed again into each lowering's MLIR context)."""
    import io
    buffer = io.BytesIO()
    mlir_module.operation.write_bytecode(buffer)
    return buffer.getvalue()


def direct_body(fn, translated):
    """`fn`'s body as one direct-call primitive (see the module docstring)."""
    from shlo2jax._jax_internals import direct_call_primitive
    prim = direct_call_primitive()
    callee = DirectCallee(fn.name, module_bytecode(fn.program.mlir_module), fn.out_avals,
                          translated)

    def body(*args):
        return prim.bind(*args, callee=callee)
    return body
