"""`load(..., lowering="direct")` (shlo2jax/direct.py): calls and jit lower a function to the
module's own ops; grad, jvp and vmap trace the translation. Checked on real producers' exports
from the corpus against the producers' own outputs and gradients (tests/corpus/checks.py)."""

import jax
import numpy as np
import pytest

import shlo2jax
from corpus import checks
from corpus import entry as corpus_entry

from _helpers import op_counts

ENTRIES = {e.id: e for e in corpus_entry.entries()}
# One per producer, and the constructs that matter here: while loops, erf (exact GELU),
# weights baked in as constants, a convolution with batch norm, Keras' own export.
DIRECT = ["jax/mlp", "jax/physics_while", "torch/nn_gelu_mlp", "flax/linen_cnn_bn_closed",
          "tensorflow/tf_newton_while_closed", "keras/keras_cnn", "equinox/eqx_pendulum_while"]


def _load(entry_id, **options):
    e = ENTRIES[entry_id]
    program = shlo2jax.load(str(e.artifact_path), **options)
    return e, program, program[e.meta.get("function", "main")]


@pytest.mark.parametrize("entry_id", DIRECT)
def test_direct_lowering_agrees_with_the_producer(entry_id):
    e, _, fn = _load(entry_id, lowering="direct")
    assert fn.lowering == "direct", fn.lowering_note
    for check in ("forward", "grad", "vmap", "jit_eager"):
        result = checks.run(e, check, fn)
        assert result.ok or result.skipped, f"{check}: {result.message}"


def test_direct_lowering_is_the_module_itself():
    """The lowered program holds the source module's ops, no more (the translation of the
    same export re-emits constants per use and adds converts); forward values are XLA's
    own for the module, i.e. what the direct compile gives."""
    e, program, fn = _load("torch/nn_gelu_mlp", lowering="direct")
    source = op_counts(program.mlir_module.operation.get_asm(enable_debug_info=False))
    lowered = op_counts(jax.jit(fn).lower(*e.args).as_text())
    assert lowered == source
    from shlo2jax.tools.reference import xla_direct
    direct = xla_direct(program)(*e.args)
    for got, want in zip(checks.as_list(fn(*e.args)), direct):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_functions_the_direct_lowering_cannot_express_run_translated():
    e, _, fn = _load("jax/linalg_cpu", lowering="direct")  # LAPACK custom calls
    assert fn.lowering == "translate"
    assert "stablehlo.custom_call" in fn.lowering_note
    assert checks.run(e, "forward", fn).ok
    _, _, poly = _load("jax/mlp_poly", lowering="direct")  # a `?` dimension
    assert poly.lowering == "translate" and "tensor<?x" in poly.lowering_note


def test_the_translation_is_the_default():
    _, _, fn = _load("jax/mlp")
    assert fn.lowering == "translate" and fn.lowering_note == "not asked for"
    with pytest.raises(ValueError, match="lowering must be one of"):
        shlo2jax.load(str(ENTRIES["jax/mlp"].artifact_path), lowering="xla")
