"""What each built-in custom-call target is: the README's table comes from here.

A `TargetInfo` is attached to every built-in target: the modules of the
legacy forms attach it when they register (ops/custom_calls_legacy*.py); the
targets registered elsewhere are described at the end of this file.
`markdown_table()` joins the registry with these entries (a target without
one is an error, so a new target cannot be left out of the README), and
`python -m shlo2jax.custom_call_table` prints it.
"""

from __future__ import annotations

import dataclasses

from shlo2jax import registry


@dataclasses.dataclass(frozen=True)
class TargetInfo:
    """One kernel (several target names: dtypes, CUDA/ROCm twins) as the table shows it.

    forms: how the kernel takes its parameters -- "FFI" (typed attributes in
      `mhlo.backend_config`), "descriptor" (a packed C struct in
      `backend_config`), "operands" (leading scalar operands), "attributes"
      (a plain string or dictionary config), "none".
    jax: the jax releases whose lowering emitted it.
    dtypes: the element types it takes.
    test: the tests covering it, `tests/<file>.py::<test>`.
    """
    kernel: str
    forms: tuple
    jax: str
    dtypes: str
    test: tuple


CATALOG: dict[str, TargetInfo] = {}


def describe(targets, info: TargetInfo) -> None:
    for target in targets:
        CATALOG[target] = info


def builtin_targets() -> list:
    """The built-in custom-call targets in the registry (a user's own rule is not listed)."""
    registry._load_builtin_rules()
    return sorted(name for name, rule in registry.CUSTOM_CALL_RULES.items()
                  if registry._is_builtin(rule.handler))


def _compress(names) -> str:
    """Names differing in one character share a cell entry (display only):
    `lapack_sgeev`, `lapack_dgeev` -> `lapack_{s,d}geev`."""
    remaining = sorted(set(names))
    groups = []
    while remaining:
        best = None
        for name in remaining:
            for i in range(len(name)):
                members = [n for n in remaining if len(n) == len(name)
                           and n[:i] == name[:i] and n[i + 1:] == name[i + 1:]]
                if len(members) > 1 and (best is None or len(members) > len(best[2])):
                    best = (name[:i], name[i + 1:], members)
        if best is None:
            groups += [f"`{n}`" for n in remaining]
            break
        prefix, suffix, members = best
        chars = ",".join(m[len(prefix)] for m in members)
        groups.append(f"`{prefix}{{{chars}}}{suffix}`")
        remaining = [n for n in remaining if n not in members]
    return ", ".join(sorted(groups, key=lambda g: g.strip("`").replace("{", "")))


def markdown_table() -> str:
    """The README's custom-call table: one row per kernel, built from the registry."""
    targets = builtin_targets()
    missing = [t for t in targets if t not in CATALOG]
    if missing:
        raise KeyError(f"built-in custom-call targets without a catalog entry: {missing}")
    rows: dict = {}
    for target in targets:
        rows.setdefault(CATALOG[target], []).append(target)
    lines = ["| Kernel | Targets | Forms | Emitted by jax | Dtypes | Tests |",
             "|---|---|---|---|---|---|"]
    for info, names in sorted(rows.items(), key=lambda kv: kv[0].kernel.lower()):
        tests = "<br>".join(f"`{t}`" for t in info.test)
        lines.append(f"| {info.kernel} | {_compress(names)} | {', '.join(info.forms)} | "
                     f"{info.jax} | {info.dtypes} | {tests} |")
    return "\n".join(lines) + "\n"
