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
- `refine_shapes.refine_shapes`: `?` dimensions refined to a call's argument shapes by
  StableHLO's passes (`refine_arguments`: the argument types only; `strip_bounds`). The
  dynamic-shape executable (executables/polymorphic) runs it, with the four below, on a copy
  of the module per call signature.
- `keep_reachable.drop_unreachable` / `copy_reached`: only the functions a root reaches, through
  calls and symbols in attributes (executables/polymorphic: the copy it refines, and what
  refined @main no longer calls).
- `rename_function.rename_function`: a function renamed with every use of its symbol
  (executables/polymorphic: the specialised function becomes @main, which refinement refines).
- `constant_arguments.substitute_constants`: the uses of a function's arguments replaced by
  constants (executables/polymorphic: dimension-size arguments specialised on their values).
- `inline_calls.inline_calls`: every call reachable from a root replaced by its callee's body
  (executables/polymorphic, when refining callees once leaves `?`; tools/compare, to record
  every op of one function).
- `upcast.upcast_module_text`: the module with every float type widened to f64 (the `f64`
  reference backend of tools/compare).

`common` holds what they share (the names of a module's ops, its functions and calls,
StableHLO's passes registered once, a rewrite tried on a copy first); it rewrites nothing.
The transforms are features (tests/test_architecture.py): they import the core, never an
executable or a tool; the executables and tools call them. Each has its tests in
tests/transforms/test_<name>.py.
"""
