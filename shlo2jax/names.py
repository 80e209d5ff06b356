"""Names a module gives its arguments, results and values: read from what producers write.

- Arguments: the argument's location (`loc("x")`, `loc("params['w']")`: jax's argument paths;
  torchax writes `states[i]` / `inputs[0][k]`), `jax.arg_info` (older jax),
  `tf_saved_model.index_path`, a function's `tf.entry_function` `inputs`; for a `jax.export`
  artifact, arguments jax dropped as unused are named from `Exported.in_tree`, with the
  Python parameter name learned from a kept argument of the same top-level position.
- Results: `jax.result_info`, `tf_saved_model.index_path`, `tf.entry_function` `outputs`.
- Values (lifted constants, shlo2jax.params): the name stack of an op's location
  (`jit(f)/encoder/layer_0/dense/dot_general` -> scope `encoder/layer_0/dense`), or a
  TensorFlow node name (`sequential/dense/MatMul@__inference_...` -> `sequential/dense`).

Names the module does not give fall back to `arg_<i>` / `result_<i>`; duplicates get `_1`,
`_2`, ... in order, so every name is unique and the same on every load of the module.
"""

from __future__ import annotations

import re
from typing import Iterable, Optional, Sequence

import jax

# -- locations

_POSITIONED_NAME_RE = re.compile(r"^\S.*?:\d+:\d+ \((.*)\)$", re.S)  # format_location's form
_QUOTED_RE = re.compile(r'"((?:[^"\\]|\\.)*)"(?!:\d)')  # a quoted string that is no file path
_LOC_NAME_RE = re.compile(r'^loc\("((?:[^"\\]|\\.)*)"\)$')
_IDENTIFIER_RE = re.compile(r"^[A-Za-z_][\w.\-]*$")
# Name-stack components that are transformations or bookkeeping, not the model's structure.
_NOISE = frozenset({"jit", "pjit", "checkpoint", "remat", "rematted_computation", "while",
                    "body", "cond", "scan", "jvp", "vmap", "transpose", "custom_jvp_call",
                    "custom_vjp_call", "closed_call", "core_call", "shard_map", "xla_call",
                    # TensorFlow: reading a variable, casting it
                    "ReadVariableOp", "Read", "Cast", "Identity"})


def location_names(location: str) -> list:
    """The name strings a formatted location carries (see shlo2jax.module.format_location):
    jax's `file:line:col (name stack)`, TensorFlow's quoted node names, or a bare name."""
    if not location or location == "unknown":
        return []
    positioned = _POSITIONED_NAME_RE.match(location)
    if positioned:
        return [positioned.group(1)]
    quoted = _QUOTED_RE.findall(location)
    if quoted:
        return [q for q in quoted if "/" in q or "@" in q or _IDENTIFIER_RE.match(q)]
    if re.search(r":\d+:\d+$", location) or location.startswith(("callsite(", "fused[")):
        return []  # a position only
    return [location]


def split_path(name: str) -> list:
    """`jit(f)/a/b(c/d)/op` -> ["jit(f)", "a", "b(c/d)", "op"]: '/' outside parentheses."""
    parts, depth, current = [], 0, []
    for ch in name:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth = max(0, depth - 1)
        if ch == "/" and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return [p for p in parts if p]


def scope(location: str) -> list:
    """The model-structure part of an op's name: its location's name stack (or TensorFlow node
    name) without the op itself, transformations (`jit(f)`, `vmap(...)`, `pjit`), einsum specs
    and TensorFlow's variable-reading ops. [] when the location names no scope."""
    for name in location_names(location):
        if name.startswith("QuantizationUnit("):
            continue
        parts = split_path(name.split("@", 1)[0])
        if len(parts) < 2:
            continue
        kept = [p for p in parts[:-1] if _IDENTIFIER_RE.match(p) and p not in _NOISE]
        # Flax's lifted transforms name a scope `Module.method` above `Module`: keep one.
        kept = [p for p, after in zip(kept, kept[1:] + [""]) if not p.startswith(after + ".")]
        if kept:
            return kept
    return []


# -- argument and result names

def unique(names: Iterable[str]) -> list:
    """Duplicates get `_1`, `_2`, ... (skipping names already taken), first come first kept."""
    taken, out = set(), []
    names = list(names)
    counts: dict = {}
    for name in names:
        candidate = name
        while candidate in taken:
            counts[name] = counts.get(name, 0) + 1
            candidate = f"{name}_{counts[name]}"
        taken.add(candidate)
        out.append(candidate)
    return out


def _named_location(location) -> Optional[str]:
    match = _LOC_NAME_RE.match(str(location))
    if not match:
        return None
    return match.group(1).replace('\\"', '"').replace("\\\\", "\\") or None


def _tf_path(attrs: dict) -> Optional[str]:
    path = attrs.get("tf_saved_model.index_path")
    if isinstance(path, (tuple, list)) and path:
        return ".".join(str(p) for p in path)
    return None


def _entry_function(func_attrs: dict, key: str, count: int) -> Sequence:
    entry = func_attrs.get("tf.entry_function")
    text = entry.get(key) if isinstance(entry, dict) else None
    if not isinstance(text, str) or not text:
        return [None] * count
    names = [n.strip().split(":")[0] or None for n in text.split(",")]
    return names if len(names) == count else [None] * count


def _func_attributes(fdef) -> dict:
    if fdef.entry_function is None:
        return {}
    return {"tf.entry_function": fdef.entry_function}


def module_argument_names(fdef) -> list:
    """The name the module gives each argument of `fdef` (None where it gives none)."""
    locations = [_named_location(text) for text in fdef.arg_locations] or \
        [None] * len(fdef.input_types)
    entry = _entry_function(_func_attributes(fdef), "inputs", len(fdef.input_types))
    names = []
    for i, attrs in enumerate(fdef.arg_attrs or ({},) * len(fdef.input_types)):
        info = attrs.get("jax.arg_info")
        names.append(locations[i] or (info if isinstance(info, str) and info else None)
                     or _tf_path(attrs) or entry[i])
    return names


def module_result_names(fdef) -> list:
    entry = _entry_function(_func_attributes(fdef), "outputs", len(fdef.output_types))
    names = []
    for i, attrs in enumerate(fdef.result_attrs or ({},) * len(fdef.output_types)):
        info = attrs.get("jax.result_info")
        names.append((info if isinstance(info, str) and info else None)
                      or _tf_path(attrs) or entry[i])
    return names


def with_fallback(names: Sequence[Optional[str]], prefix: str) -> tuple:
    return tuple(unique(n if n else f"{prefix}_{i}" for i, n in enumerate(names)))


def exported_argument_names(exported, module_names: Sequence[Optional[str]]) -> list:
    """Names of a `jax.export` artifact's flat arguments (`exported`: its
    `sources.jax_export.ExportRecord`, or anything with its `in_tree` and
    `module_kept_var_idx`): the module's name for each kept
    argument (`module_names[j]` for flat argument `module_kept_var_idx[j]`), and for those jax
    dropped, their `in_tree` path under the Python name learned from a kept argument of the
    same top-level position (`args[i]` when none is kept)."""
    tree = jax.tree_util.tree_unflatten(exported.in_tree, range(exported.in_tree.num_leaves))
    paths = [path for path, _ in jax.tree_util.tree_flatten_with_path(tree)[0]]

    def split(path):  # (top-level key, the rest as jax prints it)
        if len(path) >= 2 and getattr(path[0], "idx", None) == 0:  # positional arguments
            return ("args", path[1].idx), jax.tree_util.keystr(tuple(path[2:]))
        if len(path) >= 2 and getattr(path[0], "idx", None) == 1:  # keyword arguments
            return ("kwargs", path[1].key), jax.tree_util.keystr(tuple(path[2:]))
        return None, jax.tree_util.keystr(tuple(path))

    kept = dict(zip(exported.module_kept_var_idx, module_names))
    prefixes = {}
    for i, path in enumerate(paths):
        name = kept.get(i)
        top, rest = split(path)
        if name and top is not None and name.endswith(rest):
            prefixes[top] = name[:len(name) - len(rest)]
    names = []
    for i, path in enumerate(paths):
        if kept.get(i):
            names.append(kept[i])
            continue
        top, rest = split(path)
        if top is None:
            names.append(f"args{rest}")
        elif top in prefixes:
            names.append(prefixes[top] + rest)
        elif top[0] == "args":
            names.append(f"args[{top[1]}]{rest}")
        else:
            names.append(f"{top[1]}{rest}")
    return names


def bind_keywords(names: Sequence[str], args: tuple, kwargs: dict, signature: str) -> tuple:
    """Positional arguments completed by keyword arguments given by argument name."""
    if not kwargs and len(args) >= len(names):
        return args
    position = {name: i for i, name in enumerate(names)}
    full = list(args) + [_MISSING] * (len(names) - len(args))
    for name, value in kwargs.items():
        i = position.get(name)
        if i is None:
            raise TypeError(f"{signature} has no argument named {name!r}; its arguments: "
                            f"{', '.join(names)}")
        if i < len(args):
            raise TypeError(f"{signature}: argument {name!r} given by position and by name")
        full[i] = value
    missing = [names[i] for i, v in enumerate(full) if v is _MISSING]
    if missing:
        given = len(args) + len(kwargs)
        raise TypeError(f"{signature} takes {len(names)} argument(s), got {given}: missing "
                        f"{', '.join(map(repr, missing))}")
    return tuple(full)


class _Missing:
    def __repr__(self):
        return "<missing>"


_MISSING = _Missing()
