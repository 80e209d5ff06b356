"""`Program` and `Function`: the user-facing callables."""

from __future__ import annotations


from typing import Optional

import jax
import numpy as np

from shlo2jax import types as T
from shlo2jax.module import FunctionDef, ModuleDef
from shlo2jax.translate import Token, Translator


def _aval(ttype):
    if isinstance(ttype, T.TensorType):
        shape = tuple(-1 if d is None else d for d in ttype.shape) if not ttype.is_static \
            else ttype.shape
        return jax.ShapeDtypeStruct(shape, ttype.dtype) if ttype.is_static else ttype
    return ttype


class Function:
    """One function of a program, callable like a JAX function.

    64-bit types work without the user enabling `jax_enable_x64`: calls run
    with x64 enabled inside the library. Arguments are never converted: a wrong
    count, shape or dtype raises `TypeError`.
    """

    def __init__(self, program: "Program", fdef: FunctionDef):
        self.program = program
        self.definition = fdef
        self.name = fdef.name
        self.input_types: tuple = fdef.input_types
        self.output_types: tuple = fdef.output_types
        self._jitted = None
        # `?` dimensions in the signature: each call specialises the module to its shapes.
        self._dynamic = any(isinstance(t, T.TensorType) and not t.is_static
                            for t in self.input_types + self.output_types)

    @property
    def in_avals(self) -> tuple:
        """Inputs as `jax.ShapeDtypeStruct`s (a TensorType where a dimension is dynamic)."""
        return tuple(_aval(t) for t in self.input_types)

    @property
    def out_avals(self) -> tuple:
        return tuple(_aval(t) for t in self.output_types)

    @property
    def signature(self) -> str:
        ins = ", ".join(f"%arg{i}: {t}" for i, t in enumerate(self.input_types))
        outs = ", ".join(str(t) for t in self.output_types)
        return f"@{self.name}({ins}) -> ({outs})"

    def __repr__(self):
        return f"<shlo2jax.Function {self.signature}>"

    def check_arguments(self, args) -> None:
        if len(args) != len(self.input_types):
            raise TypeError(f"{self.signature} takes {len(self.input_types)} argument(s), "
                            f"got {len(args)}")
        for i, (arg, expected) in enumerate(zip(args, self.input_types)):
            if isinstance(expected, T.TokenType):
                if not isinstance(arg, Token):
                    raise TypeError(f"argument %arg{i} of @{self.name} must be a token "
                                    "(shlo2jax.TOKEN), got {type(arg).__name__}")
                continue
            if isinstance(expected, T.TupleType):
                continue
            if expected.quant is not None:
                from shlo2jax.quant import check_quantized_argument
                check_quantized_argument(self, i, arg, expected)
                continue
            shape, dtype = getattr(arg, "shape", None), getattr(arg, "dtype", None)
            if shape is None or dtype is None or isinstance(arg, (bool, int, float, complex)):
                raise TypeError(
                    f"argument %arg{i} of @{self.name} must be an array of type {expected}, got "
                    f"{type(arg).__name__} (pass a numpy/jax array; values are never converted)")
            if np.dtype(dtype) != expected.dtype:
                raise TypeError(f"argument %arg{i} of @{self.name} has dtype {np.dtype(dtype)}, "
                                f"expected {expected} ({expected.dtype})")
            if len(shape) != len(expected.shape) or any(
                    d is not None and d != s for d, s in zip(expected.shape, shape)):
                raise TypeError(f"argument %arg{i} of @{self.name} has shape {tuple(shape)}, "
                                f"expected {expected}")

    def _traceable(self):
        if self._jitted is None:
            translator = self.program.translator
            body = translator.function_body(self.definition)
            if any(isinstance(t, T.TensorType) and t.quant is not None for t in self.input_types):
                from shlo2jax.quant import coerce_argument
                types, plain_body = self.input_types, body

                def body(*args):  # raw storage integers become quantized values
                    return plain_body(*(coerce_argument(a, t) for a, t in zip(args, types)))
            self._jitted = jax.jit(body)
        return self._jitted

    def __call__(self, *args):
        self.check_arguments(args)
        if self._dynamic:
            from shlo2jax.dynamic import call_dynamic
            return call_dynamic(self, args)
        with jax.enable_x64(True):
            outs = self._traceable()(*args)
        return outs[0] if len(outs) == 1 else tuple(outs)


class Program:
    """A loaded StableHLO module. Calling it calls its entry function."""

    def __init__(self, module: ModuleDef, mlir_module=None, source_name: str = "",
                 load_options: Optional[dict] = None):
        self.module = module
        self.load_options = dict(load_options or {})  # to decode refined copies the same way
        self.mlir_module = mlir_module  # the verified ir.Module (for the interpreter / XLA)
        self.source_name = source_name
        self.translator = Translator(module)
        self.functions: dict[str, Function] = {
            name: Function(self, fdef) for name, fdef in module.functions.items() if fdef.public}

    @property
    def entry(self) -> Function:
        if "main" in self.functions:
            return self.functions["main"]
        if len(self.functions) == 1:
            return next(iter(self.functions.values()))
        raise ValueError("the program has no @main and several public functions "
                         f"({', '.join(self.functions)}); pick one with program[name]")

    def __getitem__(self, name: str) -> Function:
        try:
            return self.functions[name]
        except KeyError:
            raise KeyError(f"no public function @{name}; public functions: "
                           f"{', '.join(self.functions)}") from None

    def __call__(self, *args):
        return self.entry(*args)

    @property
    def num_replicas(self) -> int:
        return int(self.module.attrs.get("mhlo.num_replicas", 1))

    @property
    def num_partitions(self) -> int:
        return int(self.module.attrs.get("mhlo.num_partitions", 1))

    def op_histogram(self) -> dict:
        return self.module.op_histogram()

    def __repr__(self):
        name = self.module.name or self.source_name or "module"
        return f"<shlo2jax.Program {name}: {', '.join(f.signature for f in self.functions.values())}>"
