"""torch.export `.pt2` archives (`torch.export.save(ep, "model.pt2")`), read as the function
torch exported: `program["forward"]` takes the forward's inputs, by their argument names, with
the state dict bound.

Reading is two steps, and only the first needs torch:

- `lower` (torch and torchax: `pip install "shlo2jax[torch]"`) loads the archive with
  `torch.export.load`, checks that torchax has a lowering for every op of the decomposed graph
  (an op it lacks is refused here, by name and place), and lowers it with torchax's
  `exported_program_to_stablehlo`. What comes out is plain data, a `Lowered`: torchax's
  StableHLO, where each argument of its @main comes from, the bound values as numpy arrays, the
  inputs' names and types, and torch's output pytree spec.
- `of_lowered` (no torch) parses that module and gives @main its calling convention
  (`conventions.bound`): the state dict's parameters bound under their names as trainable
  weights (`params`, `with_params`, `shlo2jax.lift_params`); buffers (batch norm's running
  statistics, ...) and lifted tensor constants bound as constants (`constants`), as torch
  itself trains only parameters; the user inputs in the forward's order, named as its
  arguments; results unflattened by torch's output spec (`sources.torch_xla_bundle`).

A `.pt2` file is a zip archive holding torch.export's `archive_format` member (or, written by
an older torch, `serialized_exported_program.json`): `is_pt2`.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import struct
import warnings
from typing import NamedTuple, Optional

import numpy as np

from shlo2jax import value_types as T
from shlo2jax.compat import make_ir_context
from shlo2jax.conventions.bound import Binding, BoundConvention, BoundValue
from shlo2jax.errors import LoadError
from shlo2jax.sources.mlir import parse_mlir
from shlo2jax.sources.torch_xla_bundle import output_structure

SOURCE = "torch.export .pt2"
FUNCTION = "forward"
INSTALL = 'pip install "shlo2jax[torch]"'
ZIP_MAGIC = b"PK\x03\x04"
_MEMBERS = (b"archive_format", b"serialized_exported_program.json")


class Lowered(NamedTuple):
    """A `.pt2` lowered by torchax, as data: `module` (torchax's StableHLO, bytes),
    `arguments` (a `Binding` per argument of its @main: a `param` or `constant` by its state
    dict name, or the user's `input` at its position), `inputs` (name, shape with None for a
    dynamic dimension, numpy dtype name) in the forward's order, `values` (name -> array for
    every bound argument) and `outputs` (torch's output pytree spec as JSON, or None)."""
    module: bytes
    arguments: tuple
    inputs: tuple
    values: dict
    outputs: Optional[str]


def is_pt2(data: bytes) -> bool:
    """Whether `data` is a zip archive with a torch.export member: a member's local header
    (read where it stands, so an archive cut short, its member list lost, is still one)."""
    if not data.startswith(ZIP_MAGIC):
        return False
    for header in re.finditer(re.escape(ZIP_MAGIC), data):
        start = header.start() + 30  # the name, after the fixed fields
        if start > len(data):
            break
        length = struct.unpack_from("<H", data, header.start() + 26)[0]
        if data[start:start + length].rsplit(b"/", 1)[-1] in _MEMBERS:
            return True
    return False


def read(data: bytes, source_name: str = "") -> tuple:
    """(the module, `source_name`, the conventions by module function): a `sources.Source`'s
    fields."""
    return of_lowered(lower(data, source_name or "the input"), source_name)


# -- the module and its convention (no torch)

def of_lowered(lowered: Lowered, source_name: str = "") -> tuple:
    """A `Lowered` as a `sources.Source`'s fields (see the module docstring)."""
    where = source_name or "the input"
    try:
        module = parse_mlir(lowered.module, make_ir_context(), where)
    except LoadError as e:
        raise LoadError(f"{where}: torchax's StableHLO of the {SOURCE} does not parse: {e}") \
            from None
    values = {n: BoundValue(v, f"{where}: {n}") for n, v in lowered.values.items()}
    return module, source_name, {"main": _convention(lowered, values, where)}


def _convention(lowered: Lowered, values: dict, where: str):
    def make(fdef, assembly) -> BoundConvention:
        bindings = [Binding(*b) for b in lowered.arguments]
        read_types = {b.position: t for b, t in zip(bindings, fdef.input_types)
                      if b.kind == "input"}
        inputs = [(name, read_types.get(i) or T.tensor_type(tuple(shape), np.dtype(dtype)))
                  for i, (name, shape, dtype) in enumerate(lowered.inputs)]
        structure = output_structure(lowered.outputs, len(fdef.output_types), where,
                                     f"the module's @{fdef.name}")
        return BoundConvention(fdef, FUNCTION, bindings, values, inputs, structure, SOURCE)
    return make


# -- the torch front end

def lower(data: bytes, where: str) -> Lowered:
    """The archive `data` loaded and lowered by torchax (see the module docstring)."""
    torch, torchax_export = _torch(where)
    try:
        with warnings.catch_warnings():  # (torch reads the weights out of our bytes, unwritten)
            warnings.filterwarnings("ignore", message="The given buffer is not writable")
            program = torch.export.load(io.BytesIO(data))
    except Exception as e:  # noqa: BLE001 - torch raises many kinds for a bad archive
        raise LoadError(f"{where}: torch.export.load cannot read the {SOURCE} archive: "
                        f"{_first_line(e)}") from None
    from torchax import decompositions
    try:  # (the decompositions torchax's exported_program_to_jax runs, here for _check_ops)
        program = program.run_decompositions().run_decompositions(
            decompositions.DECOMPOSITIONS)
    except Exception as e:  # noqa: BLE001 - an op torch cannot decompose, in one line
        raise LoadError(f"{where}: torch cannot decompose the {SOURCE} program for torchax: "
                        f"{_first_line(e)}") from None
    _check_ops(program, where)
    with _x64_kept():
        try:
            weights, exported = torchax_export.exported_program_to_stablehlo(program)
        except Exception as e:  # noqa: BLE001 - whatever torchax raises, named in one line
            raise LoadError(f"{where}: torchax cannot lower the {SOURCE} program: "
                            f"{_first_line(e)}") from None
    return _lowered(program, weights, exported, where)


def _torch(where: str):
    try:
        import torch
        import torchax.export
    except ImportError as e:
        raise LoadError(f"{where} is a {SOURCE} archive; reading it needs torch and torchax "
                        f"({e}): {INSTALL}") from None
    except Exception as e:  # noqa: BLE001 - a torchax that does not work with this torch
        raise LoadError(f"{where} is a {SOURCE} archive, and torchax does not import with "
                        f"this torch ({_first_line(e)}): {INSTALL}") from None
    return torch, torchax.export


@contextlib.contextmanager
def _x64_kept():
    """jax's x64 flag as the caller had it, whatever lowering sets."""
    import jax
    x64 = jax.config.jax_enable_x64
    try:
        yield
    finally:
        jax.config.update("jax_enable_x64", x64)


def _check_ops(program, where: str) -> None:
    """LoadError naming the first op of the graph torchax has no lowering for, and where the
    forward called it."""
    import torch
    import torchax
    from torchax.ops import ops_registry
    torchax.default_env()  # (registers torchax's lowerings)
    known = ops_registry.all_aten_ops
    for node in program.graph.nodes:
        target = node.target
        if node.op != "call_function" or not isinstance(
                target, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
            continue
        op = known.get(target) or known.get(getattr(target, "overloadpacket", None))
        if op is not None and op.is_jax_function:
            continue
        raise LoadError(f"{where}: torchax has no lowering for torch op {target} "
                        f"(node {node.name}{_place(node)}): shlo2jax reads what torchax lowers")


_FRAME_RE = re.compile(r'File "([^"]+)", line (\d+)')


def _place(node) -> str:
    """', in module M at FILE:LINE' from the node's metadata, as far as it says: the
    innermost module, and the last frame of the forward's code outside torch."""
    parts = []
    stack = node.meta.get("nn_module_stack") or {}
    if stack:
        path = list(stack.values())[-1][0].replace("L['self'].", "")
        parts.append(f"in module {path or 'self'}")
    frames = _FRAME_RE.findall(node.meta.get("stack_trace") or "")
    outside = [f for f in frames if f"{os.sep}torch{os.sep}" not in f[0]] or frames
    if outside:
        parts.append(f"at {outside[-1][0]}:{outside[-1][1]}")
    return "".join(", " + p for p in parts)


def _lowered(program, weights, exported, where: str) -> Lowered:
    from torch.export.graph_signature import InputKind
    signature = program.graph_signature
    states = ([("param", n) for n in signature.parameters]
              + [("constant", n) for n in signature.buffers]
              + [("constant", n) for n in signature.lifted_tensor_constants])
    user = [s.arg.name for s in signature.input_specs if s.kind == InputKind.USER_INPUT]
    avals = exported.in_avals
    if len(states) != len(weights) or len(avals) != len(weights) + len(user):
        raise LoadError(f"{where}: torchax lowered {len(avals)} arguments, the {SOURCE} "
                        f"program has {len(states)} states and {len(user)} inputs")
    if len(exported.platforms) != 1:
        raise LoadError(f"{where}: torchax lowered for platforms {exported.platforms}, "
                        "expected one")
    arguments, values = [], {}
    for i in exported.module_kept_var_idx:
        if i < len(states):
            kind, name = states[i]
            arguments.append((kind, name, -1))
            values[name] = np.asarray(weights[i])
        else:
            arguments.append(("input", "", i - len(states)))
    inputs = tuple((name, tuple(d if isinstance(d, int) else None for d in aval.shape),
                    np.dtype(aval.dtype).name)
                   for name, aval in zip(user, avals[len(states):]))
    import torch.utils._pytree as pytree
    spec = program.call_spec.out_spec
    return Lowered(bytes(exported.mlir_module_serialized), tuple(arguments), inputs, values,
                   None if spec is None else pytree.treespec_dumps(spec))


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"[:400]
