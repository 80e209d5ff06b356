"""Other ways to run the same module, used as oracles for translated programs."""

from __future__ import annotations

from shlo2jax import _jax_internals


def xla_direct(program, platform: str = "cpu"):
    """The program's module compiled directly by XLA (no translation); runs the `@main` entry.

    Returns a callable taking the entry function's arguments and returning a list of arrays.
    """
    text = program.mlir_module.operation.get_asm(large_elements_limit=None, enable_debug_info=False)
    return _jax_internals.compile_mlir_module(text, platform, program.num_replicas,
                                              program.num_partitions)
