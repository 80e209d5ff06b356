"""What differs between jax releases around `jax.export.Exported`, in one place for the
`jax.export` source (the rest of shlo2jax's jax-release differences live in
`shlo2jax.compat`):

- `record_of`: the `ExportRecord` of a live `Exported`, read through its public attributes
  (`exported_fields`: jax 0.9 on add
  the named shardings `_in_named_shardings`/`_out_named_shardings` beside
  `in_shardings_hlo`; jax 0.12's hold None in `in_shardings_hlo`);
- `jax_exported`: the installed jax's `Exported` of an `ExportRecord`, for
  `Function.exported` only (nothing in load, call, grad or vmap needs one): the live
  one it came from, else `jax.export.deserialize` of the bytes it was read from where this
  jax reads them right, else one made from the record's fields where this jax's `Exported`
  takes them (its constructor's fields differ by release: 17 in jax 0.7, 20 in 0.9-0.11 with
  `_has_named_shardings`, 19 in 0.12); a `LoadError` where none of these is possible;
- `jax_reading`: what the installed jax's own `jax.export.deserialize` makes of serialized
  bytes (reads them, refuses them, or misreads them), for tests and the artifact matrix.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import jax
import numpy as np
from jax import export as _jax_export

from shlo2jax import compat
from shlo2jax.errors import LoadError
from shlo2jax.sources.jax_export import ExportRecord


def record_of(source) -> ExportRecord:
    """The record of an `ExportRecord` (itself) or of a live `jax.export.Exported` of the
    installed jax, read through its public attributes (`exported_fields`)."""
    if isinstance(source, ExportRecord):
        return source
    fields = exported_fields(source)
    get_vjp = fields.pop("get_vjp")
    return ExportRecord(**fields, get_vjp=None if get_vjp is None else (
        lambda: record_of(get_vjp())), origin=source)


def exported_fields(exported) -> dict:
    """The fields of an `ExportRecord` (and `get_vjp`: a callable giving the VJP's `Exported`,
    or None) read from a live `jax.export.Exported` of any supported jax."""
    try:
        n_in, n_out = len(exported.in_avals), len(exported.out_avals)
        has_vjp = exported.has_vjp()
        return dict(
            fun_name=exported.fun_name,
            in_tree=exported.in_tree,
            in_avals=tuple(jax.ShapeDtypeStruct(a.shape, a.dtype) for a in exported.in_avals),
            out_tree=exported.out_tree,
            out_avals=tuple(jax.ShapeDtypeStruct(a.shape, a.dtype)
                            for a in exported.out_avals),
            nr_devices=int(exported.nr_devices),
            in_shardings=_shardings(exported, "in", n_in),
            out_shardings=_shardings(exported, "out", n_out),
            platforms=tuple(exported.platforms),
            ordered_effects=tuple(str(type(e)) for e in exported.ordered_effects),
            unordered_effects=tuple(str(type(e)) for e in exported.unordered_effects),
            disabled_checks=tuple(_check(c) for c in exported.disabled_safety_checks),
            mlir_module_serialized=exported.mlir_module_serialized,
            calling_convention_version=int(exported.calling_convention_version),
            module_kept_var_idx=tuple(int(i) for i in exported.module_kept_var_idx),
            uses_global_constants=bool(getattr(exported, "uses_global_constants", False)),
            get_vjp=exported.vjp if has_vjp else None,
        )
    except Exception as e:  # noqa: BLE001 - an Exported this reader does not understand
        raise LoadError(f"jax.export.Exported {getattr(exported, 'fun_name', '?')}: cannot "
                        f"read it ({type(e).__name__}: {e})") from None


def _shardings(exported, side: str, n: int) -> tuple:
    named = getattr(exported, f"_{side}_named_shardings", None) or (None,) * n
    hlo = getattr(exported, f"{side}_shardings_hlo", None) or (None,) * n
    return tuple(s if s is not None else h for s, h in zip(named, hlo))


def _check(check) -> tuple:
    impl = str(getattr(check, "_impl", check))
    if impl.startswith("custom_call:"):
        return ("custom_call", impl[len("custom_call:"):])
    return (impl, None)


# ---------------------------------------------------------------- the installed jax's Exported

def jax_exported(record, module=None):
    """The installed jax's `Exported` of `record` (an `ExportRecord`; see the module
    docstring). `module`: the program's MLIR module, serialized as the module bytes where the
    record let them go."""
    exported = record.origin
    if exported is None and record.serialized is not None:
        exported = _deserialized(record)
    if exported is None:
        exported = _from_fields(record)
    if not len(exported.mlir_module_serialized) and module is not None:
        exported = compat.with_serialized_module(exported, module)
    return exported


def _deserialized(record):
    try:
        exported = _jax_export.deserialize(record.serialized)
    except Exception:  # noqa: BLE001 - refused by this jax: made from the fields instead
        return None
    return exported if agrees(exported, record) else None


def agrees(exported, record) -> bool:
    """Whether `exported` (a jax `Exported`) holds what `record` says of the calling
    convention (an older jax reads a newer artifact without error but leaves out what
    moved: jax 0.7 reads the device count of a jax >= 0.9 artifact as 0)."""
    def same(avals, recs):
        return len(avals) == len(recs) and all(
            len(a.shape) == len(r.shape) and _dtype_name(a.dtype) == _dtype_name(r.dtype)
            and all(not isinstance(d, int) or not isinstance(s, int) or d == s
                    for d, s in zip(a.shape, r.shape))
            for a, r in zip(avals, recs))
    return (same(exported.in_avals, record.in_avals)
            and same(exported.out_avals, record.out_avals)
            and exported.nr_devices == record.nr_devices
            and tuple(exported.platforms) == tuple(record.platforms)
            and tuple(exported.module_kept_var_idx) == tuple(record.module_kept_var_idx)
            and exported.calling_convention_version == record.calling_convention_version
            and exported.has_vjp() == record.has_vjp())


def _dtype_name(dtype) -> str:
    return "float0" if dtype == jax.dtypes.float0 else np.dtype(dtype).name


def jax_reading(data, record) -> str:
    """What the installed jax's `jax.export.deserialize` makes of `data` (whose
    `ExportRecord` is `record`): "jax" (read as shlo2jax reads it), "refused" (it raises),
    or "misread" (read without error, but differently)."""
    try:
        exported = _jax_export.deserialize(bytearray(data))
    except Exception:  # noqa: BLE001 - refused: what is being asked
        return "refused"
    return "jax" if agrees(exported, record) else "misread"


def _from_fields(record):
    where = record.describe()
    if record.custom_nodes:
        raise LoadError(f"{where}: the installed jax ({jax.__version__}) cannot represent it "
                        f"as an Exported: its pytrees hold custom nodes "
                        f"{', '.join(record.custom_nodes)} with no serialization registered "
                        "(jax.export.register_pytree_node_serialization)")
    try:
        fields = dict(
            fun_name=record.fun_name,
            in_tree=record.in_tree,
            in_avals=tuple(jax.core.ShapedArray(a.shape, a.dtype) for a in record.in_avals),
            out_tree=record.out_tree,
            out_avals=tuple(jax.core.ShapedArray(a.shape, a.dtype) for a in record.out_avals),
            in_shardings_hlo=tuple(_hlo(s) for s in record.in_shardings),
            out_shardings_hlo=tuple(_hlo(s) for s in record.out_shardings),
            nr_devices=record.nr_devices,
            platforms=tuple(record.platforms),
            ordered_effects=tuple(_effect(e, where) for e in record.ordered_effects),
            unordered_effects=tuple(_effect(e, where) for e in record.unordered_effects),
            disabled_safety_checks=tuple(c for c in map(_disabled_check, record.disabled_checks)
                                         if c is not None),
            mlir_module_serialized=bytes(record.mlir_module_serialized),
            calling_convention_version=record.calling_convention_version,
            module_kept_var_idx=tuple(record.module_kept_var_idx),
            uses_global_constants=record.uses_global_constants,
            _get_vjp=(lambda _: jax_exported(record.vjp())) if record.has_vjp() else None,
        )
        names = {f.name for f in dataclasses.fields(_jax_export.Exported)}
        # jax 0.9 on: the named shardings, left unspecified (as jax's own reader leaves them
        # for an artifact written with HloShardings; a named one of the record is left
        # unspecified too: shlo2jax lays values out from the module's own attributes);
        # 0.9-0.11 also say which kind the artifact holds (they serialize named ones only)
        hlo = any(isinstance(s, (bytes, bytearray))
                  for s in record.in_shardings + record.out_shardings)
        fields.update(_in_named_shardings=(None,) * len(record.in_avals),
                      _out_named_shardings=(None,) * len(record.out_avals),
                      _has_named_shardings=not hlo)
        unknown = sorted(n for n in names - set(fields) if _required(n))
        if unknown:
            raise LoadError(f"{where}: the installed jax ({jax.__version__}) cannot represent "
                            f"it as an Exported: its Exported takes fields {unknown} that "
                            "shlo2jax does not know")
        return _jax_export.Exported(**{k: v for k, v in fields.items() if k in names})
    except LoadError:
        raise
    except Exception as e:  # noqa: BLE001 - contents this jax's Exported cannot hold
        raise LoadError(f"{where}: the installed jax ({jax.__version__}) cannot represent it "
                        f"as an Exported: {type(e).__name__}: {e}") from None


def _required(name: str) -> bool:
    field = {f.name: f for f in dataclasses.fields(_jax_export.Exported)}[name]
    return (field.default is dataclasses.MISSING
            and field.default_factory is dataclasses.MISSING)


def _hlo(sharding) -> Optional[object]:
    if isinstance(sharding, (bytes, bytearray)):
        return compat.hlo_sharding_from_proto(bytes(sharding))
    return None  # unspecified, or named: left unspecified (see above)


def _effect(type_name: str, where: str):
    effect = compat.effect_from_type_name(type_name)
    if effect is None:
        raise LoadError(f"{where}: effect {type_name}, which no module of this jax "
                        f"({jax.__version__}) registers")
    return effect


def _disabled_check(check):
    kind, target = check
    if kind == "custom_call":
        return _jax_export.DisabledSafetyCheck.custom_call(target)
    if kind == "platform":
        return _jax_export.DisabledSafetyCheck.platform()
    # shape_assertions (jax 0.4.2x): jax removed the check it disabled; nothing to carry
    return None
