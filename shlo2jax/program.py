"""`Program` and `Function`: the user-facing callables."""

from __future__ import annotations


from typing import Optional

import jax
import numpy as np

from shlo2jax import types as T
from shlo2jax.module import FunctionDef, ModuleDef, decode_module
from shlo2jax.translate import Token, Translator, TranslatorMode


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

    A sharded program (mhlo.num_replicas * mhlo.num_partitions > 1) runs under
    `jax.jit` on `mesh` with `in_shardings` / `out_shardings` (the declared
    `mhlo.sharding` / `sdy.sharding`s as `NamedSharding`s) when jax has that many
    devices; its results are arrays with those shardings. With fewer devices, a
    program whose shardings are only annotations runs on one device, and one with
    manual (shard_map) regions raises. See shlo2jax/sharding.py.
    """

    def __init__(self, program: "Program", fdef: FunctionDef):
        self.program = program
        self.definition = fdef
        self.name = fdef.name
        self.input_types: tuple = fdef.input_types
        self.output_types: tuple = fdef.output_types
        self._jitted = None
        self._sharded = None
        # jax cannot hold f6 arrays: ml_dtypes float6 arguments travel as F6Arrays.
        self._f6_inputs = any(isinstance(t, T.TensorType) and type(t.quant) is T.Float6Type
                              for t in self.input_types)
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

    # -- sharded programs

    @property
    def is_sharded(self) -> bool:
        """Whether the program is partitioned over several devices
        (mhlo.num_replicas * mhlo.num_partitions > 1)."""
        return self.program.sharding.num_devices > 1

    @property
    def mesh(self):
        """The `jax.sharding.Mesh` the program runs on (its `sdy.mesh`, or for GSPMD
        shardings a mesh over the first num_partitions devices whose axes express
        them); None for a one-device program."""
        return self.program.sharding.mesh if self.is_sharded else None

    def _named(self, attrs, types) -> tuple:
        from shlo2jax.sharding_attributes import value_sharding_or_none
        sc = self.program.sharding
        out = []
        for a, t in zip(attrs, types):
            rank = len(t.shape) if isinstance(t, T.TensorType) else None
            out.append(None if rank is None else sc.named(value_sharding_or_none(a), rank))
        return tuple(out)

    @property
    def in_shardings(self) -> tuple:
        """The declared sharding of each argument as a `NamedSharding` on `mesh` (None
        where the program leaves it open); all None for a one-device program."""
        if not self.is_sharded:
            return (None,) * len(self.input_types)
        return self._named(self.definition.arg_attrs, self.input_types)

    @property
    def out_shardings(self) -> tuple:
        if not self.is_sharded:
            return (None,) * len(self.output_types)
        return self._named(self.definition.result_attrs, self.output_types)

    def _sharded_traceable(self):
        if self._sharded is None:
            translator = Translator(self.program.module,
                                    TranslatorMode(sharding=self.program.sharding))
            body = translator.function_body(self.definition)
            self._sharded = jax.jit(body, in_shardings=self.in_shardings,
                                    out_shardings=self.out_shardings)
        return self._sharded

    def _runs_sharded(self) -> bool:
        if not self.is_sharded:
            return False
        if len(jax.devices()) >= self.program.sharding.num_devices:
            return True
        if self.program.has_manual_regions:
            self.program.sharding.mesh  # raises: too few devices
        return False  # annotations only: the same values on one device

    def __call__(self, *args):
        self.check_arguments(args)
        if self._f6_inputs:
            from shlo2jax.quant import coerce_argument
            args = tuple(coerce_argument(a, t) if isinstance(t, T.TensorType) else a
                         for a, t in zip(args, self.input_types))
        if not self._dynamic and self._runs_sharded():
            placed = [a if s is None else jax.device_put(a, s)
                      for a, s in zip(args, self.in_shardings)]
            with jax.enable_x64(True):
                outs = self._sharded_traceable()(*placed)
            return outs[0] if len(outs) == 1 else tuple(outs)
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
        from shlo2jax import sharding
        problems = sharding.rewrite_manual_regions(module)
        if problems:
            from shlo2jax.errors import UnsupportedError
            raise UnsupportedError(problems)
        self.translator = Translator(module)
        self.sharding = sharding.ShardingContext(module, mlir_module)
        self.has_manual_regions = any(
            op.name == "sdy.manual_computation" for op in module.ops) or any(
            op.name == sharding.MANUAL_REGION for f in module.functions.values()
            for op in f.body.ops)
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

    def refined(self, mlir_module) -> "Program":
        """The program of a refined copy of this program's module (shlo2jax.dynamic: `?`
        dimensions specialised), decoded with the options this one was loaded with."""
        options = self.load_options
        decoded = decode_module(mlir_module, source_name=self.source_name,
                                placeholder_data=options.get("placeholder_data", False),
                                seed=options.get("seed", 0), strict=True)
        return Program(decoded, mlir_module, self.source_name)

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
