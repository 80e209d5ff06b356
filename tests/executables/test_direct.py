"""`load(..., lowering="direct")` (shlo2jax/executables/direct.py): calls and jit lower a function to the
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


# What keeps a corpus entry translated (see shlo2jax.executables.direct): `?` dimensions in the
# signature, and the TopK custom call of XLA's optimised dumps (it gives a tuple, which a
# function signature cannot hold). Composites, TensorFlow's @mhlo.erf custom call, integer
# division and the mhlo ops of XLA's dumps (fusions included) are islands
# (tests/executables/test_direct_islands.py).
TRANSLATED_BECAUSE = ("a signature type the translation carries (tensor<?x",
                      "custom call @TopK is not one of jax's stable kernels")


@pytest.mark.corpus
@pytest.mark.slow
@pytest.mark.parametrize("entry_id", sorted(ENTRIES))
def test_every_corpus_entry_lowers_directly_or_says_why(entry_id):
    """Over the whole corpus: an entry that lowers directly gives the producer's outputs
    without being decoded; one that does not names one of the known reasons."""
    e = ENTRIES[entry_id]
    loaded = checks.check_load(e)[0]
    if loaded.skipped:
        pytest.skip(f"{entry_id}: {loaded.skipped}")
    if not loaded.ok:
        pytest.skip("does not load translated either (the corpus's known failures)")
    _, program, fn = _load(entry_id, lowering="direct")
    if fn.lowering == "translate":
        assert fn.lowering_note.startswith(TRANSLATED_BECAUSE), fn.lowering_note
        return
    result = checks.run(e, "forward", fn)
    assert result.ok, result.message
    # (islands, and kernels CPU lacks, a GPU export's, are decoded on their own)
    assert not program.decoded


@pytest.mark.corpus
@pytest.mark.slow
@pytest.mark.parametrize("entry_id", DIRECT)
def test_direct_lowering_agrees_with_the_producer(entry_id):
    e, _, fn = _load(entry_id, lowering="direct")
    assert fn.lowering == "direct", fn.lowering_note
    for check in ("forward", "grad", "vmap", "jit_eager"):
        result = checks.run(e, check, fn)
        assert result.ok or result.skipped, f"{check}: {result.message}"


@pytest.mark.corpus
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


@pytest.mark.corpus
def test_functions_the_direct_lowering_cannot_express_run_translated():
    e, _, poly = _load("jax/mlp_poly", lowering="direct")  # a `?` dimension
    assert poly.lowering == "translate" and "tensor<?x" in poly.lowering_note
    assert poly.islands == ()
    unreadable = corpus_entry.known_failures_of_jaxlib().get(("tensorflow/tf_special", "load"))
    if unreadable is not None:  # (torch_xla/mlp's @mhlo.erf islands: test_direct_islands)
        pytest.skip(f"tensorflow/tf_special: {unreadable}")
    e, _, fn = _load("tensorflow/tf_special", lowering="direct")  # @mhlo.erf: an island
    assert fn.lowering == "direct" and fn.lowering_note is None
    assert [island.why for island in fn.islands] == [
        "custom call @mhlo.erf is not one of jax's stable kernels"]
    assert checks.run(e, "forward", fn).ok


@pytest.mark.corpus
def test_jax_kernels_lower_as_themselves():
    """LAPACK's typed-FFI kernels, which jax.export keeps stable, lower as the module's own
    custom calls on CPU; the translation (grad) maps them to lax and agrees with jax."""
    e, program, fn = _load("jax/linalg_cpu", lowering="direct")
    assert fn.lowering == "direct", fn.lowering_note
    assert "lapack_sgetrf_ffi" in program.direct_scan.custom_call_targets
    assert "@lapack_sgetrf_ffi" in jax.jit(fn).lower(*e.args).as_text()
    for check in ("forward", "grad", "vmap"):
        result = checks.run(e, check, fn)
        assert result.ok or result.skipped, f"{check}: {result.message}"


@pytest.mark.corpus
def test_kernels_the_platform_lacks_lower_as_the_translation():
    """A CUDA export's cuSOLVER kernels lowered for CPU (which does not register them): each
    is an island there, a call of its translation (lax's linalg: LAPACK's kernels on CPU)
    inside the module's own ops, and the results are the producer's. Only those calls are
    decoded, at that lowering; `Function.islands` lists the islands of every platform only."""
    e, program, fn = _load("jax/linalg_cuda", lowering="direct")
    assert fn.lowering == "direct" and fn.islands == (), fn.lowering_note
    text = jax.jit(fn).lower(*e.args).as_text()
    assert "custom_call @cusolver" not in text and "custom_call @lapack_" in text
    kernels = program.direct_scan.kernel_outline.records
    assert text.count("call @shlo2jax_island_") == len(kernels) == 5
    result = checks.run(e, "forward", fn)
    assert result.ok, result.message
    assert not program.decoded


@pytest.mark.corpus
def test_a_first_compile_of_lapack_kernels_does_not_crash():
    """jaxlib registers its CPU LAPACK kernels with XLA at import but binds them to LAPACK only
    when jax initializes them: a fresh process whose first compile runs one (a direct
    lowering, or XLA's direct compile of the module) died of a null call before."""
    import subprocess
    import sys
    code = f"""
import numpy as np, shlo2jax
from shlo2jax.tools.reference import xla_direct
program = shlo2jax.load({str(ENTRIES["jax/qr_cpu"].artifact_path)!r}, lowering="direct")
fn = program.entry
assert fn.lowering == "direct", fn.lowering_note
args = [np.arange(a.size, dtype=a.dtype).reshape(a.shape) % 5 + 1 for a in fn.in_avals]
fn(*args)
xla_direct(shlo2jax.load({str(ENTRIES["jax/linalg_cpu"].artifact_path)!r}))
print("ok")
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


@pytest.mark.corpus
def test_a_program_that_lowers_directly_is_decoded_on_first_need():
    """Loading parses and walks the module; calls and jit never decode it; grad does (and the
    records are then the translation's, as a translated load makes them)."""
    e, program, fn = _load("torch/hf_gpt2", lowering="direct")
    assert not program.decoded
    checks.as_list(fn(*e.args))
    jax.jit(fn).lower(*e.args)
    assert not program.decoded and fn.arg_names and program.num_partitions == 1
    result = checks.run(e, "grad", fn)
    assert result.ok or result.skipped, result.message
    assert program.decoded
    translated = shlo2jax.load(str(e.artifact_path))
    assert program.op_histogram() == translated.op_histogram()


def test_an_op_without_a_rule_runs_directly_and_fails_only_where_translated(monkeypatch):
    """Where the translation lacks a rule, a program that lowers directly still loads and runs
    (XLA compiles the op); the translation, when a transformation needs it, reports the op."""
    from shlo2jax import registry
    from shlo2jax.errors import UnsupportedError
    text = """func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.cosine %x : tensor<4xf32>
  %1 = stablehlo.multiply %0, %x : tensor<4xf32>
  return %1 : tensor<4xf32>
}"""
    monkeypatch.delitem(registry.OP_RULES, "stablehlo.cosine")
    with pytest.raises(UnsupportedError, match="stablehlo.cosine"):
        shlo2jax.load(text)  # the translation: reported at load
    program = shlo2jax.load(text, lowering="direct")
    x = np.linspace(-1, 1, 4, dtype=np.float32)
    np.testing.assert_allclose(np.asarray(program(x)), np.cos(x) * x, rtol=1e-6)
    with pytest.raises(UnsupportedError, match="stablehlo.cosine"):
        jax.grad(lambda v: program(v).sum())(x)
    with pytest.raises(UnsupportedError, match="stablehlo.cosine"):  # at each use, not once
        program.module


@pytest.mark.parametrize("element", ["f32", "i2"])
def test_a_direct_load_whose_main_is_translated_reports_at_load(monkeypatch, element):
    """Asked to lower directly, a program whose @main cannot (a `?` dimension; 2-bit integers,
    which XLA:CPU crashes on, in its signature) is decoded at load, so what it lacks is
    reported then."""
    from shlo2jax import registry
    from shlo2jax.errors import UnsupportedError
    t = f"tensor<?x{element}>" if element == "f32" else f"tensor<4x{element}>"
    op = "stablehlo.cosine" if element == "f32" else "stablehlo.not"
    text = f"""func.func @main(%x: {t}) -> {t} {{
  %0 = {op} %x : {t}
  return %0 : {t}
}}"""
    program = shlo2jax.load(text, lowering="direct")
    assert program.decoded and program.entry.lowering == "translate"
    monkeypatch.delitem(registry.OP_RULES, op)
    with pytest.raises(UnsupportedError, match=op):
        shlo2jax.load(text, lowering="direct")


@pytest.mark.corpus
def test_the_translation_is_the_default():
    _, _, fn = _load("jax/mlp")
    assert fn.lowering == "translate" and fn.lowering_note == "not asked for"
    with pytest.raises(ValueError, match="lowering must be one of"):
        shlo2jax.load(str(ENTRIES["jax/mlp"].artifact_path), lowering="xla")


def test_what_xla_would_crash_on_runs_translated():
    """Integer division whose divisor XLA can fold to zero (SIGFPE at compile time: found by
    the fuzzer) and 2-bit integers (XLA CPU crashes on several ops over them) run translated:
    as islands inside a function that lowers directly, the whole function where its signature
    has them."""
    division = """func.func @main(%x: tensor<4xi32>) -> tensor<4xi32> {
  %0 = stablehlo.subtract %x, %x : tensor<4xi32>
  %1 = stablehlo.remainder %x, %0 : tensor<4xi32>
  return %1 : tensor<4xi32>
}"""
    program = shlo2jax.load(division, lowering="direct")
    assert program.entry.lowering == "direct"  # the remainder is an island
    assert program.entry.islands[0].why.startswith("integer stablehlo.remainder runs translated")
    x = np.arange(4, dtype=np.int32)
    np.testing.assert_array_equal(np.asarray(program(x)), x)  # XLA's x % 0 = x
    two_bit = shlo2jax.load("""func.func @main(%x: tensor<4xi2>) -> tensor<8xi2> {
  %0 = stablehlo.concatenate %x, %x, dim = 0 : (tensor<4xi2>, tensor<4xi2>) -> tensor<8xi2>
  return %0 : tensor<8xi2>
}""", lowering="direct")
    assert two_bit.entry.lowering == "translate" and "tensor<4xi2>" in two_bit.entry.lowering_note
    inner = shlo2jax.load("""func.func @main(%x: tensor<4xi8>) -> tensor<8xi8> {
  %0 = stablehlo.convert %x : (tensor<4xi8>) -> tensor<4xi2>
  %1 = stablehlo.concatenate %0, %0, dim = 0 : (tensor<4xi2>, tensor<4xi2>) -> tensor<8xi2>
  %2 = stablehlo.convert %1 : (tensor<8xi2>) -> tensor<8xi8>
  return %2 : tensor<8xi8>
}""", lowering="direct")  # 2-bit values inside the function: the ops giving them are islands
    assert inner.entry.lowering == "direct", inner.entry.lowering_note
    assert [i.op for i in inner.entry.islands] == ["stablehlo.convert", "stablehlo.concatenate"]
    small = np.array([-2, -1, 0, 1], dtype=np.int8)
    np.testing.assert_array_equal(np.asarray(inner(small)), np.concatenate([small, small]))
    for inexact in ("f32", "complex<f32>"):
        text = division.replace("i32", inexact).replace("remainder", "divide")
        program = shlo2jax.load(text, lowering="direct")
        assert program.entry.lowering == "direct", program.entry.lowering_note


def test_a_direct_jax_export_artifact_holds_its_weights_once():
    """Issue 32: a `jax.export` artifact loaded from bytes to lower directly holds its module
    once, as the bytecode the lowering parses (written once at load): neither jaxlib's parsed
    module nor the `Exported`'s module bytes stay; the program's `mlir_module`, its
    `exported` and `jax.grad` (the translation, decoded from the bytecode) still work."""
    from jax import export
    rng = np.random.default_rng(0)
    w1 = rng.standard_normal((16, 32)).astype(np.float32)
    w2 = rng.standard_normal((32, 4)).astype(np.float32)

    def f(x):
        return jax.numpy.tanh(x @ w1) @ w2
    x = rng.standard_normal((2, 16)).astype(np.float32)
    data = export.export(jax.jit(f))(x).serialize()
    program = shlo2jax.load(data, lowering="direct")
    main = program["main"]
    assert main.lowering == "direct" and not program.decoded
    assert program.released_mlir_module and program._held._module is None
    assert main.record.mlir_module_serialized == b""
    np.testing.assert_allclose(np.asarray(main(x)), f(x), rtol=1e-5, atol=1e-5)
    # the lowering's bytes are the program's, not a copy written at the first call
    assert main.executable.callee.bytecode is program.mlir_bytecode
    assert program._held._module is None and main.record.mlir_module_serialized == b""
    grad = jax.grad(lambda v: main(v).sum())(x)
    np.testing.assert_allclose(grad, jax.grad(lambda v: f(v).sum())(x), rtol=1e-5, atol=1e-5)
    assert program.decoded and program._held._module is None
    assert main.executable.callee.bytecode is program.mlir_bytecode
    assert "stablehlo.dot_general" in str(program.mlir_module)  # parsed again on demand
    again = shlo2jax.load(main.exported.serialize())  # the Exported rebuilt from the module
    np.testing.assert_allclose(np.asarray(again(x)), f(x), rtol=1e-5, atol=1e-5)
