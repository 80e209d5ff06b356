"""Every use of a jax internal lives here, so a JAX upgrade touches one file."""

from __future__ import annotations


def make_ir_context():
    """An MLIR context with every dialect jax registers (func, stablehlo, chlo, sdy, mhlo, ...)."""
    from jax._src.interpreters import mlir as jax_mlir

    context = jax_mlir.make_ir_context()
    # The conformance `check` and `interpreter` dialects are not registered in jaxlib.
    context.allow_unregistered_dialects = True
    return context


def compile_mlir_module(module_text, platform: str = "cpu", num_replicas: int = 1,
                        num_partitions: int = 1):
    """Compiles a StableHLO module with XLA directly (no translation) on one device.

    Returns `run(*arrays) -> list of arrays`. This is the oracle for translated
    programs: the same module, compiled as-is by the XLA that jax uses.
    """
    import jax
    from jax._src import compiler, xla_bridge
    from jax._src.lib import xla_client as xc

    backend = xla_bridge.get_backend(platform)
    devices = backend.devices()[:num_replicas * num_partitions]
    options = compiler.get_compile_options(num_replicas=num_replicas,
                                           num_partitions=num_partitions)
    executable = backend.compile_and_load(module_text, executable_devices=xc.DeviceList(
        tuple(devices)), compile_options=options)

    def run(*arrays):
        with jax.enable_x64(True):
            args = [jax.device_put(a, devices[0]) for a in arrays]
            results = executable.execute_sharded(args)
            return [per_device[0] for per_device in
                    results.disassemble_into_single_device_arrays()]
    return run
