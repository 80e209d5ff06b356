"""Differential fuzzing: random well-typed StableHLO programs run three ways.

`generate(seed)` writes a program: a chain of ops over the arguments of one tensor type
(elementwise unary and binary ops, compare/select, conversions), then one op that may
change the shape (reduce, transpose, reverse, slice, pad, concatenate, broadcast,
dynamic_slice / dynamic_update_slice, gather and scatter with starts that may be out of range,
dot_general, a while loop, convert). Inputs mix ordinary values with NaN, +-inf, -0,
subnormals and the integer extremes. `check(seed)` runs the program through the
translation, XLA compiling the module directly and, when it is small, the reference
interpreter (a child process), and compares every output: integers bit for bit, floats
within 3 ULP or 1e-4 (the corpus's tolerances against the interpreter), non-finite values
exactly. A mismatch is minimised to the shortest prefix of the chain that still
mismatches and written out as a regression case with its seed. XLA on CPU flushes
subnormal floats to zero and the interpreter does not: a difference from the interpreter
alone that flushing the inputs' subnormals reproduces is listed apart ("flushed"), not
counted as a mismatch.

    python -m shlo2jax fuzz --count 200 --seed 0 [--json out.json] [--cases DIR]

Last line: `fuzz: N programs, M mismatches, K crashes`; exit status 1 when M or K is not 0.
"""

from __future__ import annotations

import json
import os
import random
import time
from typing import NamedTuple, Optional

import ml_dtypes
import numpy as np

from shlo2jax.errors import BackendUnavailable
from shlo2jax.loader import load
from shlo2jax.options import LoadOptions
from shlo2jax.tools import exits
from shlo2jax.tools.commands import non_negative_int, positive_int
from shlo2jax.tools.compare import InterpreterBackend, TranslatedBackend, XlaDirectBackend
from shlo2jax.tools.isolated import run_isolated
from shlo2jax.tools.numerics import reference_mismatch
from shlo2jax.tools.option_flags import add_option_flags, options_from
from shlo2jax.tools.reference import InterpreterServer

_FLOATS = ("f32", "bf16", "f16")
_INTS = ("i32", "i8", "ui8", "i64")
_NP = {"f32": np.float32, "f16": np.float16, "i32": np.int32, "i8": np.int8,
       "ui8": np.uint8, "i64": np.int64}

_UNARY_FLOAT = ("abs", "negate", "exponential", "log", "sqrt", "rsqrt", "tanh", "sine",
                "cosine", "floor", "ceil", "sign", "round_nearest_even",
                "round_nearest_afz", "logistic", "exponential_minus_one", "log_plus_one",
                "cbrt")
_UNARY_INT = ("abs", "negate", "not", "popcnt", "sign", "count_leading_zeros")
_BINARY_FLOAT = ("add", "subtract", "multiply", "divide", "maximum", "minimum", "power",
                 "atan2", "remainder")
_BINARY_INT = ("add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum",
               "and", "or", "xor", "shift_left", "shift_right_logical",
               "shift_right_arithmetic")
_DIRECTIONS = ("EQ", "NE", "LT", "LE", "GT", "GE")
_SHAPES = ((4,), (2, 3), (3, 1, 2), (5,), ())
_INFINITIES = {"f32": ("0xFF800000", "0x7F800000"), "f16": ("0xFC00", "0x7C00"),
               "bf16": ("0xFF80", "0x7F80")}


class GeneratedProgram(NamedTuple):
    """A program `generate(seed)` wrote (not a loaded `shlo2jax.Program`): its parts and inputs."""
    seed: int
    element: str
    shape: tuple
    n_args: int
    chain: list         # op lines, each defining %v<k> of the argument type
    tail: list          # lines of the last op (may change the shape); [] for none
    result_type: str    # the type of what @main returns
    inputs: list

    def text(self, length: Optional[int] = None) -> str:
        """The module; `length`: only the first `length` ops of the chain, no tail."""
        t = _tensor(self.shape, self.element)
        chain = self.chain if length is None else self.chain[:length]
        tail = self.tail if length is None else []
        result = self.result_type if length is None else t
        last = (f"%v{len(chain)}" if chain else "%a0") if not tail else "%out"
        args = ", ".join(f"%a{i}: {t}" for i in range(self.n_args))
        body = "\n".join("    " + line for line in chain + tail)
        return (f"// fuzz seed {self.seed}\n"
                f"func.func public @main({args}) -> {result} {{\n"
                f"{body}\n    return {last} : {result}\n}}\n")


def _tensor(shape, element) -> str:
    return "tensor<" + "".join(f"{d}x" for d in shape) + element + ">"


def _special_values(element: str, rng: np.random.Generator, n: int) -> np.ndarray:
    if element in _FLOATS:
        dtype = _float_dtype(element)
        info = ml_dtypes.finfo(dtype)
        pool = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1.0, -1.0, 0.5, 2.0, 3.0,
                         float(info.max), float(info.tiny), float(info.smallest_subnormal),
                         -float(info.smallest_subnormal) * 3, 1e-3, 100.0], np.float64)
        normal = rng.standard_normal(n) * 4
        values = np.where(rng.random(n) < 0.35, rng.choice(pool, n), normal)
        return values.astype(dtype)
    dtype = np.dtype(_NP[element])
    info = np.iinfo(dtype)
    pool = np.array([info.min, info.max, 0, 1, -1 if info.min < 0 else 2, 2, 7,
                     info.bits - 1, info.bits, info.bits + 1], np.int64)
    ordinary = rng.integers(max(info.min, -50), min(info.max, 50), n, endpoint=True)
    values = np.where(rng.random(n) < 0.35, rng.choice(pool, n), ordinary)
    return values.astype(dtype)


def _float_dtype(element: str):
    if element == "bf16":
        return ml_dtypes.bfloat16
    return _NP[element]


def generate(seed: int) -> GeneratedProgram:
    rng = random.Random(seed)
    element = rng.choice(_FLOATS + _INTS)
    is_float = element in _FLOATS
    shape = rng.choice(_SHAPES)
    t = _tensor(shape, element)
    i1 = _tensor(shape, "i1")
    n_args = rng.randint(1, 3)
    values = [f"%a{i}" for i in range(n_args)]
    chain: list = []
    for k in range(1, rng.randint(1, 5) + 1):
        kind = rng.choice(["unary", "binary", "binary", "select", "convert"])
        a, b = rng.choice(values), rng.choice(values)
        v = f"%v{k}"
        if kind == "unary":
            ops = _UNARY_FLOAT if is_float else _UNARY_INT
            if element.startswith("u"):  # abs and sign take signed integers only
                ops = tuple(o for o in ops if o not in ("abs", "sign"))
            op = rng.choice(ops)
            chain.append(f"{v} = stablehlo.{op} {a} : {t}")
        elif kind == "binary":
            op = rng.choice(_BINARY_FLOAT if is_float else _BINARY_INT)
            chain.append(f"{v} = stablehlo.{op} {a}, {b} : {t}")
        elif kind == "select":
            d = rng.choice(_DIRECTIONS)
            compare_type = "FLOAT" if is_float else ("UNSIGNED" if element.startswith("u")
                                                     else "SIGNED")
            chain.append(f"{v}c = stablehlo.compare {d}, {a}, {b}, {compare_type} : "
                         f"({t}, {t}) -> {i1}")
            chain[-1] += f"\n    {v} = stablehlo.select {v}c, {a}, {b} : {i1}, {t}"
        else:  # a round trip through another type
            other = rng.choice([e for e in _FLOATS + _INTS if e != element])
            to = _tensor(shape, other)
            chain.append(f"{v}x = stablehlo.convert {a} : ({t}) -> {to}\n"
                         f"    {v} = stablehlo.convert {v}x : ({to}) -> {t}")
        values.append(v)
    x = values[-1]
    tail, result = _tail(rng, x, shape, element, t, is_float)
    inputs_rng = np.random.default_rng(seed)
    size = int(np.prod(shape)) if shape else 1
    inputs = [_special_values(element, inputs_rng, size).reshape(shape) for _ in range(n_args)]
    return GeneratedProgram(seed, element, shape, n_args, chain, tail, result, inputs)


class _Operand(NamedTuple):
    """What the last op applies to: the chain's last value `x`, of type `t`."""
    x: str
    shape: tuple
    element: str
    t: str
    is_float: bool

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def scalar(self) -> str:
        return _tensor((), self.element)


def _tail(rng: random.Random, x: str, shape: tuple, element: str, t: str, is_float: bool):
    """The last op (or none): returns (lines, result type). The kind is drawn first; the kinds
    that index (`_INDEXED_TAILS`) all draw their start indices next, used or not, so that a
    seed always writes the same program."""
    a = _Operand(x, shape, element, t, is_float)
    kinds = list(_SHAPED_TAILS) + list(_INDEXED_TAILS) if a.rank else _ANY_RANK_TAILS
    kind = rng.choice(kinds)
    if kind in _SHAPED_TAILS:
        return _SHAPED_TAILS[kind](rng, a)
    starts = [rng.choice([-5, -1, 0, 1, 2, 7, 2147483647, -2147483648]) for _ in shape]
    return _INDEXED_TAILS[kind](rng, a, starts)


def _no_tail(rng, a: _Operand):
    return [], a.t


def _reduce_tail(rng, a: _Operand):
    dims = sorted(rng.sample(range(a.rank), rng.randint(0, a.rank))) if a.rank else []
    out_shape = tuple(d for i, d in enumerate(a.shape) if i not in dims)
    body = rng.choice(["add", "maximum", "minimum", "multiply"])
    init = {"add": "0", "multiply": "1"}.get(body)
    if init is None:  # the identity: -inf / +inf, the integer extremes
        if a.is_float:
            init = _INFINITIES[a.element][body == "minimum"]
        else:
            info = np.iinfo(_NP[a.element])
            init = str(info.min if body == "maximum" else info.max)
    elif a.is_float:
        init += ".0"
    ot = _tensor(out_shape, a.element)
    return ([f"%init = stablehlo.constant dense<{init}> : {a.scalar}",
             f"%out = stablehlo.reduce({a.x} init: %init) applies stablehlo.{body} "
             f"across dimensions = {dims} : ({a.t}, {a.scalar}) -> {ot}"], ot)


def _while_tail(rng, a: _Operand):
    t = a.t
    trips = rng.randint(0, 3)
    return ([f"%n = stablehlo.constant dense<{trips}> : tensor<i32>",
             "%zero = stablehlo.constant dense<0> : tensor<i32>",
             "%one = stablehlo.constant dense<1> : tensor<i32>",
             f"%w:2 = stablehlo.while(%i = %zero, %acc = {a.x}) : tensor<i32>, {t}",
             " cond {",
             "  %c = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>",
             "  stablehlo.return %c : tensor<i1>",
             "} do {",
             "  %i1 = stablehlo.add %i, %one : tensor<i32>",
             f"  %s = stablehlo.add %acc, %acc : {t}",
             f"  stablehlo.return %i1, %s : tensor<i32>, {t}",
             "}",
             f"%out = stablehlo.add %w#1, %w#1 : {t}"], t)


def _broadcast_tail(rng, a: _Operand):
    ot = _tensor((2,) + a.shape, a.element)
    dims = list(range(1, a.rank + 1))
    return [f"%out = stablehlo.broadcast_in_dim {a.x}, dims = {dims} : ({a.t}) -> {ot}"], ot


def _transpose_tail(rng, a: _Operand):
    perm = list(range(a.rank))
    rng.shuffle(perm)
    ot = _tensor(tuple(a.shape[p] for p in perm), a.element)
    return [f"%out = stablehlo.transpose {a.x}, dims = {perm} : ({a.t}) -> {ot}"], ot


def _reverse_tail(rng, a: _Operand):
    dims = sorted(rng.sample(range(a.rank), rng.randint(1, a.rank)))
    return [f"%out = stablehlo.reverse {a.x}, dims = {dims} : {a.t}"], a.t


def _slice_tail(rng, a: _Operand):
    starts = [rng.randint(0, d - 1) for d in a.shape]
    limits = [rng.randint(s + 1, d) for s, d in zip(starts, a.shape)]
    strides = [rng.randint(1, 2) for _ in a.shape]
    out_shape = tuple(-(-(lim - s) // st) for s, lim, st in zip(starts, limits, strides))
    ot = _tensor(out_shape, a.element)
    return [f"%out = stablehlo.slice {a.x} [" + ", ".join(
        f"{s}:{lim}:{st}" for s, lim, st in zip(starts, limits, strides))
        + f"] : ({a.t}) -> {ot}"], ot


def _pad_tail(rng, a: _Operand):
    low = [rng.randint(-1, 2) for _ in a.shape]
    high = [rng.randint(-1, 2) for _ in a.shape]
    interior = [rng.randint(0, 1) for _ in a.shape]
    out_shape = tuple(lo + hi + d + max(d - 1, 0) * it
                      for lo, hi, d, it in zip(low, high, a.shape, interior))
    if min(out_shape) < 0:
        return [], a.t
    ot = _tensor(out_shape, a.element)
    return [f"%pv = stablehlo.constant dense<{'1.0' if a.is_float else '1'}> : {a.scalar}",
            f"%out = stablehlo.pad {a.x}, %pv, low = {low}, high = {high}, "
            f"interior = {interior} : ({a.t}, {a.scalar}) -> {ot}"], ot


def _concatenate_tail(rng, a: _Operand):
    dim = rng.randrange(a.rank)
    out_shape = tuple(d * 2 if i == dim else d for i, d in enumerate(a.shape))
    ot = _tensor(out_shape, a.element)
    return [f"%out = stablehlo.concatenate {a.x}, %a0, dim = {dim} : ({a.t}, {a.t}) -> {ot}"], ot


def _start_constants(starts: list) -> tuple:
    """(the lines defining the start indices %s0, %s1, ..., their names, their types)."""
    consts = [f"%s{i} = stablehlo.constant dense<{s}> : tensor<i32>" for i, s in enumerate(starts)]
    return (consts, ", ".join(f"%s{i}" for i in range(len(starts))),
            ", ".join(["tensor<i32>"] * len(starts)))


def _dynamic_slice_tail(rng, a: _Operand, starts: list):
    consts, names, types = _start_constants(starts)
    sizes = [rng.randint(1, d) for d in a.shape]
    ot = _tensor(tuple(sizes), a.element)
    return consts + [f"%out = stablehlo.dynamic_slice {a.x}, {names}, sizes = {sizes} : "
                     f"({a.t}, {types}) -> {ot}"], ot


def _dynamic_update_slice_tail(rng, a: _Operand, starts: list):
    consts, names, types = _start_constants(starts)
    sizes = tuple(rng.randint(1, d) for d in a.shape)
    ut = _tensor(sizes, a.element)
    return consts + [f"%u = stablehlo.slice %a0 [" + ", ".join(f"0:{s}" for s in sizes)
                     + f"] : ({a.t}) -> {ut}",
                     f"%out = stablehlo.dynamic_update_slice {a.x}, %u, {names} : "
                     f"({a.t}, {ut}, {types}) -> {a.t}"], a.t


def _scatter_tail(rng, a: _Operand, starts: list):
    # rows of dim 0 from starts that may lie outside: each update element that falls
    # outside is dropped (a partly-inside window keeps its inside elements)
    t, scalar = a.t, a.scalar
    window = (rng.randint(1, a.shape[0]),) + a.shape[1:]
    n_updates = 2
    # XLA drops a window that is partly outside whole, the translation only its
    # outside elements (ops/indexing.py): starts that leave it wholly in or wholly
    # out, so that the two can be compared
    n, w = a.shape[0], window[0]
    fitting = [s for s in range(-w - 3, n + 4) if 0 <= s <= n - w or s + w <= 0 or s >= n]
    idx = [rng.choice(fitting) for _ in range(n_updates)]
    it = _tensor((n_updates, 1), "i32")
    ut = _tensor((n_updates,) + window, a.element)
    body = rng.choice(["add", "maximum", "replace"])
    ret = "%b" if body == "replace" else "%r"
    region = ([] if body == "replace" else
              [f"  %r = stablehlo.{body} %a, %b : {scalar}"])
    update_dims = list(range(1, len(window) + 1))
    return ([f"%idx = stablehlo.constant dense<{[[i] for i in idx]}> : {it}",
             f"%ub = stablehlo.slice %a0 [" + ", ".join(f"0:{w}" for w in window) +
             f"] : ({t}) -> {_tensor(window, a.element)}",
             f"%u = stablehlo.broadcast_in_dim %ub, dims = {update_dims} : "
             f"({_tensor(window, a.element)}) -> {ut}",
             f'%out = "stablehlo.scatter"({a.x}, %idx, %u) ({{',
             f"^bb0(%a: {scalar}, %b: {scalar}):"] + region +
            [f"  stablehlo.return {ret} : {scalar}",
             f"}}) {{scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = "
             f"{update_dims}, inserted_window_dims = [], scatter_dims_to_operand_dims = [0], "
             f"index_vector_dim = 1>, indices_are_sorted = false, unique_indices = false}} "
             f": ({t}, {it}, {ut}) -> {t}"], t)


def _gather_tail(rng, a: _Operand, starts: list):
    # windows of rows of dim 0; starts out of range are clamped so the window fits
    window = (rng.randint(1, a.shape[0]),) + a.shape[1:]
    idx = [rng.choice([-2147483648, -3, -1, 0, 1, 3, 9, 2147483647]) for _ in range(2)]
    it = _tensor((2, 1), "i32")
    ot = _tensor((2,) + window, a.element)
    offset_dims = list(range(1, len(window) + 1))
    sizes = ", ".join(str(w) for w in window)
    return ([f"%idx = stablehlo.constant dense<{[[i] for i in idx]}> : {it}",
             f'%out = "stablehlo.gather"({a.x}, %idx) {{dimension_numbers = '
             f"#stablehlo.gather<offset_dims = {offset_dims}, collapsed_slice_dims = [], "
             f"start_index_map = [0], index_vector_dim = 1>, slice_sizes = "
             f"array<i64: {sizes}>, indices_are_sorted = false}} : ({a.t}, {it}) -> {ot}"],
            ot)


def _dot_tail(rng, a: _Operand, starts: list):
    # contract the last dim with itself (x . x^T over the other dims' batch)
    last = a.rank - 1
    ot = _tensor(a.shape[:-1], a.element)
    batch = list(range(last))
    return ([f"%out = stablehlo.dot_general {a.x}, %a0, batching_dims = {batch} x {batch}, "
             f"contracting_dims = [{last}] x [{last}] : ({a.t}, {a.t}) -> {ot}"], ot)


# The last ops, in the order the kinds are drawn from: the first four for any operand, the
# rest for an operand of rank >= 1; the indexed ones get the start indices drawn for them.
_SHAPED_TAILS = {"none": _no_tail, "reduce": _reduce_tail, "while": _while_tail,
                 "broadcast": _broadcast_tail, "transpose": _transpose_tail,
                 "reverse": _reverse_tail, "slice": _slice_tail, "pad": _pad_tail,
                 "concatenate": _concatenate_tail}
_ANY_RANK_TAILS = ["none", "reduce", "while", "broadcast"]
_INDEXED_TAILS = {"dynamic_slice": _dynamic_slice_tail,
                  "dynamic_update_slice": _dynamic_update_slice_tail,
                  "scatter": _scatter_tail, "gather": _gather_tail, "dot": _dot_tail}


# ---------------------------------------------------------------- running one

_SMALL = 64  # elements: the reference interpreter evaluates element by element


def _outputs_mismatch(a: list, b: list) -> Optional[str]:
    """How two backends' outputs for one program differ (`reference_mismatch` on each), or None."""
    if len(a) != len(b):
        return f"{len(a)} outputs vs {len(b)}"
    for k, (x, y) in enumerate(zip(a, b)):
        x, y = np.asarray(x), np.asarray(y)
        if x.dtype != y.dtype or x.shape != y.shape:
            return f"output {k}: {x.dtype}{list(x.shape)} vs {y.dtype}{list(y.shape)}"
        problem = reference_mismatch(x, y)
        if problem:
            return f"output {k}: {problem}"
    return None


# One reference-interpreter child per fuzzing process, for all its programs.
_INTERPRETER = None


def _run_backends(text: str, inputs: list, interpreter: bool, xla_direct: bool = True,
                  options: Optional[LoadOptions] = None) -> dict:
    """{backend: outputs or ("unavailable", why)}; other exceptions propagate."""
    global _INTERPRETER
    program = load(text, options)
    backends = [TranslatedBackend("cpu")] + ([XlaDirectBackend()] if xla_direct else [])
    if interpreter:
        if _INTERPRETER is None:
            _INTERPRETER = InterpreterServer()
        backends.append(InterpreterBackend(timeout=120, server=_INTERPRETER))
    out = {}
    for backend in backends:
        try:
            out[backend.name] = [np.asarray(o) for o in backend.run(program, "main", inputs)]
        except BackendUnavailable as e:
            out[backend.name] = ("unavailable", str(e))
    return out


def _mismatch(results: dict) -> Optional[str]:
    got = results["cpu"]
    for name, other in results.items():
        if name == "cpu" or isinstance(other, tuple):
            continue
        problem = _outputs_mismatch(got, other)
        if problem:
            return f"translation vs {name}: {problem}"
    return None


def check(seed: int, xla_direct: bool = True, options: Optional[LoadOptions] = None) -> dict:
    """Generates program `seed`, loads it with `options` (default: `LoadOptions()`), runs it on
    every backend, compares: what happened."""
    program = generate(seed)
    size = max(int(np.prod(program.shape)) if program.shape else 1, 1)
    interpreter = size * (len(program.chain) + 2) <= _SMALL
    results = _run_backends(program.text(), program.inputs, interpreter, xla_direct, options)
    problem = _mismatch(results)
    out = {"seed": seed, "backends": sorted(k for k, v in results.items()
                                            if not isinstance(v, tuple)),
           "mismatch": problem, "flushed": None}
    interpreted = results.get("interpreter")
    if problem and _explained_by_flushing(program, results, options):
        out["mismatch"], out["flushed"] = None, problem
    elif (problem and interpreted is not None and not isinstance(interpreted, tuple)
          and _outputs_mismatch(results["cpu"], interpreted) is None):
        # The translation agrees with the reference interpreter (the spec's oracle) and XLA
        # compiling the module alone differs: XLA's behaviour, reported apart with evidence.
        out["mismatch"], out["xla_differs"] = None, problem
    elif problem:
        out["minimal"] = _minimise(program, interpreter, options) or program.text()
        # Evidence for the report: where the translation gives what XLA compiling the module
        # itself gives and only the interpreter differs, the difference is XLA's numerics.
        direct = results.get("xla-direct")
        out["same_as_xla_direct"] = (not isinstance(direct, tuple) and direct is not None
                                     and _outputs_mismatch(results["cpu"], direct) is None)
    return out


def _flush_subnormals(x: np.ndarray) -> np.ndarray:
    if x.dtype.kind != "f" and "bfloat16" not in str(x.dtype):
        return x
    tiny = float(ml_dtypes.finfo(x.dtype).tiny)
    wide = x.astype(np.float64)
    return np.where(np.abs(wide) < tiny, np.copysign(0.0, wide), wide).astype(x.dtype)


def _explained_by_flushing(program: GeneratedProgram, results: dict,
                           options: Optional[LoadOptions] = None) -> bool:
    """XLA on CPU flushes subnormal floats to zero (inputs and results of float ops); the
    reference interpreter keeps them. With subnormals in the inputs, the difference is
    XLA's flushing, not the translation's, and is reported apart, not as a mismatch, when
    either the translation and XLA agree, the interpreter alone differs and the interpreter
    run on the inputs with their subnormals flushed agrees with the translation; or the
    translation agrees with the interpreter and XLA alone differs."""
    if isinstance(results.get("interpreter"), tuple) or "interpreter" not in results:
        return False
    flushed = [_flush_subnormals(x) for x in program.inputs]
    # (bytes compared: -0.0 == 0.0 as values; a 0-d array has no uint8 view)
    if all(a.tobytes() == b.tobytes() for a, b in zip(flushed, program.inputs)):
        return False
    if _outputs_mismatch(results["cpu"], results["xla-direct"]) is not None:
        # XLA alone differs while the translation agrees with the interpreter: where XLA
        # fuses ops it flushes subnormals the translation's separate ops keep
        return _outputs_mismatch(results["cpu"], results["interpreter"]) is None
    again = InterpreterBackend(timeout=120).run(load(program.text(), options), "main", flushed)
    return _outputs_mismatch(results["cpu"], [np.asarray(o) for o in again]) is None


def _minimise(program: GeneratedProgram, interpreter: bool,
              options: Optional[LoadOptions] = None) -> Optional[str]:
    """The shortest prefix of the chain (no tail) that still mismatches, as module text."""
    for length in range(1, len(program.chain) + 1):
        text = program.text(length)
        try:
            if _mismatch(_run_backends(text, program.inputs, interpreter, options=options)):
                return text
        except Exception:  # noqa: BLE001 - the full program is reported regardless
            return None
    return None


# ---------------------------------------------------------------- a run over many

def check_in_worker(item: tuple) -> dict:
    """`check(seed, xla_direct, options)` of `item`, as `run`'s worker processes call it.
    Without XLA compiling the module directly (the translation and the interpreter only):
    run again when a program killed its worker, to tell XLA's crash from the translation's."""
    seed, xla_direct, options = item
    return check(seed, xla_direct, options)


class Report(NamedTuple):
    count: int
    mismatches: list   # [{seed, mismatch, minimal}]
    crashes: list      # [{seed, status, detail}]
    flushed: list      # [{seed, flushed}]: the interpreter alone differs, by XLA's flushing
    interpreted: int   # programs the reference interpreter also ran
    seconds: float
    # [{seed, detail}]: XLA compiling the module directly killed the process, and the
    # translation ran (and agreed with the interpreter, where it ran) in a new one
    xla_crashes: list = []
    # [{seed, xla_differs}]: the translation agrees with the interpreter, XLA alone differs
    xla_differs: list = []

    def summary(self) -> str:
        return (f"fuzz: {self.count} programs, {len(self.mismatches)} mismatches, "
                f"{len(self.crashes)} crashes")


def run(seeds: list, jobs: int = 2, timeout: float = 300.0,
        options: Optional[LoadOptions] = None, progress: bool = False) -> Report:
    """`check` of every seed in worker processes, each program loaded with `options`;
    `progress`: a progress bar on a terminal (shlo2jax.tools.progress)."""
    start = time.time()
    mismatches, crashes, flushed, interpreted, xla_differs = [], [], [], 0, []
    for index, status, value in run_isolated("shlo2jax.tools.fuzz:check_in_worker",
                                             [(seed, True, options) for seed in seeds],
                                             jobs=jobs, timeout=timeout,
                                             progress="fuzz" if progress else None):
        if status != "ok":
            crashes.append({"seed": seeds[index], "status": status, "detail": str(value)[-3000:]})
        else:
            interpreted += "interpreter" in value["backends"]
            if value["mismatch"]:
                mismatches.append(value)
            if value["flushed"]:
                flushed.append(value)
            if value.get("xla_differs"):
                xla_differs.append(value)
    xla_crashes = []
    died = [c for c in crashes if c["status"] == "crashed"]
    if died:
        again = run_isolated("shlo2jax.tools.fuzz:check_in_worker",
                             [(c["seed"], False, options) for c in died], jobs=jobs,
                             timeout=timeout)
        for index, status, value in again:
            if status == "ok" and not value["mismatch"]:
                crash = died[index]
                crashes.remove(crash)
                xla_crashes.append({"seed": crash["seed"], "detail": (
                    f"{crash['detail']} with XLA compiling the module directly; without it "
                    f"the program ran ({' and '.join(value['backends'])}) with no mismatch")})
    mismatches.sort(key=lambda m: m["seed"])
    crashes.sort(key=lambda c: c["seed"])
    xla_crashes.sort(key=lambda c: c["seed"])
    flushed.sort(key=lambda m: m["seed"])
    return Report(len(seeds), mismatches, crashes, flushed, interpreted, time.time() - start,
                  xla_crashes, sorted(xla_differs, key=lambda m: m["seed"]))


def _parser() -> exits.Parser:
    parser = exits.Parser(prog="shlo2jax fuzz", description=main.__doc__)
    parser.add_argument("--count", type=non_negative_int, default=100,
                        help="programs (default: %(default)s)")
    parser.add_argument("--seed", type=non_negative_int, default=0,
                        help="programs SEED .. SEED+COUNT-1 (default: %(default)s)")
    parser.add_argument("-j", "--jobs", type=positive_int, default=2,
                        help="worker processes (default: %(default)s)")
    parser.add_argument("--json", help="write the report to this file")
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="no progress bar (there is none where stderr is not a terminal)")
    parser.add_argument("--cases", default="fuzz-cases",
                        help="folder for a mismatch's minimised regression case "
                             "(default: %(default)s)")
    # (--seed picks the programs: the seed of placeholder data is --placeholder-seed)
    add_option_flags(parser, names={"seed": "--placeholder-seed"})
    return parser


def main(argv=None) -> int:
    """`shlo2jax fuzz`: random programs, translation vs XLA vs the reference interpreter."""
    args = _parser().parse_args(argv)
    report = run(list(range(args.seed, args.seed + args.count)), jobs=args.jobs,
                 options=options_from(args), progress=not args.quiet)
    for m in report.mismatches:
        os.makedirs(args.cases, exist_ok=True)
        path = os.path.join(args.cases, f"fuzz_{m['seed']}.mlir")
        with open(path, "w") as f:
            f.write(f"// {m['mismatch']}\n" + "\n".join(
                "// input: " + np.array2string(x, threshold=64).replace("\n", " ")
                for x in generate(m["seed"]).inputs) + "\n" + m["minimal"])
        same = " (the translation = XLA compiling the module directly)" \
            if m.get("same_as_xla_direct") else ""
        print(f"mismatch: seed {m['seed']}: {m['mismatch']}{same} (written to {path})")
    for c in report.crashes:
        lines = c["detail"].strip().splitlines()
        print(f"crash: seed {c['seed']} ({c['status']}): {lines[-1] if lines else ''}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"seed": args.seed, "count": report.count, "seconds": report.seconds,
                       "interpreted": report.interpreted, "mismatches": report.mismatches,
                       "crashes": report.crashes, "flushed": report.flushed,
                       "xla_crashes": report.xla_crashes, "xla_differs": report.xla_differs},
                      f, indent=2)
    for m in report.flushed:
        print(f"flushed: seed {m['seed']}: XLA flushes subnormals, the interpreter keeps "
              f"them ({m['flushed'][:160]})")
    for c in report.xla_crashes:
        print(f"XLA crash: seed {c['seed']}: {c['detail']}")
    for m in report.xla_differs:
        print(f"XLA differs: seed {m['seed']}: the translation agrees with the reference "
              f"interpreter, XLA compiling the module does not ({m['xla_differs'][:160]})")
    print(f"{report.seconds:.0f} s; {report.interpreted} also on the reference interpreter, "
          f"{len(report.flushed)} differing from it only by XLA's subnormal flushing")
    print(report.summary())
    return 1 if report.mismatches or report.crashes else 0
