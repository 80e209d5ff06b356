"""The corpus checks, shared by tests/test_corpus.py and tests/corpus/report.py.

Every check takes an entry and the callable under test (the loaded program's function, or
anything with the same signature: the sanity tests pass deliberately broken ones) and returns a
`Result`: ok, the measured error, the count of non-finite values where the producer's are finite,
and a message saying what disagreed. Only the public shlo2jax API is used.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import io
import math
from typing import Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np
from shlo2jax import compat

try:
    from . import entry as corpus_entry
except ImportError:  # run as a script: tests/corpus is sys.path[0]
    import entry as corpus_entry

CHECKS = ("load", "forward", "grad", "vmap", "jit_eager")
VMAP_BATCH = 3


@dataclasses.dataclass
class Result:
    ok: bool
    error: Optional[float] = None  # forward/vmap/jit: max normalized abs error; grad: max rel error
    nonfinite: int = 0  # values non-finite where the producer's are finite
    message: str = ""
    skipped: str = ""  # the check does not apply to this entry (why)


def load(e):
    """The entry's function and the unsupported-op report `shlo2jax info` prints: the program
    loaded as the CLI loads it (strict=False), its module's problems."""
    import shlo2jax
    program = shlo2jax.load(str(e.artifact_path), strict=False)
    return program[e.meta.get("function", "main")], list(program.module.problems)


def missing_requirement(e) -> str:
    """Why the entry cannot load here ("" when it can): the package its meta.json's
    `extra.requires` names (TensorFlow, for a graph read through its XLA bridge) is not
    installed, or it is a torch.export `.pt2`, which loads only where torch and torchax are
    (without them tests/sources/test_pt2.py checks its committed lowering)."""
    package = e.meta.get("extra", {}).get("requires")
    if package and importlib.util.find_spec(package) is None:
        return f"loading it takes {package} (shlo2jax's [tf] extra), which is not installed"
    if e.meta.get("artifact") == "model.pt2" and not all(
            importlib.util.find_spec(m) is not None for m in ("torch", "torchax")):
        return ("loading a .pt2 needs torch and torchax (pip install \"shlo2jax[torch]\"); "
                "tests/sources/test_pt2.py checks its lowering")
    return ""


def check_load(e) -> tuple:
    """(Result, function or None); skipped where `missing_requirement` says why."""
    missing = missing_requirement(e)
    if missing:
        return Result(True, skipped=missing), None
    try:
        fn, problems = load(e)
    except Exception as exc:  # noqa: BLE001 - the report names whatever went wrong
        return Result(False, message=f"load raised {type(exc).__name__}: {exc}"), None
    if problems:
        listed = "; ".join(f"{name} at {loc}: {what}" for name, loc, what in problems)
        return Result(False, message=f"{len(problems)} unsupported op(s): {listed}"), fn
    return Result(True), fn


def cli_info(e) -> str:
    """What `shlo2jax info ARTIFACT` prints."""
    from shlo2jax.tools.cli import main
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main(["info", str(e.artifact_path)])
    return out.getvalue()


def as_list(outputs) -> list:
    """A call's outputs as the flat list the producer's goldens are: nested tuples, lists and
    dicts walked depth first, a dict in its own key order (as torch's pytree flattens it; a
    dict unflattened by jax holds its keys sorted, jax's order); one array is a list of one."""
    if isinstance(outputs, dict):
        outputs = list(outputs.values())
    if isinstance(outputs, (tuple, list)):
        return [leaf for output in outputs for leaf in as_list(output)]
    return [outputs]


def _promote(x):
    return x.astype(jnp.promote_types(x.dtype, jnp.float32))


def loss(outputs, projections):
    """The entries' scalar loss: sum_i sum(out_i * proj_i) over floating outputs (computed in
    at least float32), as every producer computed it for its golden gradient."""
    total = jnp.float32(0)
    for out, proj in zip(as_list(outputs), projections):
        if proj is not None:
            total = total + jnp.sum(_promote(out) * _promote(jnp.asarray(proj)))
    return total


def compare(got, want, rtol: float, atol: float) -> tuple:
    """(ok, error, message) over lists of arrays: integers and bools exactly; floats within
    atol + rtol * max|want| (per output), NaN where the producer has NaN."""
    worst, messages = 0.0, []
    if len(got) != len(want):
        return False, math.inf, f"{len(got)} outputs, the producer has {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        g, w = np.asarray(g), np.asarray(w)
        if g.shape != w.shape or g.dtype != w.dtype:
            messages.append(f"output {i}: {g.dtype}{list(g.shape)}, the producer's is "
                            f"{w.dtype}{list(w.shape)}")
            worst = math.inf
            continue
        if not corpus_entry.is_float(w.dtype):
            bad = int(np.sum(g != w))
            if bad:
                messages.append(f"output {i}: {bad} of {w.size} integer elements differ")
                worst = math.inf
            continue
        g64, w64 = g.astype(np.float64), w.astype(np.float64)
        finite = np.isfinite(w64)
        nonfinite_mismatch = int(np.sum(~np.isclose(g64[~finite], w64[~finite], equal_nan=True)))
        new_nonfinite = int(np.sum(~np.isfinite(g64[finite])))
        scale = float(np.max(np.abs(w64[finite]), initial=0.0))
        err = float(np.max(np.abs(g64[finite] - w64[finite]), initial=0.0))
        norm = err / max(scale, 1e-30)
        if nonfinite_mismatch or new_nonfinite:
            messages.append(f"output {i}: {new_nonfinite} non-finite where the producer's is "
                            f"finite, {nonfinite_mismatch} non-finite values differ")
            worst = math.inf
        elif err > atol + rtol * scale:
            messages.append(f"output {i}: max |got - want| = {err:.3g} > {atol:g} + {rtol:g} * "
                            f"{scale:.3g}")
        worst = max(worst, norm if np.isfinite(norm) else math.inf)
    return not messages, worst, "; ".join(messages)


def _tol(e):
    return e.tolerance["forward_rtol"], e.tolerance["forward_atol"]


def check_forward(e, fn: Callable) -> Result:
    got = [np.asarray(o) for o in as_list(fn(*e.args))]
    ok, err, msg = compare(got, e.outputs, *_tol(e))
    return Result(ok, err, _count_nonfinite(got, e.outputs), msg)


def _count_nonfinite(got, want) -> int:
    n = 0
    for g, w in zip(got, want):
        if corpus_entry.is_float(np.asarray(w).dtype) and np.shape(g) == np.shape(w):
            n += int(np.sum(~np.isfinite(np.asarray(g, np.float64)) & np.isfinite(
                np.asarray(w, np.float64))))
    return n


def gradients(e, fn: Callable) -> dict:
    """jax.jit(jax.grad) of the entry's loss through `fn`, w.r.t. every argument with a golden
    gradient (keyed by position) and every weight with one (keyed by name: a function whose
    weights the source binds, `fn.params`, differentiated through `fn.with_params`).
    Arguments not differentiated are passed as stored (int64 ids stay int64)."""
    wrt = sorted(e.grads)
    weights = sorted(e.weight_grads)
    args = [jnp.asarray(a) if i in wrt else a for i, a in enumerate(e.args)]

    def of(diff_args, diff_weights):
        full = list(args)
        for i, a in zip(wrt, diff_args):
            full[i] = a
        f = fn.with_params(diff_weights) if diff_weights else fn
        return loss(f(*full), e.projections)

    # Under jit, as a training step runs (one compilation; differentiating the program
    # eagerly compiles every func.call callee separately, forward and backward).
    params = {n: fn.params[n] for n in weights}
    grads, weight_grads = jax.jit(jax.grad(of, argnums=(0, 1)))([args[i] for i in wrt], params)
    return {**{i: np.asarray(g) for i, g in zip(wrt, grads)},
            **{n: np.asarray(g) for n, g in weight_grads.items()}}


# A gradient that is numerically zero next to the others (e.g. w.r.t. an attention key bias,
# which softmax cancels exactly: the producer's own value is float32 rounding noise) is measured
# against this fraction of the entry's largest gradient instead of against its own size.
GRAD_FLOOR = 1e-3
# A gradient that is zero in exact arithmetic (a convolution's bias before a batch norm in
# training mode, which subtracts the batch mean) comes out of the producer as rounding noise a
# few float32 ulps of the largest gradient in size, and the noise differs between CPUs and XLA
# releases. Where the producer's whole gradient is at that level, the check is that ours is
# too: both are zero to within this fraction (about 8 float32 ulps) of the largest gradient.
GRAD_NOISE = 1e-6


def check_grad(e, fn: Callable) -> Result:
    """Per argument (and per weight with a golden, `entry.Entry.weight_grads`; rows the entry
    checks apart against their own goldens, `rows_apart`): no non-finite value where the
    producer's is finite, and
    |got - want|_inf <= grad_rtol * max(|want|_inf, GRAD_FLOOR * max over arguments |want|_inf),
    or, where the producer's gradient is rounding noise, both under GRAD_NOISE * that maximum.
    The reported error is |got - want|_inf / that scale (the worst argument's)."""
    if not e.grads and not e.weight_grads:
        return Result(True, skipped="no floating argument")
    got = gradients(e, fn)
    rtol = e.tolerance["grad_rtol"]
    wanted = {**e.grads, **e.weight_grads}
    for name, (rows, true) in e.rows_apart.items():  # (torch's padding_idx rule: entry.py)
        wanted[name] = np.array(wanted[name])
        wanted[name][rows] = true
    largest = max(float(np.max(np.abs(w[np.isfinite(w)]), initial=0.0))
                  for w in map(np.asarray, wanted.values()))
    worst, nonfinite, messages = 0.0, 0, []
    for i, want in sorted(wanted.items(), key=lambda kv: (isinstance(kv[0], str), kv[0])):
        g = got[i].astype(np.float64)
        w = np.asarray(want, np.float64)
        name = f"arg {i} ({e.meta['args'][i]['name']})" if isinstance(i, int) else f"weight {i}"
        finite = np.isfinite(w)
        bad = int(np.sum(~np.isfinite(g) & finite))
        nonfinite += bad
        scale = float(np.max(np.abs(w[finite]), initial=0.0))
        diff = np.abs(g - w)[finite & np.isfinite(g)]
        floor = max(scale, GRAD_FLOOR * largest)
        rel = float(np.max(diff, initial=0.0)) / (floor if floor > 0 else 1.0)
        noise = GRAD_NOISE * largest
        if 0 < scale <= noise and float(np.max(np.abs(g[finite]), initial=0.0)) <= noise:
            rel = 0.0  # both zero up to rounding (GRAD_NOISE)
        worst = max(worst, rel)
        if bad:
            messages.append(f"{name}: {bad} of {w.size} non-finite where the "
                            "producer's are finite")
        elif rel > rtol:
            messages.append(f"{name}: max rel error {rel:.3g} > {rtol:g}")
    return Result(not messages, worst, nonfinite, "; ".join(messages))


def perturbations(e, count: int = VMAP_BATCH) -> list:
    """`count` seeded variants of the vmap arguments: the stored values first, then floats
    moved by 5% of their RMS per step; integer and bool arguments are kept (their values are
    ids, masks and indices whose valid ranges the corpus does not record)."""
    rng = np.random.default_rng(7)
    stacks = {}
    for i in e.meta["vmap_args"]:
        a = e.args[i]
        if corpus_entry.is_float(a.dtype):
            rms = float(np.sqrt(np.mean(np.square(a.astype(np.float64))))) or 1.0
            variants = [a] + [(a + 0.05 * k * rms * rng.standard_normal(a.shape)).astype(a.dtype)
                              for k in range(1, count)]
        else:
            variants = [a] * count
        stacks[i] = np.stack(variants)
    return stacks


def check_vmap(e, fn: Callable) -> Result:
    if not e.meta.get("vmap_args"):
        return Result(True, skipped="the entry declares no vmap arguments")
    stacks = perturbations(e)
    axes = [0 if i in stacks else None for i in range(len(e.args))]
    batched_args = [stacks.get(i, a) for i, a in enumerate(e.args)]
    # 64-bit arguments (PyTorch/XLA's s64 ids) pass through vmap as they are with x64 on only
    wide = any(np.asarray(a).dtype.itemsize == 8 for a in e.args)
    with compat.enable_x64() if wide else contextlib.nullcontext():
        batched = [np.asarray(o) for o in as_list(jax.vmap(fn, in_axes=axes)(*batched_args))]
    looped = []
    for k in range(VMAP_BATCH):
        args = [stacks[i][k] if i in stacks else a for i, a in enumerate(e.args)]
        looped.append([np.asarray(o) for o in as_list(fn(*args))])
    want = [np.stack([run[j] for run in looped]) for j in range(len(looped[0]))]
    ok, err, msg = compare(batched, want, *_tol(e))
    return Result(ok, err, 0, msg)


def check_jit_eager(e, fn: Callable) -> Result:
    # 64-bit arguments (torch's int64 ids) pass through jax.jit as they are with x64 on;
    # with it off, jit would make them int32, which the function refuses (never converted).
    wide = any(np.asarray(a).dtype.itemsize == 8 for a in e.args)
    with compat.enable_x64() if wide else contextlib.nullcontext():
        jitted = [np.asarray(o) for o in as_list(jax.jit(fn)(*e.args))]
    with jax.disable_jit():
        eager = [np.asarray(o) for o in as_list(fn(*e.args))]
    ok, err, msg = compare(eager, jitted, *_tol(e))
    return Result(ok, err, 0, msg)


def run(e, check: str, fn: Optional[Callable]) -> Result:
    """One check; an exception is a failed check whose message names it."""
    try:
        if check == "forward":
            return check_forward(e, fn)
        if check == "grad":
            return check_grad(e, fn)
        if check == "vmap":
            return check_vmap(e, fn)
        if check == "jit_eager":
            return check_jit_eager(e, fn)
        raise ValueError(f"unknown check {check!r}")
    except Exception as exc:  # noqa: BLE001 - the report names whatever went wrong
        text = str(exc).strip().splitlines()
        return Result(False, math.inf, message=f"{type(exc).__name__}: "
                                               f"{text[0] if text else ''}"[:500])
