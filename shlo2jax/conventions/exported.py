"""A `jax.export` artifact's entry function, called like `Exported.call`: with the exported
function's flat arguments (`in_avals`), returning its flat results.

The serialized module's own `@main` differs: jax drops arguments the function does not use
(`module_kept_var_idx`), a multi-platform export takes a leading platform index, and ordered
effects thread tokens. `ExportedConvention` supplies them: the platform index is the current
backend's platform when the export lists it, else the first platform the export lists (the
translation runs that platform's code here, custom calls included). The module function
itself runs on the executable chosen for it like any other; reverse mode goes through the
producer's VJP where the program was loaded to use it (`producer_vjp`).

What it reads of the export is shlo2jax's own record of it (`sources.jax_export.ExportRecord`),
never a jax `Exported`: the same whichever jax wrote the artifact and whichever is installed.
"""

from __future__ import annotations

import functools

import jax
import numpy as np

from shlo2jax import names, signatures
from shlo2jax import value_types as T
from shlo2jax.conventions import ModuleConvention
from shlo2jax.conventions.producer_vjp import ProducerVjp
from shlo2jax.errors import LoadError
from shlo2jax.module import FunctionDef
from shlo2jax.sources import export_compat
from shlo2jax.sources.jax_export import ExportRecord
from shlo2jax.translate import TOKEN


def of_export(record: ExportRecord):
    """The factory of the convention of the artifact whose record is `record`, for
    `sources.Source.conventions`."""
    def make(fdef: FunctionDef, assembly) -> ExportedConvention:
        vjp = None
        if assembly.options.producer_vjp and record.has_vjp():
            vjp = assembly.lazy_entry(record.vjp)
        return ExportedConvention(fdef, record, vjp)
    return make


class ExportedConvention(ModuleConvention):
    """The convention of the artifact whose record is `record` (see the module docstring), for
    its module's @main `fdef`.

    `vjp`: the producer's VJP (called as the entry function of the program of `record.vjp()`,
    loaded on first use), when the artifact carries one and the program was loaded with
    `producer_vjp=True`: reverse mode then uses it; forward mode and vmap use the translation.
    """

    def __init__(self, fdef: FunctionDef, record: ExportRecord, vjp=None):
        super().__init__(fdef)
        self.record = record
        self._kept = tuple(record.module_kept_var_idx)
        module_inputs = list(fdef.input_types)
        self._platform_index = None
        if fdef.arg_attrs and fdef.arg_attrs[0].get("jax.global_constant") == "_platform_index":
            module_inputs.pop(0)
            platforms = tuple(record.platforms)
            here = jax.default_backend()
            # in the type @main declares: i32, or i64 where the exporter ran with x64 (jax's
            # own back-compat records of jax 0.12); jax's call converts its index so too
            index = platforms.index(here) if here in platforms else 0
            self._platform_index = np.asarray(index, fdef.input_types[0].dtype)[()]
        self._tokens = _leading_tokens(module_inputs)
        self._result_tokens = _leading_tokens(fdef.output_types)
        declared = tuple(record.out_avals)
        returned = tuple(fdef.output_types[self._result_tokens:])
        if len(returned) != len(declared) or not all(
                _returns_aval(t, a) for t, a in zip(returned, declared)):
            raise LoadError(
                f"jax.export artifact {record.fun_name}: @main returns "
                f"({', '.join(map(str, returned))}) but the export declares "
                f"({', '.join(signatures.type_text(a) for a in declared)})")
        if sorted(set(self._kept)) != list(self._kept) or \
                any(not 0 <= i < len(record.in_avals) for i in self._kept):
            # a damaged artifact: a call would index past the caller's arguments
            raise LoadError(
                f"jax.export artifact {record.fun_name}: module_kept_var_idx "
                f"{list(self._kept)} is not an increasing list of the indices of its "
                f"{len(record.in_avals)} arguments")
        if len(module_inputs) - self._tokens != len(self._kept):
            raise LoadError(
                f"jax.export artifact {record.fun_name}: @main takes {len(module_inputs)} "
                f"arguments after the platform index, but the export keeps {len(self._kept)} of "
                f"its {len(record.in_avals)} arguments and {self._tokens} tokens")
        self.vjp_function = vjp

    argument_types = in_avals = property(lambda self: self.record.in_avals)
    out_avals = property(lambda self: self.record.out_avals)
    uses_producer_vjp = property(lambda self: self.vjp_function is not None, doc="""Whether
        reverse mode uses the VJP the artifact ships (see the class docstring).""")

    @property
    def signature(self) -> str:
        # The format of every signature (shlo2jax.signatures.text), the exported avals'.
        return (signatures.text(self.name, self.record.in_avals, self.record.out_avals,
                                self.arg_names) + f"  [jax.export {self.record.fun_name}]")

    @functools.cached_property
    def arg_names(self) -> tuple:
        """The names of the exported function's flat arguments (for arguments jax dropped as
        unused, their `in_tree` path)."""
        module_names = names.module_argument_names(self._fdef)
        skip = (self._platform_index is not None) + self._tokens
        return names.with_fallback(
            names.exported_argument_names(self.record, module_names[skip:]), "arg")

    @functools.cached_property
    def result_names(self) -> tuple:
        return self.module_result_names[self._result_tokens:]

    def check_arguments(self, args) -> None:
        if len(args) != len(self.record.in_avals):
            raise TypeError(f"{self.signature} takes {len(self.record.in_avals)} argument(s), "
                            f"got {len(args)}")

    def module_arguments(self, args, params=None) -> tuple:
        """The exported function's arguments as the module's @main takes them."""
        self.check_arguments(args)
        head = () if self._platform_index is None else (self._platform_index,)
        return head + (TOKEN,) * self._tokens + tuple(args[i] for i in self._kept)

    def flat_results(self, outs) -> tuple:
        return tuple(outs[self._result_tokens:])

    def wrap(self, call):
        return call if self.vjp_function is None else ProducerVjp(call, self.record,
                                                                  self.vjp_function)

    def exported(self, program):
        """The `jax.export.Exported` of the installed jax, made on request
        (`sources.export_compat.jax_exported`: a `LoadError` where this jax cannot represent
        the artifact). Where the source let the record's module bytes go, they are written
        again from `program`'s module: made once while the program holds its module, on each
        access where it let it go (the weights are held once); else made once."""
        released = not len(self.record.mlir_module_serialized) and program.released_mlir_module
        made = None if released else self.__dict__.get("_jax_exported")
        if made is None:
            module = program.mlir_module if not len(self.record.mlir_module_serialized) else None
            made = export_compat.jax_exported(self.record, module)
            if not released:
                self.__dict__["_jax_exported"] = made
        return made


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
