"""PyTorch/XLA StableHLO bundles: the folder `torch_xla.stablehlo.exported_program_to_stablehlo(
ep).save(DIR)` writes, read as one program whose function takes torch's inputs only.

The folder holds `functions/<name>.bytecode` (and `.mlir`, the same module as text) with
`functions/<name>.meta`, JSON saying where each argument of the module's `@main` comes from
(`input_locations`: a `parameter` named in `data/`, a `constant` numbered in `constants/`, or
the user's `input_arg` at a flat position), the arguments' and results' signatures, and torch's
pytree specs of the inputs and outputs; `data/<state_dict key>` and `constants/<i>` are numpy
`.npy` files. The folder is claimed by its `functions/*.meta` files.

`read` parses the module and reads the weights, and gives each module function its calling
convention (`shlo2jax.conventions.bound`): `program[name]` (torch_xla's function name,
"forward"; a bundle of several functions is one module holding each, its `@main` renamed to its
name, or only the one `module=` names) is a function taking the user's inputs in torch's order (named
from the input pytree spec: `args[0]`, a keyword input by its key), with the weights bound
under their `state_dict` names (`params`, `with_params`, `shlo2jax.lift_params`) and the
constants under `constants/<i>`; results are unflattened by the output pytree spec where it
holds only tuples, lists, dicts and leaves, else returned flat. Everything that does not match
(a missing or unreadable file, meta that disagrees with the module, a weight of another type)
is a `LoadError` naming the file and what was wrong.
"""

from __future__ import annotations

import functools
import json
import os
from typing import NamedTuple, Optional

import numpy as np
from jaxlib.mlir import ir

from shlo2jax import value_types as T
from shlo2jax.compat import make_ir_context
from shlo2jax.errors import LoadError
from shlo2jax.npy import read_npy
from shlo2jax.conventions.bound import Binding, BoundConvention, BoundValue
from shlo2jax.sources.mlir import parse_mlir

SOURCE = "PyTorch/XLA bundle"
_KINDS = {"parameter": "param", "constant": "constant", "input_arg": "input"}
_DTYPES = {"float32": "float32", "float64": "float64", "float16": "float16",
           "bfloat16": "bfloat16", "int64": "int64", "int32": "int32", "int16": "int16",
           "int8": "int8", "uint8": "uint8", "bool": "bool", "complex64": "complex64",
           "complex128": "complex128"}


def claims(path: str) -> bool:
    """Whether `path` is a bundle: a `functions/` folder holding `.meta` files."""
    functions = os.path.join(path, "functions")
    try:
        return any(n.endswith(".meta") for n in os.listdir(functions))
    except OSError:
        return False


class _Function(NamedTuple):
    """One function of a bundle, read: its name, meta, module and bound values."""
    name: str
    meta: dict
    meta_path: str
    mlir_module: object
    values: dict


def read(path: str, module: Optional[str] = None, source_name: str = "") -> tuple:
    """(one verified module holding the bundle's functions, or only the function `module`;
    `source_name`; the conventions that bind their weights, by module function: see the
    module docstring), a `sources.Source`'s fields."""
    functions = os.path.join(path, "functions")
    names = sorted(n[:-len(".meta")] for n in os.listdir(functions) if n.endswith(".meta"))
    if module is not None and module not in names:
        raise LoadError(f"{path}: no function {module!r} in the {SOURCE}; its functions: "
                        f"{', '.join(names)}")
    context = make_ir_context()
    read_ = [_read_function(path, name, context) for name in ([module] if module else names)]
    if len(read_) == 1:  # the module as torch_xla wrote it: the function is its @main
        return read_[0].mlir_module, source_name, {"main": _convention(read_[0])}
    return (_merged(read_, context, path), source_name,
            {f.name: _convention(f) for f in read_})


def _read_function(path: str, name: str, context) -> _Function:
    functions = os.path.join(path, "functions")
    meta_path = os.path.join(functions, name + ".meta")
    meta = _read_meta(meta_path)
    for suffix in (".bytecode", ".mlir"):
        program_path = os.path.join(functions, name + suffix)
        if os.path.isfile(program_path):
            break
    else:
        raise LoadError(f"{path}: {SOURCE} function {name!r} has a meta file but neither "
                        f"functions/{name}.bytecode nor functions/{name}.mlir")
    data = _file(program_path)
    try:
        mlir_module = parse_mlir(data, context, program_path)
    except LoadError as e:
        raise LoadError(f"{program_path} ({len(data)} bytes) is truncated or corrupt: {e}") \
            from None
    return _Function(name, meta, meta_path, mlir_module, _read_values(path, meta, meta_path))


def _merged(functions, context, path: str):
    """One module of several functions' modules: each one's @main renamed to the function's
    name, its other symbols prefixed `<name>.`; the module attributes are the first one's."""
    with context, ir.Location.unknown(context):
        merged = ir.Module.create()
        attributes = functions[0].mlir_module.operation.attributes
        for i in range(len(attributes)):
            merged.operation.attributes[attributes[i].name] = attributes[i].attr
        for function in functions:
            module = function.mlir_module
            ops = list(module.body.operations)
            for op in ops:
                if "sym_name" not in op.attributes:
                    continue
                old = ir.StringAttr(op.attributes["sym_name"]).value
                new = function.name if old == "main" else f"{function.name}.{old}"
                ir.SymbolTable.replace_all_symbol_uses(old, new, module.operation)
                ir.SymbolTable.set_symbol_name(op, new)
            for op in ops:
                merged.body.append(op)
        try:
            valid = merged.operation.verify()
        except Exception as e:  # noqa: BLE001 - jaxlib raises MLIRError, or returns False
            raise LoadError(f"{path}: the {SOURCE}'s functions do not make one valid module: "
                            f"{e}") from None
        if not valid:
            raise LoadError(f"{path}: the {SOURCE}'s functions do not make one valid module")
    return merged


def _convention(function: _Function):
    """The factory of `function`'s calling convention: its weights and constants bound, torch's
    inputs in torch's order (checked against the module function's signature `fdef`)."""
    def make(fdef, assembly) -> BoundConvention:
        meta, meta_path = function.meta, function.meta_path
        module_types = fdef.input_types
        signature, locations = meta["input_signature"], meta["input_locations"]
        at = f"the module's @{fdef.name}"
        if len(locations) != len(module_types):
            raise LoadError(f"{meta_path}: input_locations names {len(locations)} arguments, "
                            f"but {at} takes {len(module_types)}")
        for i, (declared, ttype) in enumerate(zip(signature, module_types)):
            _check_declared(declared, ttype, f"{meta_path}: input_signature[{i}]",
                            f"{at} argument {i}")
        outputs = meta["output_signature"]
        if len(outputs) != len(fdef.output_types):
            raise LoadError(f"{meta_path}: output_signature has {len(outputs)} results, {at} "
                            f"returns {len(fdef.output_types)}")
        for i, (declared, ttype) in enumerate(zip(outputs, fdef.output_types)):
            _check_declared(declared, ttype, f"{meta_path}: output_signature[{i}]",
                            f"{at} result {i}")
        bindings = [_binding(loc) for loc in locations]
        inputs = _inputs(bindings, module_types, meta, meta_path)
        structure = output_structure(meta.get("output_pytree_spec"), len(fdef.output_types),
                               meta_path, at)
        return BoundConvention(fdef, function.name, bindings, function.values, inputs,
                               structure, SOURCE)
    return make


# -- reading

def _file(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise LoadError(f"cannot read {path}: {e.strerror or e}") from None


def _read_meta(path: str) -> dict:
    try:
        meta = json.loads(_file(path).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise LoadError(f"{path}: not valid JSON: {e}") from None
    if not isinstance(meta, dict):
        raise LoadError(f"{path}: a {SOURCE} meta file is a JSON object, got "
                        f"{type(meta).__name__}")
    for key in ("input_signature", "output_signature", "input_locations"):
        if not isinstance(meta.get(key), list):
            raise LoadError(f"{path}: {key!r} is missing or not a list")
    if not isinstance(meta.get("unused_inputs") or [], list):
        raise LoadError(f"{path}: 'unused_inputs' is not a list")
    if len(meta["input_signature"]) != len(meta["input_locations"]):
        raise LoadError(f"{path}: {len(meta['input_signature'])} input_signature entries but "
                        f"{len(meta['input_locations'])} input_locations")
    for i, loc in enumerate(meta["input_locations"]):
        if not isinstance(loc, dict) or not isinstance(loc.get("type_"), str) or \
                loc["type_"] not in _KINDS:
            raise LoadError(f"{path}: input_locations[{i}] is not a parameter, constant or "
                            f"input_arg location: {loc!r}")
        if loc["type_"] == "parameter" and not _plain_name(loc.get("name")):
            raise LoadError(f"{path}: input_locations[{i}] names parameter {loc.get('name')!r}, "
                            "which is not a file name in data/")
        if loc["type_"] != "parameter" and not (isinstance(loc.get("position"), int)
                                                and loc["position"] >= 0):
            raise LoadError(f"{path}: input_locations[{i}] ({loc['type_']}) has no position: "
                            f"{loc!r}")
    for key in ("input_signature", "output_signature"):
        for i, sig in enumerate(meta[key]):
            if not (isinstance(sig, dict) and _ints(sig.get("shape"))
                    and isinstance(sig.get("dtype"), str)
                    and _ints(sig.get("dynamic_dims") or [])):
                raise LoadError(f"{path}: {key}[{i}] is not a shape and dtype: {sig!r}")
    return meta


def _ints(value) -> bool:
    return isinstance(value, list) and all(type(v) is int for v in value)


def _plain_name(name) -> bool:
    return (isinstance(name, str) and bool(name) and name not in (".", "..")
            and os.path.basename(name) == name and "\\" not in name)


def _read_values(path: str, meta: dict, meta_path: str) -> dict:
    """name -> BoundValue for every parameter and constant the function reads."""
    values = {}
    for loc in meta["input_locations"]:
        if loc["type_"] == "input_arg":
            continue
        name = _binding(loc).name
        if name in values:
            continue
        rel = os.path.join("data", loc["name"]) if loc["type_"] == "parameter" else \
            os.path.join("constants", str(loc["position"]))
        file = os.path.join(path, rel)
        if not os.path.isfile(file):
            raise LoadError(f"{file}: missing ({meta_path} binds {loc['type_']} "
                            f"{name!r} to it)")
        values[name] = BoundValue(_npy(file), file)
    return values


def _npy(file: str) -> np.ndarray:
    try:
        with open(file, "rb") as f:
            if f.read(2) == b"PK":
                raise LoadError(f"{file}: not a numpy .npy array (an .npz archive)")
            f.seek(0)
            value = read_npy(f, os.fstat(f.fileno()).st_size, file)
    except OSError as e:
        raise LoadError(f"{file}: cannot be read: {e}") from None
    return value if value.flags.c_contiguous else np.ascontiguousarray(value)  # (keeps 0-d)


# -- the meta against the module

def _binding(loc: dict) -> Binding:
    kind = _KINDS[loc["type_"]]
    if kind == "param":
        return Binding(kind, loc["name"])
    if kind == "constant":
        return Binding(kind, f"constants/{loc['position']}", loc["position"])
    return Binding(kind, "", loc["position"])


def _dtype(name: str, where: str):
    if not isinstance(name, str) or name not in _DTYPES:
        raise LoadError(f"{where}: dtype {name!r} is not a tensor dtype shlo2jax knows")
    return _np_dtype(_DTYPES[name])


def _np_dtype(name: str):
    if name == "bfloat16":
        import ml_dtypes
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def _check_declared(declared: dict, ttype, where: str, what: str) -> None:
    dtype = _dtype(declared["dtype"], where)
    dynamic = set(declared.get("dynamic_dims") or ())
    shape = declared["shape"]
    if not isinstance(ttype, T.TensorType) or ttype.dtype != dtype or len(shape) != len(
            ttype.shape) or any(d is not None and d != s and i not in dynamic
                                for i, (d, s) in enumerate(zip(ttype.shape, shape))):
        raise LoadError(f"{where} declares {declared['dtype']}{shape}, but {what} is {ttype}")


def _inputs(bindings, module_types, meta: dict, meta_path: str) -> list:
    """The caller's inputs in torch's flat order: (name, type), typed by the module argument
    each becomes (or, for an input the module does not read, by `unused_inputs`)."""
    types = {b.position: t for b, t in zip(bindings, module_types) if b.kind == "input"}
    for record in meta.get("unused_inputs") or ():
        try:
            (loc, sig) = record
            position = int(loc["position"])
            shape = tuple(int(d) for d in sig["shape"])
        except (TypeError, ValueError, KeyError) as e:
            raise LoadError(f"{meta_path}: unused_inputs entry {record!r} is not a location "
                            f"and a signature ({e})") from None
        if position in types:
            raise LoadError(f"{meta_path}: input {position} is both read and unused")
        types[position] = T.tensor_type(shape, _dtype(sig["dtype"], f"{meta_path}: "
                                                                    f"unused input {position}"))
    if sorted(types) != list(range(len(types))):
        raise LoadError(f"{meta_path}: the inputs' positions {sorted(types)} are not 0 to "
                        f"{len(types) - 1}")
    names = _input_names(meta.get("input_pytree_spec"), len(types))
    return [(names[i], types[i]) for i in range(len(types))]


# -- torch's pytree specs (torch.utils._pytree.treespec_dumps: [1, {type, context,
#    children_spec}])

def _spec(text):
    try:
        protocol, spec = json.loads(text)
    except (TypeError, ValueError):
        return None
    return spec if protocol == 1 and isinstance(spec, dict) else None


def _leaf_paths(spec, path: str):
    """The paths of a spec's leaves in flat order, or None where a node is not a tuple, list,
    dict or leaf."""
    kind, children = spec.get("type"), spec.get("children_spec") or []
    if kind is None:
        return [path]
    if kind in ("builtins.tuple", "builtins.list"):
        keys = [f"[{i}]" for i in range(len(children))]
    elif kind in ("builtins.dict", "collections.OrderedDict"):
        try:
            context = json.loads(spec.get("context") or "[]")
        except (TypeError, ValueError):
            return None
        if not isinstance(context, list) or len(context) != len(children):
            return None
        keys = [f"[{k!r}]" for k in context]
    else:
        return None
    out = []
    for key, child in zip(keys, children):
        inner = _leaf_paths(child, path + key) if isinstance(child, dict) else None
        if inner is None:
            return None
        out += inner
    return out


def _input_names(text, count: int) -> list:
    """`args[i]` (nested: `args[i][j]`), a keyword input by its key; `input_<i>` where the
    spec is not readable."""
    spec = _spec(text)
    paths = _leaf_paths(spec, "") if spec is not None else None
    if paths is None or len(paths) != count:
        return [f"input_{i}" for i in range(count)]
    names = []
    for p in paths:  # [0][i]... : positional; [1]['key']... : keyword
        if p.startswith("[0]"):
            names.append("args" + p[3:])
        else:
            key = p[3:]
            names.append(key[2:-2] if key.count("[") == 1 and key[1:2] == "'" else "kwargs" + key)
    return names


def output_structure(text, count: int, meta_path: str, at: str):
    """The flat results -> torch's structure, or None (returned flat) where the spec is not
    readable."""
    spec = _spec(text) if text is not None else None
    paths = _leaf_paths(spec, "") if spec is not None else None
    if paths is None:
        return None
    if len(paths) != count:
        raise LoadError(f"{meta_path}: output_pytree_spec has {len(paths)} leaves, {at} "
                        f"returns {count} results")
    return functools.partial(_unflatten, spec)


def _unflatten(spec, outs: tuple):
    leaves = iter(outs)

    def build(node):
        kind, children = node.get("type"), node.get("children_spec") or []
        if kind is None:
            return next(leaves)
        built = [build(c) for c in children]
        if kind == "builtins.tuple":
            return tuple(built)
        if kind == "builtins.list":
            return built
        return dict(zip(json.loads(node.get("context") or "[]"), built))
    return build(spec)
