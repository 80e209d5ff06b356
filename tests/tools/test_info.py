"""`shlo2jax info`: what cannot run is listed at load, apart from what runs only as a grid of
processes (issue 30)."""

from shlo2jax.tools import cli

ALL_REDUCE_OVER_TWO_REPLICAS = """
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "stablehlo.all_reduce"(%x) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
"""


def _info(tmp_path, capsys, text: str) -> str:
    path = tmp_path / "m.mlir"
    path.write_text(text)
    assert cli.main(["info", str(path)]) == 0
    return capsys.readouterr().out


def test_a_collective_that_needs_a_grid_has_its_own_heading(tmp_path, capsys):
    out = _info(tmp_path, capsys, ALL_REDUCE_OVER_TWO_REPLICAS)
    assert "not yet supported" not in out and "every op is supported" in out
    heading = "needs a process grid (1): run with shlo2jax.spmd.run_spmd(..., num_replicas=2)\n"
    assert heading in out
    listed = out.split(heading)[1].splitlines()[0]
    assert listed.startswith("  stablehlo.all_reduce at ") and ":3:8: replica_groups [[0, 1]]" \
        in listed


def test_unsupported_and_grid_only_are_listed_apart(tmp_path, capsys):
    text = ALL_REDUCE_OVER_TWO_REPLICAS.replace(
        "  return %0", '  %1 = "foo.frobnicate"(%0) : (tensor<4xf32>) -> tensor<4xf32>\n'
        "  return %1")
    out = _info(tmp_path, capsys, text)
    unsupported = out.split("not yet supported (1):\n")[1].split("needs a process grid (1)")[0]
    assert "foo.frobnicate" in unsupported and "all_reduce" not in unsupported


def test_static_arguments_whose_results_stay_dynamic_are_listed(tmp_path, capsys):
    # tests/executables/test_polymorphic.py: NO_DIMENSION_ARGUMENT, decided at load
    out = _info(tmp_path, capsys, """
func.func @main(%x: tensor<16xf32>, %shape: tensor<2xf32>) -> tensor<?x?xf32> {
  %s = stablehlo.convert %shape : (tensor<2xf32>) -> tensor<2xi64>
  %r = stablehlo.dynamic_reshape %x, %s : (tensor<16xf32>, tensor<2xi64>) -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}
""")
    assert "not yet supported (1):\n  stablehlo.dynamic_reshape at " in out
    assert "stay dynamic after shape refinement of @main" in out
