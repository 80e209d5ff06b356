"""`Program` and `Function`: the user-facing callables."""

from __future__ import annotations

import functools
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np

from shlo2jax import types as T
from shlo2jax._jax_internals import custom_linear
from shlo2jax.module import FunctionDef, ModuleDef, decode_module
from shlo2jax.translate import TOKEN, Token, Translator, TranslatorMode


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
        self._definition = fdef  # its signature; its body too once the program is decoded
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
    def definition(self) -> FunctionDef:
        """The decoded function (decoding the program on first use, see `Program.module`)."""
        if self._definition.body is None:
            self._definition = self.program.module.functions[self.name]
        return self._definition

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

    @functools.cached_property
    def arg_names(self) -> tuple:
        """Each argument's name as the module gives it (shlo2jax.names: jax's argument paths,
        `tf_saved_model.index_path`, ...), else `arg_<i>`; unique. A call takes them as
        keyword arguments."""
        from shlo2jax import names
        return names.with_fallback(names.module_argument_names(self.program, self._definition),
                                   "arg")

    @functools.cached_property
    def result_names(self) -> tuple:
        """Each result's name (`jax.result_info`, ...), else `result_<i>`; unique."""
        from shlo2jax import names
        return names.with_fallback(names.module_result_names(self.program, self._definition),
                                   "result")

    @functools.cached_property
    def _arity(self) -> int:
        return len(self.in_avals)

    def bind_keywords(self, args: tuple, kwargs: dict) -> tuple:
        """The positional arguments, completed by keyword arguments named by `arg_names`
        (too few positional arguments: an error naming the missing ones)."""
        if not kwargs and len(args) >= self._arity:
            return args
        from shlo2jax import names
        return names.bind_keywords(self.arg_names, args, kwargs, self.signature)

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

    @functools.cached_property
    def lowering(self) -> str:
        """"direct" when calls and jit lower this function to the module's own ops
        (`load(..., lowering="direct")`, where `shlo2jax.direct` allows it), else "translate"."""
        return "translate" if self.lowering_note else "direct"

    @functools.cached_property
    def lowering_note(self) -> Optional[str]:
        """Why this function is translated when the direct lowering was asked for; None when
        it lowers directly; "not asked for" by default."""
        if self.program.load_options.get("lowering", "translate") != "direct":
            return "not asked for"
        from shlo2jax.direct import why_not_direct
        return why_not_direct(self.program, self)

    def _translated_body(self):
        return self.program.translator.function_body(self.definition)

    def _traceable(self):
        if self._jitted is None:
            if self.lowering == "direct":
                from shlo2jax.direct import direct_body
                body = direct_body(self, self._translated_body)
            else:
                body = self._translated_body()
            self._jitted = jax.jit(self.taking_storage_integers(body))
        return self._jitted

    def taking_storage_integers(self, body):
        """`body` (of this function's arguments), taking quantized arguments as their raw
        storage integers too."""
        if not any(isinstance(t, T.TensorType) and t.quant is not None for t in self.input_types):
            return body
        from shlo2jax.quant import coerce_argument
        types = self.input_types

        def coerced(*args):  # raw storage integers become quantized values
            return body(*(coerce_argument(a, t) for a, t in zip(args, types)))
        return coerced

    def coerce_f6(self, args) -> tuple:
        """ml_dtypes float6 arguments as F6Arrays (jax cannot hold f6); the others as given."""
        if not self._f6_inputs:
            return args
        from shlo2jax.quant import coerce_argument
        return tuple(coerce_argument(a, t) if isinstance(t, T.TensorType) else a
                     for a, t in zip(args, self.input_types))

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
        return self._named(self._definition.arg_attrs, self.input_types)

    @property
    def out_shardings(self) -> tuple:
        if not self.is_sharded:
            return (None,) * len(self.output_types)
        return self._named(self._definition.result_attrs, self.output_types)

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

    def __call__(self, *args, **kwargs):
        return self._call_positional(*self.bind_keywords(args, kwargs))

    def _call_positional(self, *args):
        self.check_arguments(args)
        args = self.coerce_f6(args)
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
                 load_options: Optional[dict] = None, decode=None, direct_scan=None):
        """`module` decoded; or, with `decode` (a thunk that decodes it), only its functions'
        signatures (shlo2jax.module.decode_signatures): the ops are decoded on first use of
        `module` (see shlo2jax.direct). `direct_scan`: the loader's `direct.scan` of the
        module, when it made one."""
        self._module = module
        self._decode = decode
        self.load_options = dict(load_options or {})  # to decode refined copies the same way
        self._mlir_module = mlir_module
        self._outline = None  # a shlo2jax.outline.ModuleOutline once the module is let go
        self._direct_scan = direct_scan
        self.source_name = source_name
        from shlo2jax import sharding
        if decode is None:
            self._rewrite_manual_regions(module)
        # (a program decoded later is one that lowers directly: one device, no shardings)
        self.sharding = sharding.ShardingContext(module, mlir_module)
        self.functions: dict[str, Function] = {
            name: Function(self, fdef) for name, fdef in module.functions.items() if fdef.public}
        self._exported = None

    @staticmethod
    def _rewrite_manual_regions(module) -> None:
        from shlo2jax import sharding
        problems = sharding.rewrite_manual_regions(module)
        if problems:
            from shlo2jax.errors import UnsupportedError
            raise UnsupportedError(problems)

    @property
    def module(self) -> ModuleDef:
        """The decoded module: every op as a record the translation runs. A program loaded to
        lower directly decodes it here, on first use (an `UnsupportedError` then lists what
        it cannot translate, at each use until it can)."""
        if self._decode is not None:
            module = self._decode()
            self._rewrite_manual_regions(module)
            from shlo2jax import sharding
            self._module, self._decode = module, None
            self.sharding = sharding.ShardingContext(module, self._mlir_module)
            self.release_mlir_module()
        return self._module

    @property
    def decoded(self) -> bool:
        """Whether the ops are decoded (see `module`)."""
        return self._decode is None

    @functools.cached_property
    def translator(self) -> Translator:
        return Translator(self.module)

    @functools.cached_property
    def has_manual_regions(self) -> bool:
        from shlo2jax import sharding
        module = self.module
        return any(op.name == "sdy.manual_computation" for op in module.ops) or any(
            op.name == sharding.MANUAL_REGION for f in module.functions.values()
            for op in f.body.ops)

    @property
    def direct_scan(self):
        """What `shlo2jax.direct.scan` finds in the module (made on first use, unless the
        loader made it)."""
        if self._direct_scan is None:
            from shlo2jax.direct import scan
            self._direct_scan = scan(self.mlir_module, self.source_name)
        return self._direct_scan

    @property
    def mlir_module(self):
        """The verified `ir.Module` the program was decoded from (for the reference interpreter,
        XLA, shape refinement). A program that let it go after decoding (it holds large
        constants: see shlo2jax.outline) rebuilds it in a fresh context on each access: a copy
        of its weights, held while the caller holds the module."""
        if self._outline is not None:
            return self._outline.module()
        return self._mlir_module

    @property
    def released_mlir_module(self) -> bool:
        """Whether the program let its MLIR module and context go after decoding (see
        `mlir_module`)."""
        return self._outline is not None

    def release_mlir_module(self) -> bool:
        """Large constants are held once, decoded: when the program's add up to
        `outline.RELEASE_BYTES`, the MLIR module and its context (which holds their data until
        it goes) are let go, and an outline of the module kept (shlo2jax.outline). No decoded
        record refers to an MLIR object after it: every op's location is formatted. Whether
        the module was let go. (The loader calls it, once the program is made.)"""
        from shlo2jax import outline
        large_constants, self.module.large_constants = self.module.large_constants, []
        if self._mlir_module is None or \
                outline.outlined_bytes(large_constants) < outline.RELEASE_BYTES:
            return False
        for op in self.module.ops:
            op.location  # noqa: B018 - formats it: an ir.Location holds the context
        kept = outline.outline(self._mlir_module, large_constants)
        if kept is None:
            return False
        self._outline, self._mlir_module = kept, None
        return True

    @property
    def exported(self):
        """The `jax.export.Exported` the program was loaded from, if any. One the loader made
        from serialized bytes does not keep its module bytes once the program let its module
        go (see `mlir_module`): it is rebuilt here, the module serialized again, on each
        access."""
        exported = self._exported
        if exported is not None and not exported.mlir_module_serialized:
            from shlo2jax._jax_internals import with_serialized_module
            return with_serialized_module(exported, self.mlir_module)
        return exported

    def set_exported(self, exported, load_vjp) -> None:
        """The program came from a `jax.export.Exported`: its entry function takes the
        exported function's arguments (see ExportedFunction). `load_vjp()` loads the
        producer's VJP (an `Exported` of its own) the way this program was loaded. An
        `Exported` with empty module bytes stands for one whose module is this program's
        (see `exported`)."""
        self._exported = exported
        main = self._module.functions.get("main")
        if main is not None and main.public:
            self.functions["main"] = ExportedFunction(self, main, exported, load_vjp)

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
        decoded.translation_options = self.module.translation_options
        program = Program(decoded, mlir_module, self.source_name, options)
        program.release_mlir_module()
        return program

    @property
    def num_replicas(self) -> int:
        return int(self._module.attrs.get("mhlo.num_replicas", 1))

    @property
    def num_partitions(self) -> int:
        return int(self._module.attrs.get("mhlo.num_partitions", 1))

    def op_histogram(self) -> dict:
        return self.module.op_histogram()

    def __repr__(self):
        name = self._module.name or self.source_name or "module"
        return f"<shlo2jax.Program {name}: {', '.join(f.signature for f in self.functions.values())}>"


class ExportedFunction(Function):
    """The entry function of a `jax.export.Exported`, called like `exported.call`: with the
    exported function's flat arguments (`exported.in_avals`), returning its flat results.

    The serialized module's own `@main` differs: jax drops arguments the function does not
    use (`module_kept_var_idx`), a multi-platform export takes a leading platform index, and
    ordered effects thread tokens. This adapter supplies them: the platform index is the
    current backend's platform when the export lists it, else the first platform the export
    lists (the translation runs that platform's code here, custom calls included).

    When the artifact carries its producer's VJP (`serialize(vjp_order >= 1)`, or an
    `Exported` made in this process) and the program was loaded with `producer_vjp=True`,
    reverse mode uses that VJP; forward mode and vmap use the translation.
    """

    def __init__(self, program: "Program", fdef: FunctionDef, exported, load_vjp):
        super().__init__(program, fdef)
        self._exported = exported  # (its module bytes may be dropped: see Program.exported)
        self._load_vjp = load_vjp
        self._kept = tuple(exported.module_kept_var_idx)
        module_inputs = list(fdef.input_types)
        self._platform_index = None
        if fdef.arg_attrs and fdef.arg_attrs[0].get("jax.global_constant") == "_platform_index":
            module_inputs.pop(0)
            platforms = tuple(exported.platforms)
            here = jax.default_backend()
            self._platform_index = np.int32(platforms.index(here) if here in platforms else 0)
        self._tokens = 0
        while self._tokens < len(module_inputs) and isinstance(module_inputs[self._tokens],
                                                               T.TokenType):
            self._tokens += 1
        self._result_tokens = 0
        while self._result_tokens < len(fdef.output_types) and isinstance(
                fdef.output_types[self._result_tokens], T.TokenType):
            self._result_tokens += 1
        declared = tuple(exported.out_avals)
        returned = tuple(fdef.output_types[self._result_tokens:])
        if len(returned) != len(declared) or not all(
                _returns_aval(t, a) for t, a in zip(returned, declared)):
            from shlo2jax.errors import LoadError
            raise LoadError(
                f"jax.export artifact {exported.fun_name}: @main returns "
                f"({', '.join(map(str, returned))}) but the export declares "
                f"({', '.join(a.str_short() for a in declared)})")
        if len(module_inputs) - self._tokens != len(self._kept):
            from shlo2jax.errors import LoadError
            raise LoadError(
                f"jax.export artifact {exported.fun_name}: @main takes {len(module_inputs)} "
                f"arguments after the platform index, but the export keeps {len(self._kept)} of "
                f"its {len(exported.in_avals)} arguments and {self._tokens} tokens")
        self._vjp_function = None
        self._with_vjp = None

    @property
    def exported(self):
        """The `jax.export.Exported` (see `Program.exported`)."""
        return self.program.exported

    @property
    def in_avals(self) -> tuple:
        return tuple(jax.ShapeDtypeStruct(a.shape, a.dtype) for a in self._exported.in_avals)

    @property
    def out_avals(self) -> tuple:
        return tuple(jax.ShapeDtypeStruct(a.shape, a.dtype) for a in self._exported.out_avals)

    @property
    def signature(self) -> str:
        ins = ", ".join(f"%arg{i}: {a.str_short()}" for i, a in enumerate(self._exported.in_avals))
        outs = ", ".join(a.str_short() for a in self._exported.out_avals)
        return f"@{self.name}({ins}) -> ({outs})  [jax.export {self._exported.fun_name}]"

    @property
    def uses_producer_vjp(self) -> bool:
        """Whether reverse mode uses the VJP the artifact ships (see the class docstring)."""
        return bool(self.program.load_options.get("producer_vjp", True)) and \
            self._exported.has_vjp()

    def module_arguments(self, args) -> tuple:
        """The exported function's arguments as the module's @main takes them."""
        if len(args) != len(self._exported.in_avals):
            raise TypeError(f"{self.signature} takes {len(self._exported.in_avals)} argument(s), "
                            f"got {len(args)}")
        head = () if self._platform_index is None else (self._platform_index,)
        return head + (TOKEN,) * self._tokens + tuple(args[i] for i in self._kept)

    def _call_module(self, *args):
        outs = Function._call_positional(self, *self.module_arguments(args))
        outs = outs if isinstance(outs, tuple) and len(self.output_types) > 1 else (outs,)
        return tuple(outs[self._result_tokens:])

    @functools.cached_property
    def arg_names(self) -> tuple:
        """The names of the exported function's flat arguments (see Function.arg_names; for
        arguments jax dropped as unused, their `in_tree` path)."""
        from shlo2jax import names
        module_names = names.module_argument_names(self.program, self._definition)
        skip = (self._platform_index is not None) + self._tokens
        return names.with_fallback(
            names.exported_argument_names(self._exported, module_names[skip:]), "arg")

    @functools.cached_property
    def result_names(self) -> tuple:
        from shlo2jax import names
        module_names = names.module_result_names(self.program, self._definition)
        return names.with_fallback(module_names[self._result_tokens:], "result")

    def __call__(self, *args, **kwargs):
        args = self.bind_keywords(args, kwargs)
        if self.uses_producer_vjp:
            if self._with_vjp is None:
                self._with_vjp = self._producer_vjp_call()
            outs = self._with_vjp(*args)
        else:
            outs = self._call_module(*args)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def producer_vjp_function(self) -> "ExportedFunction":
        """The producer's VJP, translated: takes (*primals, *output cotangents), returns the
        cotangents of the primals (float0 placeholders for integer ones)."""
        if self._vjp_function is None:
            self._vjp_function = self._load_vjp().entry
        return self._vjp_function

    def _producer_vjp_call(self):

        call = jax.custom_jvp(self._call_module)
        n_in = len(self._exported.in_avals)
        diff_in = [i for i, a in enumerate(self._exported.in_avals) if _differentiable(a.dtype)]
        diff_out = [j for j, a in enumerate(self._exported.out_avals) if _differentiable(a.dtype)]
        out_avals = self._exported.out_avals

        def forward(*args):
            primals, lin = args[:n_in], args[n_in:]
            tangents = [np.zeros(np.shape(p), jax.dtypes.float0) for p in primals]
            for i, t in zip(diff_in, lin):
                tangents[i] = t
            _, out_tangents = jax.jvp(self._call_module, tuple(primals), tuple(tangents))
            return [out_tangents[j] for j in diff_out]

        def transpose(*args):
            primals, cts = args[:n_in], args[n_in:]
            shapes = [a.shape for a in out_avals]
            if not all(isinstance(d, int) for shape in shapes for d in shape):  # polymorphic
                shapes = [o.shape for o in jax.eval_shape(self._call_module, *primals)]
            full = [np.zeros(shape, jax.dtypes.float0) for shape in shapes]
            for j, ct in zip(diff_out, cts):
                full[j] = ct
            in_cts = self.producer_vjp_function()(*primals, *full)
            in_cts = in_cts if isinstance(in_cts, tuple) else (in_cts,)
            return [in_cts[i] for i in diff_in]

        @call.defjvp
        def _jvp(primals, tangents):
            outs = call(*primals)
            lin = [jnp.zeros_like(primals[i]) if type(tangents[i]) is
                   jax.custom_derivatives.SymbolicZero else tangents[i] for i in diff_in]
            touts = custom_linear(forward, transpose, primals, lin) if diff_out else []
            out_tangents = [np.zeros(np.shape(o), jax.dtypes.float0) for o in outs]
            for j, t in zip(diff_out, touts):
                out_tangents[j] = t
            return outs, tuple(out_tangents)

        return call


def _returns_aval(ttype, aval) -> bool:
    """Whether a module result of type `ttype` is the exported function's result `aval`
    (dimensions compared where both are numbers: a polymorphic one is a `?` or a symbol)."""
    if not isinstance(ttype, T.TensorType) or len(ttype.shape) != len(aval.shape):
        return False
    dtype = np.dtype(np.bool_) if aval.dtype == jax.dtypes.float0 else np.dtype(aval.dtype)
    return ttype.dtype == dtype and all(
        d is None or not isinstance(s, int) or d == s for d, s in zip(ttype.shape, aval.shape))


def _differentiable(dtype) -> bool:
    return jnp.issubdtype(dtype, jnp.inexact)
