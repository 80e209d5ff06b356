"""A function's arguments for the tools (CLI `run`, `compare`, mutate): seeded values, or a
user's `.npz` bound by argument name or position, with the sizes of symbolic (`b`) and
dynamic (`?`) dimensions given by name (`dims`) or per argument (`shapes`).

- `dims`: {"b": 4} sizes the symbolic dimensions of a shape-polymorphic `jax.export` (its
  signature shows them, `f32[b,6]`); expressions of them (`2*b`) follow.
- `shapes`: {"x": (4, 6)} (keyed by argument name or position) gives an argument's whole
  shape, for `?` dimensions of MLIR text, which have no names.
"""

from __future__ import annotations

import re
import zipfile
import zlib
from typing import Mapping, NamedTuple, Optional

import jax
import numpy as np

from shlo2jax import value_types as T
from shlo2jax.errors import InputError, UsageError
from shlo2jax.npy import read_npy
from shlo2jax.signatures import type_text


class ArgumentSpec(NamedTuple):
    """One argument: its name, its shape (ints, None for `?`, a str for a symbolic dimension
    expression), dtype and how the signature writes its type; `why` is set where no value
    can be generated for it (tokens, tuples, quantized types)."""
    name: str
    shape: tuple
    dtype: Optional[np.dtype]
    text: str
    why: str = ""


def argument_specs(function) -> list:
    """The arguments a call of `function` takes, as `ArgumentSpec`s."""
    specs = []
    for n, a in zip(function.arg_names, function.argument_types):
        if isinstance(a, T.TensorType) and a.quant is None:  # (a dynamic dimension: None)
            specs.append(ArgumentSpec(n, tuple(a.shape), a.dtype, type_text(a)))
        elif isinstance(a, jax.ShapeDtypeStruct):  # (a jax.export symbolic dimension: its name)
            specs.append(ArgumentSpec(n, tuple(d if isinstance(d, int) else str(d)
                                               for d in a.shape), np.dtype(a.dtype),
                                      type_text(a)))
        else:
            specs.append(ArgumentSpec(n, (), None, type_text(a), why=_why_not_seeded(a)))
    return specs


def _why_not_seeded(t) -> str:
    if isinstance(t, T.TokenType):
        return "a token; from Python, pass shlo2jax.TOKEN"
    if isinstance(t, T.TupleType):
        return "a tuple; from Python, pass its elements as a tuple"
    return "a quantized type; pass its storage integers with --inputs"


_FUNCTIONS = {"floordiv": lambda a, b: a // b, "mod": lambda a, b: a % b, "max": max,
              "min": min, "non_negative": lambda a: max(a, 0)}
_EXPRESSION_RE = re.compile(r"^[\w\s+\-*(),]+$")
_NAME_RE = re.compile(r"[A-Za-z_]\w*")


def dimension_names(specs) -> list:
    """The symbolic dimension names the arguments' shapes use, in order of appearance."""
    found = []
    for spec in specs:
        for d in spec.shape:
            if isinstance(d, str):
                found += [n for n in _NAME_RE.findall(d) if n not in _FUNCTIONS
                          and n not in found]
    return found


def _size(expression: str, dims: Mapping[str, int]) -> Optional[int]:
    names = [n for n in _NAME_RE.findall(expression) if n not in _FUNCTIONS]
    if any(n not in dims for n in names) or not _EXPRESSION_RE.match(expression):
        return None
    value = eval(expression, {"__builtins__": {}}, {**_FUNCTIONS, **dims})  # noqa: S307 - checked above: names, digits, + - * ( ) ,
    return int(value)


def concrete_shapes(function, dims: Optional[Mapping[str, int]] = None,
                    shapes: Optional[Mapping] = None) -> list:
    """Each argument's shape with every dimension sized: (spec, shape) pairs. A dimension no
    `dims`/`shapes` entry sizes is an `InputError` naming the option that would."""
    specs = argument_specs(function)
    dims, shapes = dict(dims or {}), dict(shapes or {})
    names = dimension_names(specs)
    unknown = [n for n in dims if n not in names]
    if unknown:
        have = (f"its symbolic dimensions: {', '.join(names)}" if names
                else "it has no symbolic dimensions (for `?` dimensions use --shape)")
        raise UsageError(f"--dim {', '.join(unknown)}: no such dimension in "
                         f"{function.signature}; {have}")
    by_name = {s.name: i for i, s in enumerate(specs)}
    given = {}
    for key, shape in shapes.items():
        i = _position(key, by_name, len(specs))
        if i is None:
            raise UsageError(f"--shape {key}: no such argument; the arguments: "
                             f"{', '.join(s.name for s in specs)}")
        given[i] = tuple(shape)
    out = []
    for i, spec in enumerate(specs):
        if i in given:
            shape = given[i]
            if len(shape) != len(spec.shape) or any(
                    isinstance(d, int) and d != s for d, s in zip(spec.shape, shape)):
                raise UsageError(f"--shape {spec.name}={'x'.join(map(str, shape))} does not fit "
                                 f"{spec.name}: {spec.text}")
            out.append((spec, shape))
            continue
        shape = []
        for d in spec.shape:
            if isinstance(d, int):
                shape.append(d)
            elif d is None:
                raise InputError(f"{spec.name}: {spec.text} has a `?` dimension: give its shape "
                                 f"with --shape {spec.name}=" + "x".join(
                                     "N" if s is None else str(s) for s in spec.shape)
                                 + ", or pass --inputs")
            else:
                size = _size(d, dims)
                if size is None:
                    missing = [n for n in _NAME_RE.findall(d)
                               if n not in _FUNCTIONS and n not in dims]
                    raise InputError(f"{spec.name}: {spec.text} has the symbolic dimension "
                                     f"{d}: give " + " ".join(f"--dim {n}=SIZE" for n in missing)
                                     + ", or pass --inputs")
                shape.append(size)
        out.append((spec, tuple(shape)))
    return out


def seeded_array(ttype, rng: np.random.Generator, shape: Optional[tuple] = None) -> np.ndarray:
    """Floats standard normal; integers in [0, 3] so they are valid as indices and sizes.
    `ttype`: a TensorType (its shape unless `shape` is given) or a numpy dtype."""
    dtype = np.dtype(getattr(ttype, "dtype", ttype))
    shape = ttype.shape if shape is None else shape
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if T.is_integer(dtype):
        return rng.integers(0, 4, shape).astype(dtype)
    if T.is_complex(dtype):
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def seeded_inputs(function, seed: int = 0, dims: Optional[Mapping[str, int]] = None,
                  shapes: Optional[Mapping] = None) -> list:
    """Seeded arguments for `function` (see `seeded_array`); symbolic and `?` dimensions
    sized by `dims` and `shapes` (see the module docstring). An argument no value can be
    generated for (a token, a tuple, a quantized type) or a dimension not sized: `InputError`
    (a ValueError)."""
    rng = np.random.default_rng(seed)
    inputs = []
    for spec, shape in _generatable(function, dims, shapes):
        inputs.append(seeded_array(spec.dtype, rng, shape))
    return inputs


def _generatable(function, dims, shapes) -> list:
    for spec in argument_specs(function):
        if spec.why:
            raise InputError(f"cannot generate a seeded value for {spec.name}: {spec.text} is "
                             f"{spec.why}")
    return concrete_shapes(function, dims, shapes)


def _position(key: str, by_name: Mapping[str, int], count: int) -> Optional[int]:
    """An argument's position from a key: its name, its position (`0`), or `arg_<i>`."""
    if key in by_name:
        return by_name[key]
    match = re.fullmatch(r"(?:arg_?)?(\d+)", str(key))
    if match and int(match.group(1)) < count:
        return int(match.group(1))
    return None


def bind_arrays(function, arrays: Mapping[str, np.ndarray], what: str = "--inputs") -> list:
    """The positional arguments of `function` from arrays keyed by argument name (as the
    signature writes it), position (`0`, `1`, ...) or `arg_<i>`: every argument given once,
    no key unknown; each array of its argument's dtype and shape (an `InputError` naming the
    keys and arguments otherwise)."""
    specs = argument_specs(function)
    by_name = {s.name: i for i, s in enumerate(specs)}
    bound: dict = {}
    unknown, twice = [], []
    for key in arrays:
        i = _position(key, by_name, len(specs))
        if i is None:
            unknown.append(key)
        elif i in bound:
            twice.append(f"{specs[i].name} (as {bound[i]!r} and {key!r})")
        else:
            bound[i] = key
    names = ", ".join(s.name for s in specs) or "none"
    if unknown:
        raise InputError(f"{what}: unknown key(s) {', '.join(map(repr, unknown))}; "
                         f"{function.signature} takes {names} (or positions 0..{len(specs) - 1})")
    if twice:
        raise InputError(f"{what}: argument(s) given twice: {'; '.join(twice)}")
    missing = [s.name for i, s in enumerate(specs) if i not in bound]
    if missing:
        raise InputError(f"{what}: missing argument(s) {', '.join(missing)} of "
                         f"{function.signature}")
    values = []
    for i, spec in enumerate(specs):
        value = np.asarray(arrays[bound[i]])
        if spec.dtype is not None:
            if value.dtype != spec.dtype:
                raise InputError(f"{what}: {bound[i]!r} has dtype {value.dtype}; {spec.name} is "
                                 f"{spec.text} ({spec.dtype}); values are never converted")
            if value.ndim != len(spec.shape) or any(
                    isinstance(d, int) and d != s for d, s in zip(spec.shape, value.shape)):
                raise InputError(f"{what}: {bound[i]!r} has shape {tuple(value.shape)}; "
                                 f"{spec.name} is {spec.text}")
        values.append(value)
    return values


def read_npz(path: str, what: str = "--inputs") -> dict:
    """The arrays of an `.npz` file (an `InputError` for one that cannot be read, or whose
    arrays declare more than the file holds or the memory available: shlo2jax.npy)."""
    try:
        with open(path, "rb") as f:
            if f.read(6) == b"\x93NUMPY":
                raise InputError(f"{what} {path}: one array (.npy), not an .npz of arrays "
                                 "keyed by argument name or position")
        with zipfile.ZipFile(path) as archive:
            arrays = {}
            for info in archive.infolist():
                key = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
                with archive.open(info) as member:
                    arrays[key] = read_npy(member, info.file_size, f"{what} {path}: {key!r}",
                                           InputError)
            return arrays
    except FileNotFoundError:
        raise InputError(f"{what} {path}: no such file") from None
    # (RuntimeError: an encrypted member; NotImplementedError: a compression zipfile lacks)
    except (OSError, EOFError, zipfile.BadZipFile, zlib.error, NotImplementedError,
            RuntimeError) as e:
        raise InputError(f"{what} {path}: not a readable .npz ({e})") from None
