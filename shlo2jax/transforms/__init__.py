"""Module rewrites: functions that take an MLIR module (or its text) and give it back rewritten,
one rewrite per module.

- `chlo_legalize.legalize_chlo`: chlo ops without a translation rule rewritten into stablehlo
  by jaxlib's `chlo-legalize-to-stablehlo` (decoding, at load; the reference interpreter,
  tools/reference).
- `shape_legalize.legalize_shapes`: shape-dialect ops (TensorFlow's dynamic batch) rewritten
  into StableHLO, each broadcast constraint kept as a `shape_assertion` (decoding, at load).
- `dissolve.dissolve`: XLA's fusions become the ops of their regions, copies their operands
  (the direct lowering, executables/direct, before it merges the module).
- `outline_ops.outline`: ops cut out into a module of their own, one function per distinct
  op, with the functions they refer to (the direct lowering's islands: executables/direct
  outlines them at load, executables/islands decodes and lowers them).
- `upcast.upcast_module_text`: the module with every float type widened to f64 (the `f64`
  reference backend of tools/compare).

`common` holds what they share (the names of a module's ops, a rewrite tried on a copy first);
it rewrites nothing. A transform imports the core and never a tool (shlo2jax.tools).
"""
