"""The conformance runner: check semantics, case formats, isolation and the CI gate.

Cases are written here as small modules in temporary folders (never read from ../shared).
Value checks run in this process (`run_case`); isolation runs real worker processes.
"""

import json
import textwrap

import numpy as np
import pytest

from shlo2jax.tools import conformance as C
from shlo2jax.tools import numerics


def format_a(ty, actual, expected, check="expect_eq", expected_ty=None):
    """A testdata-style module: @main compares constants with a `check.*` custom call."""
    expected_ty = expected_ty or ty
    return textwrap.dedent(f"""\
        module @case {{
          func.func public @main() -> {ty} {{
            %0 = call @inputs() : () -> {ty}
            %1 = call @expected() : () -> {expected_ty}
            stablehlo.custom_call @check.{check}(%0, %1) {{has_side_effect = true}} : ({ty}, {expected_ty}) -> ()
            return %0 : {ty}
          }}
          func.func private @inputs() -> {ty} {{
            %0 = stablehlo.constant dense<{actual}> : {ty}
            return %0 : {ty}
          }}
          func.func private @expected() -> {expected_ty} {{
            %0 = stablehlo.constant dense<{expected}> : {expected_ty}
            return %0 : {expected_ty}
          }}
        }}
        """)


def run(text):
    return C.run_case({"id": "case.mlir", "text": text, "path": "case.mlir", "group": "."})


def outcome(text):
    return run(text)[0]


# ---------------------------------------------------------------- expect_eq

def test_right_value_passes():
    assert run(format_a("tensor<2xi32>", "[1, 2]", "[1, 2]")) == ("pass", "1 check(s) held")


def test_wrong_value_fails_and_says_where():
    result, message = run(format_a("tensor<3xi32>", "[1, 2, 3]", "[1, 5, 3]"))
    assert result == "fail"
    assert "(1,)" in message and "largest difference 3" in message


def test_wrong_dtype_is_a_type_mismatch():
    result, message = run(format_a("tensor<2xf32>", "[1.0, 2.0]", "[1.0, 2.0]",
                                   expected_ty="tensor<2xf64>"))
    assert result == "fail" and "type mismatch" in message


def test_wrong_shape_is_a_type_mismatch():
    result, message = run(format_a("tensor<2xi32>", "[1, 2]", "[[1, 2]]",
                                   expected_ty="tensor<1x2xi32>"))
    assert result == "fail" and "type mismatch" in message


def test_nan_against_number_fails_and_nan_equals_any_nan():
    assert outcome(format_a("tensor<2xf32>", "[0x7FC00000, 1.0]", "[1.0, 1.0]")) == "fail"
    # different NaN payloads and signs are still equal
    assert outcome(format_a("tensor<2xf32>", "[0x7FC00000, 1.0]", "[0xFFC00001, 1.0]")) == "pass"


def test_negative_zero_is_not_positive_zero_under_expect_eq():
    assert outcome(format_a("tensor<f64>", "-0.0", "0.0")) == "fail"
    assert outcome(format_a("tensor<f64>", "0.0", "0.0")) == "pass"
    assert outcome(format_a("tensor<f64>", "-0.0", "0.0", check="expect_almost_eq")) == "pass"


@pytest.mark.parametrize("ty,bits_a,bits_b,same", [
    ("bf16", "0x3F80", "0x3F80", True),
    ("bf16", "0x3F80", "0x3F81", False),
    ("f8E4M3FN", "0x38", "0x39", False),
    ("f8E5M2", "0x7E", "0x7F", True),   # two NaNs
])
def test_narrow_floats_compare_by_bit_pattern(ty, bits_a, bits_b, same):
    text = format_a(f"tensor<{ty}>", bits_a, bits_b)
    assert outcome(text) == ("pass" if same else "fail")


def test_complex_compares_componentwise():
    ty = "tensor<complex<f32>>"
    assert outcome(format_a(ty, "(1.0, 2.0)", "(1.0, 2.0)")) == "pass"
    assert outcome(format_a(ty, "(1.0, 2.0)", "(1.0, 3.0)")) == "fail"
    assert outcome(format_a(ty, "(1.0, 0x7FC00000)", "(1.0, 0x7FC00001)")) == "pass"


# ---------------------------------------------------------------- almost_eq and close

def test_almost_eq_default_tolerance_of_custom_call_is_1e_3():
    ty = "tensor<f64>"
    assert outcome(format_a(ty, "1.0", "1.001953125", check="expect_almost_eq")) == "fail"  # 2^-9
    assert outcome(format_a(ty, "1.0", "1.0009765625", check="expect_almost_eq")) == "pass"  # 2^-10


def dialect_almost_eq(actual, expected, tolerance=None):
    attr = f" {{tolerance = {tolerance} : f64}}" if tolerance is not None else ""
    return textwrap.dedent(f"""\
        func.func @almost() {{
          %0 = stablehlo.constant dense<{actual}> : tensor<f64>
          check.expect_almost_eq_const %0, dense<{expected}> : tensor<f64>{attr}
          func.return
        }}
        """)


def test_almost_eq_exactly_at_the_tolerance_passes_and_just_beyond_fails():
    assert outcome(dialect_almost_eq("1.0", "1.5", 0.5)) == "pass"
    result, message = run(dialect_almost_eq("0.9990234375", "1.5", 0.5))
    assert result == "fail" and "largest difference 0.500977" in message


def test_almost_eq_dialect_default_tolerance_is_1e_4():
    assert outcome(dialect_almost_eq("1.0", "1.0000610351562500")) == "pass"   # 2^-14
    assert outcome(dialect_almost_eq("1.0", "1.0001220703125")) == "fail"      # 2^-13


def test_almost_eq_non_finite_values_must_match():
    assert outcome(dialect_almost_eq("0x7FF0000000000000", "0x7FF0000000000000")) == "pass"
    assert outcome(dialect_almost_eq("0x7FF0000000000000", "0xFFF0000000000000")) == "fail"
    assert outcome(dialect_almost_eq("0x7FF8000000000000", "0x7FF8000000000001")) == "pass"
    assert outcome(dialect_almost_eq("0x7FF8000000000000", "1.0", 1e9)) == "fail"


@pytest.mark.parametrize("actual,same", [
    ("0x3F800003", True),    # 3 ULP above 1.0: the edge of [0, 3]
    ("0x3F800004", False),   # 4 ULP
    ("0x3F7FFFFD", True),    # 3 ULP below
    ("0x3F7FFFFC", False),
])
def test_close_ulp_edges_of_the_custom_call(actual, same):
    text = format_a("tensor<f32>", actual, "0x3F800000", check="expect_close")
    assert outcome(text) == ("pass" if same else "fail")


def test_close_counts_ulps_across_zero():
    ty = "tensor<2xf32>"
    assert outcome(format_a(ty, "[-0.0, 0x80000001]", "[0.0, 0x00000002]",
                            check="expect_close")) == "pass"      # 0 and 3 ULP apart
    result, message = run(format_a(ty, "[0.0, 0x80000002]", "[0.0, 0x00000002]",
                                   check="expect_close"))
    assert result == "fail" and "largest distance 4 ULP" in message


def test_close_with_the_dialect_attributes():
    text = textwrap.dedent("""\
        func.func @close() {
          %0 = stablehlo.constant dense<[1.0, 2.0]> : tensor<2xf16>
          %1 = stablehlo.constant dense<[0x3C05, 2.0]> : tensor<2xf16>
          check.expect_close %0, %1, max_ulp_difference = 5 : tensor<2xf16>, tensor<2xf16>
          func.return
        }
        """)
    assert outcome(text) == "pass"
    assert outcome(text.replace("= 5", "= 4")) == "fail"
    assert outcome(text.replace("max_ulp_difference = 5", "min_ulp_difference = 1, "
                                "max_ulp_difference = 5")) == "fail"  # 2.0 is 0 ULP away


def test_compare_directly_for_ml_dtypes_and_64_bit():
    import ml_dtypes
    a = np.array([1.0, -2.0], ml_dtypes.float8_e4m3fn)
    assert numerics.check_values("eq", a, a.copy()) is None
    b = np.array([np.finfo(np.float64).max, -np.finfo(np.float64).max])
    message = numerics.check_values("close", b, b[::-1].copy())
    assert message and "ULP" in message  # no overflow at the ends of the range


# ---------------------------------------------------------------- formats

def test_interpret_format_chunks_and_multiline_checks(tmp_path):
    (tmp_path / "ops.mlir").write_text(textwrap.dedent("""\
        // RUN: stablehlo-translate --interpret -split-input-file %s

        func.func @add_i64() {
          %0 = stablehlo.constant dense<[[1, 2], [3, 4]]> : tensor<2x2xi64>
          %1 = stablehlo.add %0, %0 : tensor<2x2xi64>
          check.expect_eq_const %1, dense<[[2, 4],
                                           [6, 8]]> : tensor<2x2xi64> // a comment
          func.return
        }

        // -----

        func.func @add_wrong() {
          %0 = stablehlo.constant dense<1> : tensor<i32>
          %1 = stablehlo.add %0, %0 : tensor<i32>
          "check.expect_eq_const"(%1) <{value = dense<3> : tensor<i32>}> : (tensor<i32>) -> ()
          func.return
        }

        // -----

        func.func @almost() {
          %0 = stablehlo.constant dense<1.0> : tensor<f64>
          %1 = stablehlo.constant dense<1.05> : tensor<f64>
          check.expect_almost_eq %0, %1, tolerance = 0.1 : tensor<f64>
          func.return
        }
        """))
    results = {r["id"]: r for r in C.run_cases(C.discover([str(tmp_path)]), 0, 60)}
    assert {k: r["outcome"] for k, r in results.items()} == {
        "ops.mlir#0": "pass", "ops.mlir#1": "fail", "ops.mlir#2": "pass"}
    assert "@add_wrong" in results["ops.mlir#1"]["message"]


def test_unsupported_is_reported_with_what_is_missing():
    text = textwrap.dedent("""\
        func.func @main() -> tensor<2xf32> {
          %0 = stablehlo.constant dense<1.0> : tensor<2xf32>
          %1 = stablehlo.custom_call @no_such.target(%0) : (tensor<2xf32>) -> tensor<2xf32>
          return %1 : tensor<2xf32>
        }
        """)
    result, message = run(text)
    assert result == "unsupported" and "no_such.target" in message


@pytest.mark.conformance
@pytest.mark.slow
def test_multi_process_cases_run_on_the_workers_devices(tmp_path):
    # Workers start with 8 host devices; a 1x2 grid whose processes see their own ids.
    (tmp_path / "grid.mlir").write_text(textwrap.dedent("""\
        func.func @f() -> tensor<ui32> {
          %0 = stablehlo.partition_id : tensor<ui32>
          return %0 : tensor<ui32>
        }
        func.func @main() {
          %r:2 = "interpreter.run_parallel"() {programs = [[@f, @f]]} : () -> (tensor<ui32>, tensor<ui32>)
          check.expect_eq_const %r#0, dense<0> : tensor<ui32>
          check.expect_eq_const %r#1, dense<1> : tensor<ui32>
          func.return
        }
        // -----
        func.func @f() -> tensor<ui32> {
          %0 = stablehlo.partition_id : tensor<ui32>
          return %0 : tensor<ui32>
        }
        func.func @main() {
          %r:2 = "interpreter.run_parallel"() {programs = [[@f, @f]]} : () -> (tensor<ui32>, tensor<ui32>)
          check.expect_eq_const %r#1, dense<0> : tensor<ui32>
          func.return
        }
        """))
    results = {r["id"]: r for r in C.run_cases(C.discover([str(tmp_path)]), 1, 120)}
    assert results["grid.mlir#0"]["outcome"] == "pass", results["grid.mlir#0"]["message"]
    assert results["grid.mlir#1"]["outcome"] == "fail"


def test_probe_cases_compare_with_the_recorded_values():
    text = textwrap.dedent("""\
        func.func @main() {
          %0 = stablehlo.constant dense<[1, 2]> : tensor<2xi64>
          %1 = stablehlo.add %0, %0 : tensor<2xi64>
          %2 = interpreter.probe %1, probe_id = "p" : tensor<2xi64>
          check.expect_serialized_eq %2, probe_id = "p" : tensor<2xi64>
          func.return
        }
        """)
    assert outcome(text) == "pass"
    missing = text.replace('serialized_eq %2, probe_id = "p" :',
                           'serialized_eq %2, probe_id = "p", iter = 1 :')
    assert missing != text
    result, message = run(missing)
    assert result == "fail" and "none for iteration 1" in message


def test_function_with_arguments_is_compared_with_the_reference_interpreter():
    text = textwrap.dedent("""\
        func.func @main(%a: tensor<3xf32>, %b: tensor<f32>, %c: tensor<complex<f64>>)
            -> (tensor<3xf32>, tensor<f32>, tensor<complex<f64>>) {
          %0 = stablehlo.add %a, %a : tensor<3xf32>
          return %0, %b, %c : tensor<3xf32>, tensor<f32>, tensor<complex<f64>>
        }
        """)
    result, message = run(text)
    assert result == "pass" and "reference interpreter" in message


DYNAMIC = textwrap.dedent("""\
    func.func public @main(%arg0: tensor<i64>, %arg1: tensor<?x2xf32>) -> tensor<2x?xf32> {
      %0 = stablehlo.add %arg1, %arg1 : tensor<?x2xf32>
      %1 = stablehlo.transpose %0, dims = [1, 0] : (tensor<?x2xf32>) -> tensor<2x?xf32>
      return %1 : tensor<2x?xf32>
    }
    """)


def test_dynamic_case_gets_consistent_sizes_and_a_refined_reference():
    import shlo2jax
    program = shlo2jax.load(DYNAMIC, strict=False)
    fn = program.entry
    inputs, n_dims, static_types = C._seeded_inputs(fn, 3)
    assert n_dims == 1 and int(inputs[0]) == 3 and inputs[1].shape == (3, 2)
    text = C.reference.interpreter_module_text(program, fn, static_types, n_dims, 3)
    (reference,) = C.reference.run_interpreter(text, inputs[1:], True, 60)
    np.testing.assert_array_equal(reference, (inputs[1] + inputs[1]).T)
    result, message = run(DYNAMIC)
    # the translation of `?` signatures lives in shlo2jax.executables.polymorphic
    assert result == "pass" or (result == "unsupported" and "dynamic" in message), message


# ---------------------------------------------------------------- isolation

PLUGIN = '''
import os, time
from shlo2jax import register_custom_call

@register_custom_call("test.abort")
def _abort(ctx, op, *args):
    os.abort()

@register_custom_call("test.hang")
def _hang(ctx, op, *args):
    time.sleep(1000)
'''


def calling(target):
    return textwrap.dedent(f"""\
        func.func @main() -> tensor<i32> {{
          %0 = stablehlo.constant dense<1> : tensor<i32>
          %1 = stablehlo.custom_call @{target}(%0) : (tensor<i32>) -> tensor<i32>
          return %1 : tensor<i32>
        }}
        """)


@pytest.mark.conformance
@pytest.mark.slow
def test_crash_and_timeout_are_errors_and_the_run_goes_on(tmp_path):
    plugin = tmp_path / "plugin.py"
    plugin.write_text(PLUGIN)
    cases = tmp_path / "cases"
    cases.mkdir()
    (cases / "a_abort.mlir").write_text(calling("test.abort"))
    (cases / "b_hang.mlir").write_text(calling("test.hang"))
    for i in range(3):
        (cases / f"c_ok{i}.mlir").write_text(format_a("tensor<i32>", str(i), str(i)))
    results = C.run_cases(C.discover([str(cases)]), 2, 8, plugins=[str(plugin)])
    by_id = {r["id"]: r for r in results}
    assert len(results) == 5
    assert by_id["a_abort.mlir"]["outcome"] == "error"
    assert "SIGABRT" in by_id["a_abort.mlir"]["message"]
    assert by_id["b_hang.mlir"]["outcome"] == "error"
    assert "timed out" in by_id["b_hang.mlir"]["message"]
    assert all(by_id[f"c_ok{i}.mlir"]["outcome"] == "pass" for i in range(3))


# ---------------------------------------------------------------- command line and gate

@pytest.fixture
def corpus(tmp_path):
    root = tmp_path / "corpus"
    (root / "good").mkdir(parents=True)
    (root / "bad").mkdir()
    (root / "good" / "one.mlir").write_text(format_a("tensor<i32>", "1", "1"))
    (root / "good" / "two.mlir").write_text(format_a("tensor<i32>", "2", "2"))
    (root / "bad" / "wrong.mlir").write_text(format_a("tensor<i32>", "2", "3"))
    return root


@pytest.mark.conformance
def test_cli_summary_json_and_filter(corpus, tmp_path, capsys):
    out = tmp_path / "out.json"
    code = C.main([str(corpus), "-j", "0", "--json", str(out)])
    lines = capsys.readouterr().out.strip().splitlines()
    assert code == 0  # no gate asked for
    assert lines[-1] == "2 passed, 1 failed, 0 skipped"
    assert "good: 2 passed, 0 failed, 0 skipped" in lines
    data = json.loads(out.read_text())
    assert {c["id"]: c["outcome"] for c in data["cases"]} == {
        "bad/wrong.mlir": "fail", "good/one.mlir": "pass", "good/two.mlir": "pass"}
    assert all(set(c) >= {"id", "outcome", "message", "seconds"} for c in data["cases"])
    C.main([str(corpus), "-j", "0", "-k", "good/t*"])
    assert capsys.readouterr().out.strip().splitlines()[-1] == "1 passed, 0 failed, 0 skipped"


@pytest.mark.conformance
def test_gate_floor_and_known_failures(corpus, tmp_path, capsys):
    floor, known = tmp_path / "floor.json", tmp_path / "known.json"
    base = [str(corpus), "-j", "0"]
    assert C.main(base + ["--write-floor", str(floor), "--write-known-failures", str(known)]) == 0
    assert json.loads(floor.read_text())["floor"] == {"bad": 0, "good": 2}
    assert list(json.loads(known.read_text())["known_failures"]) == ["bad/wrong.mlir"]
    assert C.main(base + ["--floor", str(floor), "--known-failures", str(known)]) == 0

    raised = json.loads(floor.read_text())
    raised["floor"]["good"] = 3
    floor.write_text(json.dumps(raised))
    assert C.main(base + ["--floor", str(floor), "--known-failures", str(known)]) == 1
    assert "below the floor" in capsys.readouterr().out

    raised["floor"]["good"] = 2
    floor.write_text(json.dumps(raised))
    known.write_text(json.dumps({"known_failures": {}}))
    assert C.main(base + ["--floor", str(floor), "--known-failures", str(known)]) == 1
    assert "bad/wrong.mlir: fail and not a known failure" in capsys.readouterr().out


@pytest.mark.conformance
def test_known_failures_of_one_jaxlib_hold_there_only(corpus, tmp_path, capsys):
    import jaxlib
    floor, known = tmp_path / "floor.json", tmp_path / "known.json"
    base = [str(corpus), "-j", "0", "--floor", str(floor), "--known-failures", str(known)]
    # bad/wrong.mlir fails on every jaxlib; listed for this jaxlib's release alone, the gate
    # lets it fail here and lowers its folder's floor by it (it would pass elsewhere)
    floor.write_text(json.dumps({"floor": {"bad": 1, "good": 2}}))
    minor = ".".join(jaxlib.__version__.split(".")[:2])
    for release in (jaxlib.__version__, minor):
        known.write_text(json.dumps({"known_failures": {}, "known_failures_by_jaxlib": {
            release: {"bad/wrong.mlir": "this jaxlib's XLA rounds otherwise"}}}))
        assert C.main(base) == 0, capsys.readouterr().out
        assert "(known failure)" in capsys.readouterr().out
    # another release's list does not hold here
    known.write_text(json.dumps({"known_failures": {}, "known_failures_by_jaxlib": {
        "0.1": {"bad/wrong.mlir": "an old jaxlib's XLA"}}}))
    assert C.main(base) == 1
    out = capsys.readouterr().out
    assert "bad/wrong.mlir: fail and not a known failure" in out and "below the floor" in out


# ---------------------------------------------------------------- check syntax layout

def _reflow_checks(text):
    """The check ops of `text` laid out differently: a line break and a comment after each
    comma and before the types' colon (outside brackets), blank lines between."""
    out = []
    for line in text.split("\n"):
        if not line.lstrip().startswith(("check.expect", "interpreter.print")):
            out.append(line)
            continue
        depth, pieces = 0, []
        for i, ch in enumerate(line):
            if ch in "<([{":
                depth += 1
            elif ch in ">)]}" and not (ch == ">" and line[i - 1] == "-"):
                depth -= 1
            if ch == "," and depth == 0:
                pieces.append(",  // an operand\n\n      ")
            elif ch == ":" and depth == 0:
                pieces.append("\n      // its types\n      :")
            else:
                pieces.append(ch)
        out.append("".join(pieces))
    return "\n".join(out)


def _generic_checks(text):
    import re
    return re.findall(r'"(?:check|interpreter)\.\w+"\(.*?-> \(\)', C.rewrite_check_syntax(text),
                      re.S)


def test_check_syntax_is_read_independently_of_layout(tmp_path):
    text = textwrap.dedent("""\
        func.func @almost() {
          %0 = stablehlo.constant dense<[1.0, 2.0]> : tensor<2xf64>
          %1 = stablehlo.constant dense<[1.05, 2.0]> : tensor<2xf64>
          check.expect_almost_eq %0, %1, tolerance = 0.1 : tensor<2xf64>
          check.expect_eq_const %1, dense<[1.05, 2.0]> : tensor<2xf64>
          check.expect_close %0, %0, max_ulp_difference = 0 : tensor<2xf64>, tensor<2xf64>
          func.return
        }
        """)
    reflowed = _reflow_checks(text)
    assert reflowed.count("\n") > text.count("\n") + 6  # it is laid out differently
    assert _generic_checks(reflowed) == _generic_checks(text) and len(_generic_checks(text)) == 3
    (tmp_path / "a.mlir").write_text(text)
    (tmp_path / "b.mlir").write_text(reflowed)
    results = {r["id"]: r["outcome"] for r in C.run_cases(C.discover([str(tmp_path)]), 0, 60)}
    assert results == {"a.mlir": "pass", "b.mlir": "pass"}


def test_check_statement_ends_where_nothing_continues_it():
    text = ("  check.expect_eq_const %1, dense<1> : tensor<i32> // trailing\n"
            "  %2 = stablehlo.add %1, %1 : tensor<i32>\n")
    rewritten = C.rewrite_check_syntax(text)
    assert "// trailing\n  %2 = stablehlo.add" in rewritten
    assert rewritten.startswith('  "check.expect_eq_const"(%1) {value = dense<1> : tensor<i32>}')


@pytest.mark.conformance
def test_reflowed_shared_conformance_checks_read_the_same(shared_dir):
    """Every check op of the shared corpus, reflowed, rewrites to the same generic op."""
    paths = sorted((shared_dir / "conformance").rglob("*.mlir"))
    checked = 0
    for path in paths:
        text = path.read_text()
        if "check.expect" not in text:
            continue
        original = _generic_checks(text)
        assert _generic_checks(_reflow_checks(text)) == original, path
        checked += len(original)
    assert checked > 400


# ---------------------------------------------------------------- run_parallel infeed

_RUN_PARALLEL_INFEED = textwrap.dedent("""\
    func.func @queue0() -> tensor<2xi64> {
      %0 = stablehlo.constant dense<[1, 2]> : tensor<2xi64>
      func.return %0 : tensor<2xi64>
    }
    func.func @queue1() -> tensor<2xi64> {
      %0 = stablehlo.constant dense<[3, 4]> : tensor<2xi64>
      func.return %0 : tensor<2xi64>
    }
    func.func @proc(%x: tensor<2xi64>) -> tensor<2xi64> {
      %t = stablehlo.create_token : !stablehlo.token
      %r:2 = "stablehlo.infeed"(%t) : (!stablehlo.token) -> (tensor<2xi64>, !stablehlo.token)
      %s = stablehlo.add %r#0, %x : tensor<2xi64>
      func.return %s : tensor<2xi64>
    }
    func.func @main() {
      %x = stablehlo.constant dense<[10, 20]> : tensor<2xi64>
      %y = stablehlo.constant dense<[100, 200]> : tensor<2xi64>
      %r:2 = "interpreter.run_parallel"(%x, %y) {infeed = INFEED,
          programs = [[@proc], [@proc]]} : (tensor<2xi64>, tensor<2xi64>)
          -> (tensor<2xi64>, tensor<2xi64>)
      check.expect_eq_const %r#0, dense<[11, 22]> : tensor<2xi64>
      check.expect_eq_const %r#1, dense<[103, 204]> : tensor<2xi64>
      func.return
    }
    """)


def test_run_parallel_processes_take_the_infeed_queue_in_process_order():
    assert run(_RUN_PARALLEL_INFEED.replace("INFEED", "[@queue0, @queue1]")) == \
        ("pass", "2 check(s) held")
    swapped = run(_RUN_PARALLEL_INFEED.replace("INFEED", "[@queue1, @queue0]"))
    assert swapped[0] == "fail" and "13 vs 11" in swapped[1]


def test_run_parallel_infeed_left_unread_is_an_error():
    import shlo2jax
    text = _RUN_PARALLEL_INFEED.replace("INFEED", "[@queue0, @queue1, @queue0]")
    assert run(text)[0] == "error"
    main = text[text.index("func.func @main"):]
    program = shlo2jax.load(text[:text.index("func.func @main")] + main[:main.index(
        "  check.")].replace("func.func @main()", "func.func @main() -> tensor<2xi64>")
        + "  func.return %r#0 : tensor<2xi64>\n}\n")
    with pytest.raises(Exception, match="left 1 of its infeed values unread"):
        np.asarray(program())
