"""A `jax.export` artifact's entry function, called like `Exported.call`: with the exported
function's flat arguments (`in_avals`), returning its flat results.

The serialized module's own `@main` differs: jax drops arguments the function does not use
(`module_kept_var_idx`), a multi-platform export takes a leading platform index, and ordered
effects thread tokens. `ExportedFunction` supplies them: the platform index is the current
backend's platform when the export lists it, else the first platform the export lists (the
translation runs that platform's code here, custom calls included). The module function
itself runs on the executable chosen for it like any other; reverse mode goes through the
producer's VJP where the program was loaded to use it (`producer_vjp`).

What it reads of the export is shlo2jax's own record of it (`sources.jax_export.ExportRecord`),
never a jax `Exported`: the same whichever jax wrote the artifact and whichever is installed.
"""

from __future__ import annotations

import dataclasses
import functools
import jax
import numpy as np

from shlo2jax import names, signatures
from shlo2jax import types as T
from shlo2jax.errors import LoadError
from shlo2jax.executables.producer_vjp import ProducerVjp
from shlo2jax.sources import export_compat
from shlo2jax.sources.jax_export import ExportRecord, record_of
from shlo2jax.module import FunctionDef
from shlo2jax.program import Function, Program
from shlo2jax.translate import TOKEN


class ExportedCall:
    """Runs the exported function: its arguments adapted to the module's @main, the result
    tokens dropped."""

    def __init__(self, function: "ExportedFunction"):
        self.function = function

    @property
    def lowering(self) -> str:
        return self.function.executable.lowering

    islands = property(lambda self: getattr(self.function.executable, "islands", ()))

    def __call__(self, *args) -> tuple:
        fn = self.function
        outs = fn.call_module(*fn.module_arguments(args))
        return tuple(outs[fn.result_tokens:])


class ExportedFunction(Function):
    """The entry function of a `jax.export` artifact (see the module docstring); `exported`:
    its `ExportRecord` (or a live `jax.export.Exported`, read into one).

    `vjp`: the producer's VJP (called as the entry function of the program of `record.vjp()`,
    loaded on first use), when the artifact carries one and the program was loaded with
    `producer_vjp=True`: reverse mode then uses it; forward mode and vmap use the translation.
    """

    def __init__(self, program: Program, fdef: FunctionDef, exported, vjp=None):
        super().__init__(program, fdef)
        exported = record_of(exported)
        self._exported = exported  # the record (its module bytes may be dropped)
        self._kept = tuple(exported.module_kept_var_idx)
        module_inputs = list(fdef.input_types)
        self._platform_index = None
        if fdef.arg_attrs and fdef.arg_attrs[0].get("jax.global_constant") == "_platform_index":
            module_inputs.pop(0)
            platforms = tuple(exported.platforms)
            here = jax.default_backend()
            # in the type @main declares: i32, or i64 where the exporter ran with x64 (jax's
            # own back-compat records of jax 0.12); jax's call converts its index so too
            index = platforms.index(here) if here in platforms else 0
            self._platform_index = np.asarray(index, fdef.input_types[0].dtype)[()]
        self._tokens = _leading_tokens(module_inputs)
        self.result_tokens = _leading_tokens(fdef.output_types)
        declared = tuple(exported.out_avals)
        returned = tuple(fdef.output_types[self.result_tokens:])
        if len(returned) != len(declared) or not all(
                _returns_aval(t, a) for t, a in zip(returned, declared)):
            raise LoadError(
                f"jax.export artifact {exported.fun_name}: @main returns "
                f"({', '.join(map(str, returned))}) but the export declares "
                f"({', '.join(signatures.type_text(a) for a in declared)})")
        if len(module_inputs) - self._tokens != len(self._kept):
            raise LoadError(
                f"jax.export artifact {exported.fun_name}: @main takes {len(module_inputs)} "
                f"arguments after the platform index, but the export keeps {len(self._kept)} of "
                f"its {len(exported.in_avals)} arguments and {self._tokens} tokens")
        self.vjp_function = vjp
        call = ExportedCall(self)
        self.exported_executable = call if vjp is None else ProducerVjp(call, exported, vjp)

    @classmethod
    def wrapping(cls, function: Function, exported, vjp=None) -> "ExportedFunction":
        """The exported function whose module function is `function`."""
        return cls(function.program, function._definition, exported, vjp)

    @property
    def record(self) -> ExportRecord:
        """shlo2jax's record of the export (what the calling convention, the names and the
        producer's VJP read), whichever jax wrote it and whichever is installed."""
        return self._exported

    @property
    def exported(self):
        """The `jax.export.Exported` of the installed jax, made on request
        (`sources.export_compat.jax_exported`: a `LoadError` where this jax cannot represent
        the artifact). One whose module bytes the program let go is rebuilt on each access,
        the module serialized again; else it is made once."""
        record = self._exported
        if not len(record.mlir_module_serialized):
            return export_compat.jax_exported(record, self.program.mlir_module)
        made = self.__dict__.get("_jax_exported")
        if made is None:
            made = self.__dict__["_jax_exported"] = export_compat.jax_exported(record)
        return made

    def drop_module_bytes(self) -> None:
        """Lets the record's module bytes go, and the serialized bytes that hold them (they
        hold the weights once more; see `exported`)."""
        self._exported = dataclasses.replace(self._exported, mlir_module_serialized=b"")
        self.__dict__.pop("_jax_exported", None)

    @property
    def in_avals(self) -> tuple:
        return self._exported.in_avals

    @property
    def out_avals(self) -> tuple:
        return self._exported.out_avals

    @property
    def signature(self) -> str:
        # The format of every signature (shlo2jax.signatures.text), the exported avals'.
        return (signatures.text(self.name, self._exported.in_avals, self._exported.out_avals,
                                self.arg_names) + f"  [jax.export {self._exported.fun_name}]")

    @property
    def uses_producer_vjp(self) -> bool:
        """Whether reverse mode uses the VJP the artifact ships (see the class docstring)."""
        return self.vjp_function is not None

    def module_arguments(self, args) -> tuple:
        """The exported function's arguments as the module's @main takes them."""
        if len(args) != len(self._exported.in_avals):
            raise TypeError(f"{self.signature} takes {len(self._exported.in_avals)} argument(s), "
                            f"got {len(args)}")
        head = () if self._platform_index is None else (self._platform_index,)
        return head + (TOKEN,) * self._tokens + tuple(args[i] for i in self._kept)

    @functools.cached_property
    def arg_names(self) -> tuple:
        """The names of the exported function's flat arguments (see Function.arg_names; for
        arguments jax dropped as unused, their `in_tree` path)."""
        module_names = names.module_argument_names(self.program, self._definition)
        skip = (self._platform_index is not None) + self._tokens
        return names.with_fallback(
            names.exported_argument_names(self._exported, module_names[skip:]), "arg")

    @functools.cached_property
    def result_names(self) -> tuple:
        module_names = names.module_result_names(self.program, self._definition)
        return names.with_fallback(module_names[self.result_tokens:], "result")

    def __call__(self, *args, **kwargs):
        outs = self.exported_executable(*self.bind_keywords(args, kwargs))
        return outs[0] if len(outs) == 1 else tuple(outs)


def _leading_tokens(types) -> int:
    n = 0
    while n < len(types) and isinstance(types[n], T.TokenType):
        n += 1
    return n


def _returns_aval(ttype, aval) -> bool:
    """Whether a module result of type `ttype` is the exported function's result `aval`
    (dimensions compared where both are numbers: a polymorphic one is a `?` or a symbol)."""
    if not isinstance(ttype, T.TensorType) or len(ttype.shape) != len(aval.shape):
        return False
    dtype = np.dtype(np.bool_) if aval.dtype == jax.dtypes.float0 else np.dtype(aval.dtype)
    return ttype.dtype == dtype and all(
        d is None or not isinstance(s, int) or d == s for d, s in zip(ttype.shape, aval.shape))
