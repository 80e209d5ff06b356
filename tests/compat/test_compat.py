"""shlo2jax.compat: each difference between jax releases resolves on the installed jax, the
check a user runs on a newer jax reports each point, and the fallbacks the older releases take
compute what the newer entry points do (tested here on whichever jax is installed, by forcing
the fallback)."""

import io
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxlib.mlir import ir

from shlo2jax import compat
from shlo2jax.compat import points, selfcheck


def test_every_point_resolves_on_the_installed_jax():
    results = selfcheck.points()
    assert {"auto_insert_reshard", "aval_to_ir_type", "enable_x64", "op.attributes iteration",
            "child process dialects", "jax internals used", "jaxpr types",
            "equation replay"} <= set(results)
    failed = {name: detail for name, (ok, detail) in results.items() if not ok}
    assert not failed


def test_check_reports_a_failing_point_without_raising(monkeypatch):
    def moved():
        raise AttributeError("module 'jax._src.core' has no attribute 'auto_insert_reshard'")
    monkeypatch.setitem(points.POINTS, "auto_insert_reshard", moved)
    out = io.StringIO()
    results = selfcheck.check(file=out, translate=False)
    assert results["auto_insert_reshard"][0] is False
    text = out.getvalue()
    assert f"jax {jax.__version__}" in text
    assert "FAIL auto_insert_reshard" in text and "has no attribute" in text
    assert f"{len(results) - 1} of {len(results)} compatibility points resolve" in text


def test_smoke_translation_runs_every_step_on_the_installed_jax():
    steps = selfcheck.smoke()
    assert list(steps) == ["load", "forward", "jit", "jax.grad", "jax.vmap", "jax.export read",
                           "jax.export write", "direct lowering"]
    assert all(ok for ok, _ in steps.values()), steps


class _BrokenReplay(compat.EquationReplay):
    """Equation replay as jax 0.12 broke it: the name every point asks for is there, the
    first staged op fails (jax 0.12 merged ClosedJaxpr into Jaxpr)."""

    def learn(self, key, args, run):
        raise AttributeError("module 'jax._src.core' has no attribute 'ClosedJaxpr'")


def test_a_release_that_breaks_translation_fails_the_check_by_name(monkeypatch):
    # Every point still resolves (the names are there), as on jax 0.12 before compat knew
    # it: the smoke translation is what fails, and it says which step and why.
    monkeypatch.setattr(compat, "equation_replay", _BrokenReplay)
    out = io.StringIO()
    results = selfcheck.check(file=out)
    text = out.getvalue()
    assert all(ok for name, (ok, _) in results.items() if not name.startswith("smoke: "))
    assert results["smoke: load"][0] is True
    assert results["smoke: forward"][0] is False
    assert "ClosedJaxpr" in results["smoke: forward"][1]
    assert "FAIL forward" in text and "broken on this jax: forward" in text
    monkeypatch.setattr(selfcheck, "check", lambda: results)
    assert selfcheck.main() == 1


def test_module_entry_point_prints_the_table_and_exits_0():
    done = subprocess.run([sys.executable, "-m", "shlo2jax.compat"], capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "compatibility points resolve" in done.stdout
    assert "8 of 8 smoke steps run" in done.stdout
    assert "FAIL" not in done.stdout
    assert "RuntimeWarning" not in done.stderr, done.stderr


def test_child_dialects_source_runs_without_jax():
    # The children (safe parse, reference interpreter) import jaxlib's bindings only.
    code = compat.CHILD_DIALECTS_SOURCE + (
        "\nimport sys\nregistry = ir.DialectRegistry()\nregister_jax_dialects(registry)\n"
        "context = ir.Context()\ncontext.append_dialect_registry(registry)\n"
        "stablehlo.register_dialect(context)\n"
        "with context:\n    ir.Module.parse('func.func @f(%a: tensor<2xf32>) -> tensor<2xf32> "
        "{ %b = stablehlo.add %a, %a : tensor<2xf32>\\n return %b : tensor<2xf32> }')\n"
        "assert 'jax' not in sys.modules, 'the child imported jax'\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr


_COMPLEX = """func.func @f() -> (tensor<2xcomplex<f32>>, tensor<3xf32>) {
  %c = stablehlo.constant dense<[(1.0,2.0),(3.0,4.0)]> : tensor<2xcomplex<f32>>
  %r = stablehlo.constant {note = "complex<f32> in a string"} dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
  return %c, %r : tensor<2xcomplex<f32>>, tensor<3xf32>
}"""


def test_attribute_items_leaves_complex_dense_data_unread():
    # Reading it kills the process on jaxlib <= 0.7 (std::terminate in the bindings).
    with compat.make_ir_context():
        module = ir.Module.parse(_COMPLEX)
        body = module.body.operations[0].regions[0].blocks[0].operations
        complex_items = dict(compat.attribute_items(body[0]))
        real_items = dict(compat.attribute_items(body[1]))
        assert complex_items == {"value": None}
        assert compat.attribute_names(body[0]) == ["value"]
        assert set(real_items) == {"value", "note"}
        assert real_items["value"] is not None and real_items["note"] is not None
        np.testing.assert_array_equal(np.asarray(real_items["value"]), [1.0, 2.0, 3.0])


def test_complex_constant_decodes_on_every_jaxlib():
    import shlo2jax
    program = shlo2jax.load(_COMPLEX)
    values, reals = program.entry()
    np.testing.assert_array_equal(np.asarray(values), [1 + 2j, 3 + 4j])
    np.testing.assert_array_equal(np.asarray(reals), [1.0, 2.0, 3.0])


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("transpose", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
def test_ormqr_fallback_applies_q(monkeypatch, left, transpose, dtype):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((5, 3)).astype(dtype)
    if np.issubdtype(dtype, np.complexfloating):
        a = a + 1j * rng.standard_normal((5, 3)).astype(dtype)
    c = rng.standard_normal((5, 4) if left else (4, 5)).astype(dtype)
    reflectors, taus = compat.lax_geqrf(jnp.asarray(a))
    # The full Q of the reflectors (tau 0 past the third: the identity there).
    q = np.asarray(jax.lax.linalg.householder_product(
        jnp.pad(reflectors, [(0, 0), (0, 2)]), jnp.pad(taus, [(0, 2)]))).astype(np.complex128)
    op = q.conj().T if transpose else q
    want = op @ c if left else c @ op
    want = want if np.issubdtype(dtype, np.complexfloating) else want.real
    monkeypatch.setattr(compat, "_HAS_ORMQR", False)
    got = compat.lax_ormqr(reflectors, taus, jnp.asarray(c), left=left, transpose=transpose)
    np.testing.assert_allclose(np.asarray(got), want.astype(dtype), rtol=1e-4, atol=1e-5)
    if hasattr(jax.lax.linalg, "ormqr"):  # the entry point itself agrees with the fallback
        monkeypatch.setattr(compat, "_HAS_ORMQR", True)
        native = compat.lax_ormqr(reflectors, taus, jnp.asarray(c), left=left,
                                  transpose=transpose)
        np.testing.assert_allclose(np.asarray(native), np.asarray(got), rtol=1e-4, atol=1e-5)


def test_enable_x64_keeps_64_bit_types():
    with compat.enable_x64():
        assert jnp.zeros(2, dtype=jnp.int64).dtype == np.int64
        assert jnp.asarray(np.float64(1.5)).dtype == np.float64


def test_lower_jaxpr_and_copied_lowerings_run_under_jit():
    # compat.copy_lowerings and lower_jaxpr (jaxpr_subcomp's keywords, the lowering table's
    # entry shape, register_lowering's inline=) are what the strong-zero primitives rest on.
    from shlo2jax.gradients import strong_zero_ops
    ops = strong_zero_ops()
    x = jnp.asarray([0.0, 1.0, 4.0], dtype=jnp.float32)
    np.testing.assert_allclose(jax.jit(ops.sqrt)(x), np.sqrt([0.0, 1.0, 4.0]))
    grad = jax.grad(lambda v: jnp.sum(ops.mul(v, v)))(x)
    np.testing.assert_allclose(grad, 2 * np.asarray(x))


_THREE_OPS = """func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.tanh %x : tensor<4xf32>
  %1 = stablehlo.add %0, %x : tensor<4xf32>
  %2 = stablehlo.exponential %1 : tensor<4xf32>
  return %2 : tensor<4xf32>
}"""


def test_a_translation_records_one_traceback_for_all_its_equations():
    """Equations staged while a function's ops are translated share the traceback of where
    the trace began (compat.pinned_traceback), where each captured its own (jax's lowering
    reads each one's frames for its location); outside it jax captures one per equation."""
    import shlo2jax
    if compat._source_info_context is None:
        pytest.skip("this jax keeps no source-info context: each equation has its own")
    program = shlo2jax.load(_THREE_OPS)
    jaxpr = jax.make_jaxpr(program)(np.ones(4, np.float32))
    (call,) = jaxpr.eqns
    inner = call.params["jaxpr"]
    eqns = getattr(inner, "jaxpr", inner).eqns
    assert [e.primitive.name for e in eqns] == ["tanh", "add", "exp_strong_zero"]
    assert len({id(e.source_info.traceback) for e in eqns}) == 1
    assert eqns[0].source_info.traceback is not None
    plain = jax.make_jaxpr(lambda x: jnp.exp(jnp.tanh(x) + x))(np.ones(4, np.float32))
    assert len({id(e.source_info.traceback) for e in plain.eqns}) == 3
    with compat.pinned_traceback():
        pinned = jax.make_jaxpr(lambda x: jnp.exp(jnp.tanh(x) + x))(np.ones(4, np.float32))
    assert len({id(e.source_info.traceback) for e in pinned.eqns}) == 1
