"""The real-producer corpus (tests/corpus/<producer>/<name>/): every entry loads with every op
supported, and its forward pass, gradients, vmap and jit-vs-eager agree with the producer's own
results. The checks live in tests/corpus/checks.py (the corpus table's report, docs/guides/corpus.md, uses them too).

Known failures are listed per producer in tests/corpus/<producer>/known_failures.json; a listed
check that fails is an xfail, a listed check that passes fails (remove its line: the lists only
shrink), an unlisted failure fails.
"""

import copy
import json
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from corpus import checks
from corpus import entry as corpus_entry

pytestmark = pytest.mark.corpus

ENTRIES = corpus_entry.entries()
KNOWN = corpus_entry.known_failures()
# Known failures of particular jaxlib releases only (tests/corpus/known_failures_by_jaxlib.json:
# each record names the jaxlib releases it was measured on): an older XLA rounding differently
# (.ci/run's jax-version legs), a newer jaxlib that cannot read a producer's plain MLIR bytecode.
_BY_JAXLIB = pathlib.Path(__file__).parent / "corpus" / "known_failures_by_jaxlib.json"
KNOWN.update(corpus_entry.known_failures_of_jaxlib())
RUN_CHECKS = [c for c in checks.CHECKS if c != "load"]

_loaded = {}


def _load(e):
    missing = checks.missing_requirement(e)
    if missing:
        pytest.skip(f"{e.id}: {missing}")
    if e.id not in _loaded:
        _loaded[e.id] = checks.check_load(e)
    return _loaded[e.id]


def _written_by_newer_jax(e) -> bool:
    """Whether the entry was written by a newer jax than the installed one: outside what an
    older jax promises to read (jax.export's 3-week forward window, XLA's HLO text, VHLO)."""
    def release(v):
        return tuple(int(x) for x in v.split(".")[:3] if x.isdigit())
    written_by = e.meta["versions"].get("jax")  # (other producers' entries name no jax)
    return written_by is not None and release(written_by) > release(jax.__version__)


def _verdict(e, check, result):
    if result.skipped:
        pytest.skip(f"{e.id}: {result.skipped}")
    if not result.ok and result.message.startswith("not loaded") and _written_by_newer_jax(e):
        # The error must say why (e.g. the VHLO version against jaxlib's); the run checks the
        # entries this jax can read.
        pytest.xfail(f"written by jax {e.meta['versions']['jax']}, newer than jax "
                     f"{jax.__version__} reads: {result.message[:300]}")
    reason = KNOWN.get((e.id, check))
    if reason is not None:
        if result.ok:
            pytest.fail(f"{e.id} {check} passes, but tests/corpus/{e.meta['producer']}/"
                        f"known_failures.json lists it as failing ({reason}): remove that line")
        pytest.xfail(f"{reason} [now: {result.message}]")
    assert result.ok, f"{e.id} {check}: {result.message}"


def _ids(e):
    return e.id


def test_corpus_is_there():
    assert len(ENTRIES) >= 1, "no entry under tests/corpus/*/*/meta.json"


@pytest.mark.slow
@pytest.mark.parametrize("e", ENTRIES, ids=_ids)
def test_load(e):
    result, _ = _load(e)
    if result.ok and not result.skipped:
        # What a user sees: `shlo2jax info` on the artifact agrees.
        text = checks.cli_info(e)
        if "every op is supported" not in text:
            result = checks.Result(False, message=f"`shlo2jax info` reports:\n{text}")
    _verdict(e, "load", result)


@pytest.mark.slow
@pytest.mark.parametrize("check", RUN_CHECKS)
@pytest.mark.parametrize("e", ENTRIES, ids=_ids)
def test_entry(e, check):
    load_result, fn = _load(e)
    if load_result.skipped:
        result = load_result
    elif fn is None:
        result = checks.Result(False, message=f"not loaded: {load_result.message}")
    else:
        result = checks.run(e, check, fn)
    _verdict(e, check, result)


def test_known_failures_name_real_checks():
    ids = {e.id for e in ENTRIES}
    for (entry_id, check), reason in KNOWN.items():
        assert entry_id in ids, f"known_failures.json names {entry_id}, which is not in the corpus"
        assert check in checks.CHECKS, f"{entry_id}: unknown check {check!r}"
        assert reason.strip(), f"{entry_id} {check}: a known failure needs its reason"
    for record in json.loads(_BY_JAXLIB.read_text()):  # on every jaxlib, not only those listed
        assert record["entry"] in ids, f"{_BY_JAXLIB.name} names {record['entry']}"
        assert record["check"] in checks.CHECKS and record["reason"].strip() and record["jaxlib"]


def test_entries_are_complete():
    for e in ENTRIES:
        assert e.artifact_path.is_file() or e.artifact_path.is_dir(), e.id  # (a bundle/ folder)
        assert len(e.args) == len(e.meta["args"]), e.id
        for i, info in enumerate(e.meta["args"]):
            assert bool(info.get("grad")) == (i in e.grads), f"{e.id} arg {i}"
        for out, proj in zip(e.outputs, e.projections):
            assert (proj is not None) == corpus_entry.is_float(out.dtype), e.id


# The checks can fail: broken stand-ins for a program are caught.

def _sanity_entry():
    found = [e for e in ENTRIES if e.id == "jax/mlp"]
    assert found, "the sanity tests use the corpus entry jax/mlp"
    e = found[0]
    _, fn = _load(e)
    assert checks.check_forward(e, fn).ok and checks.check_grad(e, fn).ok
    return e, fn


def test_sanity_perturbed_golden_output_is_caught():
    e, fn = _sanity_entry()
    bad = copy.copy(e)
    bad.outputs = [o.copy() for o in e.outputs]
    bad.outputs[0].flat[3] += 1e-3 * np.abs(bad.outputs[0]).max()
    result = checks.check_forward(bad, fn)
    assert not result.ok and "max |got - want|" in result.message


def test_sanity_perturbed_golden_gradient_is_caught():
    e, fn = _sanity_entry()
    bad = copy.copy(e)
    i = min(e.grads)
    bad.grads = dict(e.grads)
    bad.grads[i] = e.grads[i] * (1 + 1e-3)
    result = checks.check_grad(bad, fn)
    assert not result.ok and f"arg {i}" in result.message


def test_sanity_nan_gradient_is_caught():
    e, fn = _sanity_entry()

    @jax.custom_vjp
    def nan_cotangent(x):
        return x
    nan_cotangent.defvjp(lambda x: (x, None), lambda _, g: (g * jnp.nan,))

    i = min(e.grads)

    def broken(*args):
        args = list(args)
        args[i] = nan_cotangent(args[i])
        return fn(*args)
    result = checks.check_grad(e, broken)
    assert not result.ok and result.nonfinite == e.grads[i].size


def test_sanity_vmap_mismatch_is_caught():
    e, fn = _sanity_entry()

    @jax.custom_batching.custom_vmap
    def shifted_under_vmap(x):
        return x

    @shifted_under_vmap.def_vmap
    def _rule(axis_size, in_batched, x):
        return x + 1e-2, in_batched[0]

    result = checks.check_vmap(e, lambda *a: shifted_under_vmap(checks.as_list(fn(*a))[0]))
    assert not result.ok


def test_nested_outputs_are_compared_leaf_by_leaf_in_the_producers_order():
    leaves = [np.full((2,), float(i), np.float32) for i in range(5)]
    a, b, c, d, f = leaves
    flat = checks.as_list((a, (b, [c]), {"y": d, "x": f}))  # a dict in its own key order
    assert [int(x[0]) for x in flat] == [0, 1, 2, 3, 4]
    found = [e for e in ENTRIES if e.id == "torch_xla/lstm_nested"]
    assert found, "this test uses the corpus entry torch_xla/lstm_nested: (y, (h_n, c_n))"
    e = found[0]
    _, fn = _load(e)
    assert checks.check_forward(e, fn).ok
    y, (h, c_) = fn(*e.args)
    swapped = checks.check_forward(e, lambda *args: (y, (c_, h)))  # same shapes, other order
    assert not swapped.ok and "output 1" in swapped.message and "output 2" in swapped.message

def test_sanity_jit_eager_mismatch_is_caught():
    e, fn = _sanity_entry()

    def differs_eagerly(*args):
        out = checks.as_list(fn(*args))[0]
        return out + (1e-2 if jax.config.jax_disable_jit else 0.0)
    assert not checks.check_jit_eager(e, differs_eagerly).ok
