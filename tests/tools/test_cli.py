"""The shlo2jax command line on the bundled example."""

import pathlib
import subprocess
import sys

import numpy as np

from shlo2jax.tools import cli

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "mlp.mlir"


def test_info(capsys):
    assert cli.main(["info", str(EXAMPLE)]) == 0
    out = capsys.readouterr().out
    assert "@main(arg_0: f32[8,16], arg_1: f32[16]" in out
    assert "stablehlo.broadcast_in_dim" in out and "every op is supported" in out


def test_info_lists_unsupported(tmp_path, capsys):
    path = tmp_path / "u.mlir"
    path.write_text("""
    func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
      %0 = "foo.frobnicate"(%x) : (tensor<2xf32>) -> tensor<2xf32>
      return %0 : tensor<2xf32>
    }""")
    assert cli.main(["info", str(path)]) == 0
    out = capsys.readouterr().out
    assert "not yet supported (1)" in out and "foo.frobnicate" in out


def test_info_ops_names_the_function_of_every_rule(capsys):
    import importlib

    from shlo2jax import registry
    assert cli.main(["info", "--ops"]) == 0
    out = capsys.readouterr().out
    listed = {}
    for line in out.splitlines():
        if line.startswith("  "):
            name, where = line.split()
            listed[name] = where
    assert listed["stablehlo.add"] == "shlo2jax.ops.elementwise:add"
    assert listed["lapack_sgetrf_ffi"] == "shlo2jax.ops.custom_calls.linalg:getrf"
    assert set(registry.OP_RULES) | set(registry.CUSTOM_CALL_RULES) <= set(listed)
    module, function = listed["stablehlo.while"].split(":")
    assert getattr(importlib.import_module(module), function) is \
        registry.OP_RULES["stablehlo.while"].handler


def test_info_needs_a_file_or_ops(capsys):
    assert cli.main(["info"]) == 2
    assert "--ops" in capsys.readouterr().err


def test_run_seeded_and_npz(tmp_path, capsys):
    out_path = tmp_path / "out.npz"
    assert cli.main(["run", str(EXAMPLE), "--output", str(out_path)]) == 0
    seeded = np.load(out_path)["output_0"]
    assert seeded.shape == (2, 4)
    np.testing.assert_allclose(seeded.sum(axis=-1), 1.0, rtol=1e-5)  # softmax rows

    rng = np.random.default_rng(3)
    shapes = [(8, 16), (16,), (16, 4), (4,), (2, 8)]
    args = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    in_path = tmp_path / "in.npz"
    np.savez(in_path, **{f"arg_{i}": a for i, a in enumerate(args)})
    assert cli.main(["run", str(EXAMPLE), "--inputs", str(in_path), "--output", str(out_path)]) == 0
    w1, b1, w2, b2, x = (a.astype(np.float64) for a in args)
    logits = np.maximum(x @ w1 + b1, 0) @ w2 + b2
    expected = np.exp(logits - logits.max(-1, keepdims=True))
    expected /= expected.sum(-1, keepdims=True)
    np.testing.assert_allclose(np.load(out_path)["output_0"], expected, rtol=1e-5, atol=1e-6)


def test_run_lowered_directly(tmp_path, capsys):
    translated, direct = tmp_path / "translated.npz", tmp_path / "direct.npz"
    assert cli.main(["run", str(EXAMPLE), "--output", str(translated)]) == 0
    capsys.readouterr()
    assert cli.main(["run", str(EXAMPLE), "--lowering", "direct", "--output", str(direct)]) == 0
    assert "lowering: direct\n" in capsys.readouterr().out
    np.testing.assert_allclose(np.load(direct)["output_0"], np.load(translated)["output_0"],
                               rtol=1e-6)


def test_module_entry_point():
    result = subprocess.run([sys.executable, "-m", "shlo2jax", "info", str(EXAMPLE)],
                            capture_output=True, text=True, check=True)
    assert "@main" in result.stdout
