"""XLA's HLO as input (issue 29): HLO text, HloModuleProto and the HloProto of `.hlo.pb` dump
files, and `--xla_dump_to` folders, made by jax at test time and checked against jax
(forward, derivatives, vmap); before- and after-optimization dumps of one program agree; the
HLO conventions each in a hand-reduced case; malformed HLO is a LoadError, never a crash."""

import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import shlo2jax
from shlo2jax.errors import ElidedDataError, LoadError, TranslationError, UnsupportedError

# The programs: run here for the goldens, and in a child process that dumps their HLO.
PRODUCER = """
import numpy as np, jax, jax.numpy as jnp

def mlp(params, x):
    (w1, b1), (w2, b2) = params
    h = jnp.tanh(x @ w1 + b1)
    return jnp.sum((h @ w2.T + b2) ** 2)

def loop(x, n):
    def body(c):
        i, x, acc = c
        return i + 1, jnp.sin(x) * 1.5, acc + x.T
    init = (0, x, jnp.zeros(x.shape[::-1], x.dtype))
    return jax.lax.while_loop(lambda c: c[0] < n, body, init)[2].sum()

r = np.random.RandomState(0)
PARAMS = ((r.randn(3, 5).astype("f4"), r.randn(5).astype("f4")),
          (r.randn(2, 5).astype("f4"), r.randn(2).astype("f4")))
X = r.randn(4, 3).astype("f4")
N = np.int32(3)
"""
_ns: dict = {}
exec(PRODUCER, _ns)
mlp, loop, PARAMS, X, N = (_ns[k] for k in ("mlp", "loop", "PARAMS", "X", "N"))
FLAT = [*PARAMS[0], *PARAMS[1], X]


def mlp_flat(w1, b1, w2, b2, x):
    return mlp(((w1, b1), (w2, b2)), x)


def close(a, b, rtol=2e-5, atol=2e-5):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=atol)


@pytest.fixture(scope="module")
def dump(tmp_path_factory):
    """An XLA dump folder of jit(mlp) and jit(loop): text and protos, before and after
    optimizations (XLA:CPU)."""
    folder = tmp_path_factory.mktemp("xla_dump")
    env = dict(os.environ, JAX_PLATFORMS="cpu",
               XLA_FLAGS=f"--xla_dump_to={folder} --xla_dump_hlo_as_text --xla_dump_hlo_as_proto")
    code = PRODUCER + "jax.jit(mlp)(PARAMS, X)\njax.jit(loop)(X, N)\n"
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=300,
                   capture_output=True)
    return folder


def dump_file(folder, module, stage, ext):
    [name] = [n for n in os.listdir(folder) if n.startswith("module_") and f".{module}." in n
              and n.endswith(f".{stage}.{ext}")]
    return folder / name


def check_mlp(program, names=("params[0][0]", "params[0][1]", "params[1][0]", "params[1][1]", "x")):
    """Forward, grad and vmap against jax; the parameters' names (jax's own in a dump; the
    text printer's differ between jax releases: None)."""
    fn = program["main"]
    assert len(fn.arg_names) == 5
    if names is not None:
        assert fn.arg_names == names
    close(fn(*FLAT), mlp(PARAMS, X), rtol=1e-5)
    argnums = tuple(range(5))
    for got, want in zip(jax.grad(fn, argnums)(*FLAT), jax.grad(mlp_flat, argnums)(*FLAT)):
        close(got, want, rtol=1e-4, atol=1e-4)
    xs = np.stack([X, X * 0.5, -X])
    close(jax.vmap(fn, (None,) * 4 + (0,))(*FLAT[:4], xs),
          jax.vmap(mlp_flat, (None,) * 4 + (0,))(*FLAT[:4], xs), rtol=1e-5)


def check_loop(program):
    fn = program["main"]
    close(fn(X, N), loop(X, N))
    # a data-dependent while loop: forward mode (jax.grad of the source is refused too)
    t = np.ones_like(X)
    close(jax.jvp(lambda x: fn(x, N), (X,), (t,))[1], jax.jvp(lambda x: loop(x, N), (X,), (t,))[1])
    xs = np.stack([X, 2 * X])
    close(jax.vmap(fn, (0, None))(xs, N), jax.vmap(loop, (0, None))(xs, N))


def test_hlo_text_from_lower():
    text = jax.jit(mlp).lower(PARAMS, X).as_text(dialect="hlo")
    assert text.startswith("HloModule")
    # (the text printer makes the names identifiers, each jax release its own way)
    check_mlp(shlo2jax.load(text), None)


def test_hlo_module_proto_from_lower():
    proto = jax.jit(loop).lower(X, N).compiler_ir("hlo").as_serialized_hlo_module_proto()
    check_loop(shlo2jax.load(bytes(proto)))


@pytest.mark.parametrize("stage", ["before_optimizations", "cpu_after_optimizations"])
@pytest.mark.parametrize("ext", [pytest.param("txt", marks=pytest.mark.slow), "hlo.pb"])
def test_dump_files_agree_with_jax(dump, stage, ext):
    """Before- and after-optimization dumps, as text and as the HloProto of `.hlo.pb` files,
    each agree with jax (so with each other)."""
    check_mlp(shlo2jax.load(dump_file(dump, "jit_mlp", stage, ext)))
    check_loop(shlo2jax.load(str(dump_file(dump, "jit_loop", stage, ext))))


def test_after_optimizations_dump_has_fusions_and_copies(dump):
    text = dump_file(dump, "jit_loop", "cpu_after_optimizations", "txt").read_text()
    assert " fusion(" in text and " copy(" in text
    ops = shlo2jax.load(text).module.op_histogram()
    assert ops["mhlo.fusion"] and ops["mhlo.copy"]


def _module_prefix(folder, name):
    """`module_NNNN.NAME` of a dump (the numbers differ between jax releases)."""
    [prefix] = {n.split(f".{name}.")[0] + f".{name}" for n in os.listdir(folder)
                if f".{name}." in n and n.startswith("module_")}
    return prefix


def test_dump_folder_lists_its_modules_and_takes_a_name(dump):
    mlp_prefix, loop_prefix = _module_prefix(dump, "jit_mlp"), _module_prefix(dump, "jit_loop")
    with pytest.raises(LoadError, match=rf"2 modules: {mlp_prefix}, {loop_prefix}; "
                                        r"name one: load\(DIR, module=NAME\)"):
        shlo2jax.load(dump)
    check_mlp(shlo2jax.load(dump, module="jit_mlp"))
    check_loop(shlo2jax.load(str(dump), module=loop_prefix))
    number = str(int(loop_prefix.split(".")[0][len("module_"):]))
    assert shlo2jax.load(dump, module=number).module.name == "jit_loop"
    with pytest.raises(LoadError, match=rf"no module 'jit_g'; it holds {mlp_prefix}"):
        shlo2jax.load(dump, module="jit_g")


def test_dump_folder_of_one_module_and_without_before_optimizations(dump, tmp_path):
    for n in os.listdir(dump):
        if ".jit_loop." in n and os.path.isfile(dump / n):
            (tmp_path / n).write_bytes((dump / n).read_bytes())
    check_loop(shlo2jax.load(tmp_path))
    for n in os.listdir(tmp_path):
        if "before_optimizations" in n:
            os.remove(tmp_path / n)
    with pytest.raises(LoadError, match="has no before_optimizations dump"):
        shlo2jax.load(tmp_path)


def test_gpu_dump_file_names_and_a_module_with_only_optimized_dumps(dump, tmp_path):
    """XLA:GPU names its optimized dumps by compute capability (`sm_8.0_gpu_after_...`); a
    module dumped only after optimizations names the files to load instead."""
    text = dump_file(dump, "jit_loop", "before_optimizations", "txt").read_text()
    (tmp_path / "module_0007.jit_g.sm_8.0_gpu_after_optimizations.txt").write_text(text)
    with pytest.raises(LoadError, match=r"module_0007\.jit_g has no before_optimizations dump "
                                        r"\(it has module_0007\.jit_g\.sm_8\.0_gpu_after"):
        shlo2jax.load(tmp_path)
    (tmp_path / "module_0007.jit_g.before_optimizations.txt").write_text(text)
    check_loop(shlo2jax.load(tmp_path, module="jit_g"))


CORPUS_HLO = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                          "corpus", "hlo")


def _corpus_dump(tmp_path, *entries):
    """A dump folder holding the corpus entries' files under the names XLA gave them."""
    import json
    for name in entries:
        folder = os.path.join(CORPUS_HLO, name)
        with open(os.path.join(folder, "meta.json")) as f:
            meta = json.load(f)
        with open(os.path.join(folder, meta["artifact"]), "rb") as f:
            (tmp_path / meta["extra"]["dump_file"]).write_bytes(f.read())
    return tmp_path


def _corpus_args(name):
    with np.load(os.path.join(CORPUS_HLO, name, "data.npz")) as data:
        return ([data[f"arg_{i}"] for i in range(sum(k.startswith("arg_") for k in data))],
                data["out_0"])


def test_tensorflow_dump_folder_with_long_dotted_module_names(tmp_path):
    """TensorFlow's dump file names: `module_0000.a_inference_f_19__XlaMustCompile_true_config_
    proto_<hash>_executor_type_<hash>_.3.before_optimizations.hlo.pb` (the module name holds a
    dot, and runs past 100 characters): one module, both stages, named by its start."""
    folder = _corpus_dump(tmp_path, "tf_mlp_before_opt", "tf_mlp_after_opt",
                          "tf_cnn_before_opt")
    names = sorted(os.listdir(folder))
    assert all(len(n) > 120 and "__XlaMustCompile_" in n for n in names), names
    with pytest.raises(LoadError, match=r"holds 2 modules: module_0000\.a_inference_cnn_"):
        shlo2jax.load(folder)
    args, want = _corpus_args("tf_mlp_before_opt")
    program = shlo2jax.load(folder, module="a_inference_f_")
    assert program.source_name.endswith(".before_optimizations.hlo.pb")
    close(program["main"](*args), want, rtol=1e-4, atol=1e-5)
    with pytest.raises(LoadError, match="holds no module 'a_inference_g'"):
        shlo2jax.load(folder, module="a_inference_g")


def test_torch_xla_dump_folder_tuple_parameter_and_s64_ids(tmp_path):
    """PyTorch/XLA's `SyncTensorsGraph.N` dumps: one tuple parameter past
    XLA_PARAMETER_WRAPPING_THREADSHOLD, flattened; s64 token ids run without x64 enabled."""
    folder = _corpus_dump(tmp_path, "xla_mlp_wrapped_before_opt", "xla_mlp_wrapped_after_opt")
    with open(os.path.join(folder, sorted(os.listdir(folder))[0])) as f:
        assert "entry_computation_layout={((" in f.readline()  # one tuple parameter
    args, want = _corpus_args("xla_mlp_wrapped_before_opt")
    program = shlo2jax.load(folder)
    assert len(program["main"].input_types) == len(args) == 7
    close(program["main"](*args), want, rtol=1e-4, atol=1e-5)
    assert not jax.config.jax_enable_x64
    args, want = _corpus_args("xla_transformer_before_opt")
    program = shlo2jax.load(os.path.join(CORPUS_HLO, "xla_transformer_before_opt", "model.hlo"))
    assert [a.dtype for a in args].count(np.int64) >= 1
    close(program["main"](*args), want, rtol=1e-4, atol=1e-5)


def test_hlo_snapshot_holding_the_module(dump, tmp_path):
    """An xla.HloSnapshot (field 1: the HloProto; field 2: argument literals) reads its module."""
    proto = dump_file(dump, "jit_loop", "before_optimizations", "hlo.pb").read_bytes()
    assert len(proto) < 1 << 14
    length = bytes([len(proto) & 0x7F | 0x80, len(proto) >> 7])  # a two-byte varint
    snapshot = b"\x0a" + length + proto + b"\x12\x00"
    path = tmp_path / "snapshot.pb"
    path.write_bytes(snapshot)
    check_loop(shlo2jax.load(path))


def test_module_names_a_dump_folder_only():
    with pytest.raises(LoadError, match="module='jit_f' names a module of an XLA dump folder"):
        shlo2jax.load(jax.jit(mlp).lower(PARAMS, X).as_text(dialect="hlo"), module="jit_f")


# ----------------------------------------------------------------------- hand-reduced cases

TUPLE_PARAMETER = """HloModule tuple_parameter, entry_computation_layout={((f32[2]{0}, s64[]))->(f32[2]{0}, s64[])}

ENTRY main {
  p = (f32[2], s64[]) parameter(0)
  a = f32[2] get-tuple-element(p), index=0
  b = s64[] get-tuple-element(p), index=1
  n = f32[2] negate(a)
  c = s64[] constant(4000000000)
  s = s64[] add(b, c)
  t = (f32[2], s64[]) tuple(n, s)
  barrier = (f32[2], s64[]) opt-barrier(t)
  x = f32[2] get-tuple-element(barrier), index=0
  y = s64[] get-tuple-element(barrier), index=1
  ROOT r = (f32[2], s64[]) tuple(x, y)
}
"""


def test_tuple_parameter_and_result_flattened_with_s64_without_x64():
    """A tuple parameter (PyTorch/XLA's parameter wrapping) and a tuple result are flattened;
    s64 values stay 64-bit although x64 is off; optimization-barrier passes values on."""
    assert not jax.config.jax_enable_x64
    fn = shlo2jax.load(TUPLE_PARAMETER)["main"]
    assert fn.arg_names == ("p", "p_1") and len(fn.result_names) == 2
    neg, big = fn(np.array([1.0, -2.0], np.float32), np.int64(5))
    close(neg, [-1.0, 2.0])
    assert big.dtype == np.int64 and int(big) == 4000000005
    close(jax.grad(lambda a: fn(a, np.int64(0))[0].sum())(np.ones(2, np.float32)), [-1.0, -1.0])


WHILE_OVER_TUPLE = """HloModule while_over_tuple, entry_computation_layout={(f32[3]{0})->f32[3]{0}}

cond {
  c = (s32[], f32[3]) parameter(0)
  i = s32[] get-tuple-element(c), index=0
  five = s32[] constant(5)
  ROOT lt = pred[] compare(i, five), direction=LT
}

body {
  b = (s32[], f32[3]) parameter(0)
  i = s32[] get-tuple-element(b), index=0
  v = f32[3] get-tuple-element(b), index=1
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  half = f32[] constant(0.5)
  h = f32[3] broadcast(half), dimensions={}
  m = f32[3] multiply(v, h)
  v1 = f32[3] cosine(m)
  ROOT t = (s32[], f32[3]) tuple(i1, v1)
}

ENTRY main {
  x = f32[3] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[3]) tuple(zero, x)
  w = (s32[], f32[3]) while(init), condition=cond, body=body
  ROOT out = f32[3] get-tuple-element(w), index=1
}
"""


def test_while_over_a_tuple():
    def source(x):
        for _ in range(5):
            x = jnp.cos(x * 0.5)
        return x
    fn = shlo2jax.load(WHILE_OVER_TUPLE)["main"]
    x = np.array([0.1, 1.0, -2.0], np.float32)
    close(fn(x), source(x))
    # a counted loop (constant start, bound and step): reverse mode too
    close(jax.grad(lambda x: fn(x).sum())(x), jax.grad(lambda x: source(x).sum())(x))
    close(jax.vmap(fn)(np.stack([x, -x])), jax.vmap(source)(np.stack([x, -x])))


FUSION_AND_COPY = """HloModule fusion_and_copy, entry_computation_layout={(f32[2,3]{1,0})->f32[3,2]{1,0}}

fused {
  p0 = f32[2,3]{1,0} parameter(0)
  e = f32[2,3]{1,0} exponential(p0)
  t = f32[3,2]{0,1} transpose(e), dimensions={1,0}
  ROOT c = f32[3,2]{1,0} copy(t)
}

ENTRY main {
  x = f32[2,3]{1,0} parameter(0)
  ROOT f = f32[3,2]{1,0} fusion(x), kind=kLoop, calls=fused
}
"""


def test_fusion_runs_as_a_call_and_copy_is_its_operand():
    fn = shlo2jax.load(FUSION_AND_COPY)["main"]
    x = np.arange(6, dtype=np.float32).reshape(2, 3) / 6
    close(fn(x), np.exp(x).T)
    close(jax.grad(lambda x: (fn(x) ** 2).sum())(x), 2 * np.exp(2 * x))


def _bitcast(operand, result):
    return (f"HloModule bitcast, entry_computation_layout={{({operand})->{result}}}\n\n"
            f"ENTRY main {{\n  p = {operand} parameter(0)\n  ROOT b = {result} bitcast(p)\n}}\n")


@pytest.mark.parametrize("operand,result,expect", [
    ("f32[2,3]{1,0}", "f32[6]{0}", lambda x: x.reshape(6)),
    ("f32[2,3]{1,0}", "f32[3,2]{0,1}", lambda x: x.T),  # same buffer, the layout transposed
    ("f32[2,3]{0,1}", "f32[3,2]{1,0}", lambda x: x.T),
    ("f32[2,3]{1,0}", "s32[2,3]{1,0}", lambda x: x.view(np.int32)),
])
def test_bitcast_follows_the_layouts(operand, result, expect):
    x = np.arange(6, dtype=np.float32).reshape(2, 3) + 0.5
    got = shlo2jax.load(_bitcast(operand, result))["main"](x)
    np.testing.assert_array_equal(np.asarray(got), expect(x))


def test_bitcast_changing_the_element_width_is_refused_naming_the_instruction():
    fn = shlo2jax.load(_bitcast("f32[2]{0}", "s16[2,2]{1,0}"), strict=False)["main"]
    with pytest.raises(TranslationError, match=r"mhlo\.bitcast at b: bitcast from float32 to "
                                               r"int16 changes the element width"):
        fn(np.ones(2, np.float32))


def _gemm(config, beta_operand=False):
    c = ", f32[2,4]{1,0}" if beta_operand else ""
    return (
        "HloModule gemm, entry_computation_layout={(f32[2,3]{1,0}, f32[4,3]{1,0}" + c + ")->f32[2,4]{1,0}}\n\n"
        "ENTRY main {\n  a = f32[2,3]{1,0} parameter(0)\n  b = f32[4,3]{1,0} parameter(1)\n"
        + ("  c = f32[2,4]{1,0} parameter(2)\n" if beta_operand else "")
        + "  gemm = (f32[2,4]{1,0}, s8[0]{0}) custom-call(a, b" + (", c" if beta_operand else "")
        + '), custom_call_target="__cublas$gemm", backend_config={"gemm_backend_config":' + config
        + "}\n  ROOT r = f32[2,4]{1,0} get-tuple-element(gemm), index=0\n}\n")


_GEMM_DIMS = ('"dot_dimension_numbers":{"lhs_contracting_dimensions":["1"],'
              '"rhs_contracting_dimensions":["1"],"lhs_batch_dimensions":[],"rhs_batch_dimensions":[]}')


def test_cublas_gemm_of_a_gpu_dump_runs_as_a_dot():
    """XLA:GPU's `__cublas$gemm`: alpha * dot(a, b) + beta * c, the dimensions from its
    backend config (here b transposed: contracting dimension 1 of both)."""
    a = np.arange(6, dtype=np.float32).reshape(2, 3) / 3
    b = np.arange(12, dtype=np.float32).reshape(4, 3) / 7
    c = np.ones((2, 4), np.float32)
    fn = shlo2jax.load(_gemm('{"alpha_real":1,"alpha_imag":0,"beta":0,' + _GEMM_DIMS +
                             ',"epilogue":"DEFAULT"}'))["main"]
    close(fn(a, b), a @ b.T)
    close(jax.grad(lambda a: fn(a, b).sum())(a), jax.grad(lambda a: (a @ b.T).sum())(a))
    fn = shlo2jax.load(_gemm('{"alpha_real":2,"alpha_imag":0,"beta":0.5,' + _GEMM_DIMS + "}",
                             beta_operand=True))["main"]
    close(fn(a, b, c), 2 * a @ b.T + 0.5 * c)


def test_gpu_custom_calls_with_no_translation_are_reported_at_load_by_instruction():
    with pytest.raises(UnsupportedError, match=r"custom_call at gemm: __cublas\$gemm epilogue "
                                               r"RELU \(only DEFAULT runs here\)"):
        shlo2jax.load(_gemm('{"alpha_real":1,"beta":0,' + _GEMM_DIMS + ',"epilogue":"RELU"}'))
    text = _gemm("{}").replace("__cublas$gemm", "__cudnn$convForward")
    with pytest.raises(UnsupportedError, match=r"custom_call at gemm: custom_call target "
                                               r"'__cudnn\$convForward' has no translation"):
        shlo2jax.load(text)


def test_xla_topk_custom_call_of_an_optimized_dump():
    """XLA:CPU's optimized module of `lax.top_k` calls its `TopK` custom call."""
    x = np.random.RandomState(1).randn(5, 9).astype(np.float32)
    text = jax.jit(lambda x: jax.lax.top_k(x, 3)).lower(x).compile().as_text()
    assert 'custom_call_target="TopK"' in text
    values, indices = shlo2jax.load(text)["main"](x)
    want_values, want_indices = jax.lax.top_k(x, 3)
    close(values, want_values)
    np.testing.assert_array_equal(np.asarray(indices), np.asarray(want_indices))


def _linalg(a, b):
    c = jnp.linalg.cholesky(a @ a.T + 3 * jnp.eye(3, dtype=a.dtype))
    q, r = jnp.linalg.qr(b)
    return c, jax.scipy.linalg.solve_triangular(c, b, lower=True), q, r


@pytest.mark.parametrize("stage", ["before", "after"])
def test_lapack_typed_ffi_custom_calls_of_a_cpu_dump(stage):
    """jax's CPU HLO calls LAPACK through typed-FFI custom calls (`lapack_spotrf_ffi`,
    `lapack_sgeqrf_ffi`, `lapack_sorgqr_ffi`, `lapack_strsm_ffi`): attributes in
    `backend_config={uplo = 76 : ui8}`, column-major `operand_layout_constraints`, results
    aliasing operands; after optimizations the column-major copies are explicit. They run as
    the linear algebra they name, forward and reverse."""
    r = np.random.RandomState(3)
    a, b = r.randn(3, 3).astype(np.float32), r.randn(3, 2).astype(np.float32)
    lowered = jax.jit(_linalg).lower(a, b)
    text = lowered.as_text(dialect="hlo") if stage == "before" else lowered.compile().as_text()
    assert 'custom_call_target="lapack_spotrf_ffi"' in text and "API_VERSION_TYPED_FFI" in text
    assert "operand_layout_constraints={f32[3,3]{0,1}}" in text and "uplo = 76" in text
    fn = shlo2jax.load(text)["main"]
    for got, want in zip(fn(a, b), _linalg(a, b)):
        close(got, want, rtol=1e-5, atol=1e-5)

    def loss(f):
        return lambda a, b: sum(jnp.sum(o * (i + 1)) for i, o in enumerate(f(a, b)))
    for got, want in zip(jax.grad(loss(fn), (0, 1))(a, b), jax.grad(loss(_linalg), (0, 1))(a, b)):
        close(got, want, rtol=1e-4, atol=1e-4)
    if stage == "before":  # XLA compiles the custom calls itself (its LAPACK kernels)
        direct = shlo2jax.load(text, lowering="direct")["main"]
        for got, want in zip(direct(a, b), _linalg(a, b)):
            close(got, want, rtol=1e-5, atol=1e-5)


def test_elided_constants_are_refused_and_a_folder_prefers_its_proto(tmp_path):
    """XLA prints large constants as `{...}` in text dumps; the parser would read zeros."""
    w = np.arange(64, dtype=np.float32).reshape(8, 8) / 64
    code = ("import numpy as np, jax, jax.numpy as jnp\n"
            "w = np.arange(64, dtype=np.float32).reshape(8, 8) / 64\n"
            "jax.jit(lambda x: jnp.tanh(x @ w))(np.ones((2, 8), np.float32))\n")
    for flags, folder in (("", tmp_path / "text"), (" --xla_dump_hlo_as_proto", tmp_path / "both")):
        env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS=f"--xla_dump_to={folder}{flags}")
        subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=300,
                       capture_output=True)
    with pytest.raises(ElidedDataError, match=r"the data of 1 constant\(s\) is elided as "
                                              r"\{\.\.\.\} \(%constant\.\d+ f32\[8,8\]"):
        shlo2jax.load(tmp_path / "text")
    x = np.ones((2, 8), np.float32)
    close(shlo2jax.load(tmp_path / "both")["main"](x), np.tanh(x @ w))


def _entry(name, params, result, body, computations=""):
    """A one-entry HLO module: `params` (shapes), `result` (a shape), the entry's body."""
    args = ", ".join(f"p{i}: {t}" for i, t in enumerate(params))
    lines = "\n".join(f"  p{i} = {t} parameter({i})" for i, t in enumerate(params))
    return (f"HloModule {name}\n\n{computations}\nENTRY main ({args}) -> {result} {{\n"
            f"{lines}\n{body}\n}}\n")


_COMPARATORS = """
gt {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  c = s32[] parameter(2)
  d = s32[] parameter(3)
  ROOT gt = pred[] compare(a, b), direction=GT
}

ge {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT ge = pred[] compare(a, b), direction=GE
}

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
"""
_V = np.array([3, 1, 4, 1, 5], np.float32)
_M = np.array([[3, 1, 4, 1, 5], [9, 2, 6, 5, 3]], np.float32)


def _batch_norm_training(x, scale, offset, eps=1e-3):
    mean, var = x.mean(0), x.var(0)
    return (x - mean) / jnp.sqrt(var + eps) * scale + offset, mean, var


# name -> (HLO text, inputs, what jax computes). Each is a form real dumps hold that
# `hlo_to_stablehlo` converts to ops with rules here.
CONVENTIONS = {
    "topk": (_entry("topk", ["f32[2,5]"], "(f32[2,3], s32[2,3])",
                    "  ROOT t = (f32[2,3], s32[2,3]) topk(p0), k=3, largest=true"),
             [_M], lambda x: tuple(jax.lax.top_k(x, 3))),
    "sort_with_a_comparator": (
        _entry("sort", ["f32[5]", "s32[5]"], "(f32[5], s32[5])",
               "  ROOT s = (f32[5], s32[5]) sort(p0, p1), dimensions={0}, is_stable=true, "
               "to_apply=gt", _COMPARATORS),
        [_V, np.arange(5, dtype=np.int32)],
        lambda v, i: (-jnp.sort(-v, stable=True), jnp.argsort(-v, stable=True).astype(np.int32))),
    "batch_norm_training": (
        _entry("bn", ["f32[4,3]", "f32[3]", "f32[3]"], "(f32[4,3], f32[3], f32[3])",
               "  ROOT bn = (f32[4,3], f32[3], f32[3]) batch-norm-training(p0, p1, p2), "
               "epsilon=0.001, feature_index=1"),
        [np.arange(12, dtype=np.float32).reshape(4, 3) ** 1.5,
         np.array([1, 2, 0.5], np.float32), np.array([0, 1, -1], np.float32)],
        _batch_norm_training),
    "batch_norm_inference": (
        _entry("bni", ["f32[4,3]", "f32[3]", "f32[3]", "f32[3]", "f32[3]"], "f32[4,3]",
               "  ROOT bn = f32[4,3] batch-norm-inference(p0, p1, p2, p3, p4), "
               "epsilon=0.001, feature_index=1"),
        [np.arange(12, dtype=np.float32).reshape(4, 3) ** 1.5, np.array([1, 2, 0.5], np.float32),
         np.array([0, 1, -1], np.float32), np.array([2, 3, 4], np.float32),
         np.array([1, 0.5, 2], np.float32)],
        lambda x, scale, offset, mean, var: (x - mean) / jnp.sqrt(var + 1e-3) * scale + offset),
    "select_and_scatter": (
        _entry("sas", ["f32[4]", "f32[2]"], "f32[4]",
               "  zero = f32[] constant(0)\n  ROOT r = f32[4] select-and-scatter(p0, p1, zero), "
               "window={size=2 stride=2}, select=ge, scatter=add", _COMPARATORS),
        [np.array([1, 3, 2, 0], np.float32), np.array([10, 20], np.float32)],
        lambda x, s: np.array([0, 10, 20, 0], np.float32)),
    "add_dependency": (
        _entry("dep", ["f32[3]"], "f32[3]",
               "  tok = token[] after-all()\n  d = f32[3] add-dependency(p0, tok)\n"
               "  ROOT n = f32[3] negate(d)"),
        [_V[:3]], lambda x: -x),
    "input_output_alias": (
        _entry("alias", ["f32[3]"], "f32[3]", "  ROOT n = f32[3] negate(p0)").replace(
            "HloModule alias", "HloModule alias, input_output_alias={ {}: (0, {}, may-alias) }"),
        [_V[:3]], lambda x: -x),
    "bounded_dynamic_dimension": (
        _entry("dyn", ["f32[<=4,2]"], "f32[<=4,2]", "  ROOT n = f32[<=4,2] exponential(p0)"),
        [np.ones((3, 2), np.float32)], jnp.exp),
    "gpu_kcustom_fusion": (  # a Triton gemm fusion of an XLA:GPU dump: its computation runs
        _entry("kcustom", ["f32[2,3]{1,0}", "f32[3,4]{1,0}"], "f32[2,4]{1,0}",
               "  ROOT f = f32[2,4]{1,0} fusion(p0, p1), kind=kCustom, calls=triton_gemm, "
               'backend_config={"fusion_backend_config":{"kind":"__triton_gemm",'
               '"triton_gemm_config":{"block_m":"16","block_n":"16","block_k":"16",'
               '"split_k":"1","num_stages":"1","num_warps":"2","num_ctas":"1"}}}',
               "triton_gemm {\n  a = f32[2,3]{1,0} parameter(0)\n  b = f32[3,4]{1,0} parameter(1)\n"
               "  ROOT d = f32[2,4]{1,0} dot(a, b), lhs_contracting_dims={1}, "
               "rhs_contracting_dims={0}\n}\n"),
        [_M[:, :3] / 4, np.arange(12, dtype=np.float32).reshape(3, 4) / 5], jnp.matmul),
    # sharding domains XLA's partitioner places: the operand
    "domain": (
        _entry("domain", ["f32[3]"], "f32[3]",
               '  d = f32[3] domain(p0), domain={kind="sharding", entry={maximal device=0}, '
               'exit={replicated}}\n  ROOT n = f32[3] sine(d)'),
        [_V[:3]], jnp.sin),
    # async pairs of optimized dumps: the operation they wrap (a one-process program here,
    # groups of one; tests/sources/test_hlo_spmd.py runs them on a grid)
    "all_reduce_start_done": (
        _entry("ars", ["f32[3]"], "f32[3]",
               "  s = f32[3] all-reduce-start(p0), channel_id=1, replica_groups={{0}}, "
               "use_global_device_ids=true, to_apply=add\n  d = f32[3] all-reduce-done(s)\n"
               "  ROOT m = f32[3] multiply(d, p0)", _COMPARATORS),
        [_V[:3]], lambda x: x * x),
    "all_gather_start_done": (
        _entry("ags", ["f32[3]"], "f32[3]",
               "  s = (f32[3], f32[3]) all-gather-start(p0), channel_id=1, replica_groups={{0}}, "
               "dimensions={0}, use_global_device_ids=true\n  ROOT d = f32[3] all-gather-done(s)"),
        [_V[:3]], lambda x: x),
    "collective_permute_start_done": (
        _entry("cps", ["f32[3]"], "f32[3]",
               "  s = (f32[3], f32[3], u32[], u32[]) collective-permute-start(p0), channel_id=1, "
               "source_target_pairs={{0,0}}\n  d = f32[3] collective-permute-done(s)\n"
               "  ROOT e = f32[3] exponential(d)"),
        [_V[:3] / 4], jnp.exp),
    "copy_start_done": (
        _entry("cs", ["f32[3]"], "f32[3]",
               "  cs = (f32[3], f32[3], u32[]) copy-start(p0)\n  d = f32[3] copy-done(cs)\n"
               "  ROOT t = f32[3] tanh(d)"),
        [_V[:3] / 4], jnp.tanh),
    # a column-major entry layout: values are the logical arrays
    "entry_computation_layout": (
        "HloModule layout, entry_computation_layout={(f32[2,3]{0,1})->f32[3,2]{0,1}}\n\n"
        "ENTRY main {\n  p0 = f32[2,3]{0,1} parameter(0)\n"
        "  t = f32[3,2]{0,1} transpose(p0), dimensions={1,0}\n"
        "  ROOT e = f32[3,2]{0,1} exponential(t)\n}\n",
        [_M[:, :3] / 4], lambda x: jnp.exp(x.T)),
    "optimization_barrier": (
        _entry("barrier", ["f32[3]"], "f32[3]",
               "  t = (f32[3]) tuple(p0)\n  b = (f32[3]) opt-barrier(t)\n"
               "  g = f32[3] get-tuple-element(b), index=0\n  ROOT c = f32[3] cosine(g)"),
        [_V[:3]], jnp.cos),
    "known_trip_count": (
        WHILE_OVER_TUPLE.replace("body=body", 'body=body, backend_config={"known_trip_count":{"n":"5"}}'),
        [np.array([0.1, 1.0, -2.0], np.float32)],
        lambda x: jax.lax.fori_loop(0, 5, lambda i, v: jnp.cos(v * 0.5), x)),
}


@pytest.mark.parametrize("name", sorted(CONVENTIONS))
def test_hlo_convention(name):
    text, inputs, source = CONVENTIONS[name]
    fn = shlo2jax.load(text)["main"]
    got, want = fn(*inputs), source(*inputs)
    for g, w in zip(*(v if isinstance(v, tuple) else (v,) for v in (got, want))):
        close(g, w, rtol=1e-4, atol=1e-4)
    floats = [i for i, x in enumerate(inputs) if x.dtype == np.float32]
    if name != "select_and_scatter":  # (the source there is a constant)
        def first(f):
            return lambda *a: jnp.sum((f(*a) if not isinstance(f(*a), tuple) else f(*a)[0]) ** 2)
        for g, w in zip(jax.grad(first(fn), floats)(*inputs), jax.grad(first(source), floats)(*inputs)):
            close(g, w, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("body,refused", [
    ("  ROOT r = u64[2] rng-get-and-update-state(), delta=1",
     r"mhlo\.xla\.rng_get_and_update_state at r: no translation"),
])
def test_stateful_instructions_are_refused_at_load_by_name(body, refused):
    result = "u64[2]" if "rng" in body else "f32[3]"
    with pytest.raises(UnsupportedError, match=refused):
        shlo2jax.load(_entry("refused", ["f32[3]"], result, body))


_GRID = """HloModule groups, replica_count=2, num_partitions=4

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY main {
  p0 = f32[3] parameter(0)
  ROOT r = f32[3] all-reduce(p0), channel_id=1, replica_groups=mesh['x'=2,'y'=2] {'x'}, use_global_device_ids=true, to_apply=add
}
"""


def test_the_header_grid_and_replica_groups_over_mesh_axes():
    """The header's replica_count/num_partitions are the program's grid (hlo_to_stablehlo drops
    them); groups XLA prints over a mesh's axes are the device ids they stand for (row-major:
    the groups along 'x' of a 2x2 mesh are {0,2} and {1,3}). tests/sources/test_hlo_spmd.py
    runs such programs on a grid."""
    program = shlo2jax.load(_GRID)
    assert (program.module.attrs["mhlo.num_replicas"], program.module.attrs["mhlo.num_partitions"]) == (2, 4)
    [op] = [op for op in program.module.functions["main"].body.ops if op.name == "stablehlo.all_reduce"]
    assert np.asarray(op.attrs["replica_groups"]).tolist() == [[0, 2], [1, 3]]


# ----------------------------------------------------------------------- malformed HLO

@pytest.mark.parametrize("text,message", [
    ("HloModule m\n\nENTRY main {\n  p = f32[] parameter(0)\n  ROOT r = f32[] frobnicate(p)\n}\n",
     r"(?s)cannot read HLO text: .*Syntax error.*frobnicate"),
    # jaxlib aborts the process on this one (an out-of-range tuple index): in the child only
    (WHILE_OVER_TUPLE.replace("index=1\n}", "index=7\n}"),
     r"cannot read HLO text: jaxlib's HLO reader aborts on this input \(SIGABRT\).*index 7"),
    ("HloModule m\n\nENTRY main {\n  p = f32[] parameter(0)\n  ROOT r = f32[] negate(\xff)\n}\n",
     r"cannot read HLO text"),
])
def test_malformed_hlo_text_is_a_load_error(text, message):
    with pytest.raises(LoadError, match=message):
        shlo2jax.load(text)


def test_non_utf8_hlo_text_is_a_load_error():
    with pytest.raises(LoadError, match=r"not UTF-8 \(byte 0xff"):
        shlo2jax.load(b"HloModule m\n\nENTRY main {\n  ROOT r = f32[] constant(\xff)\n}\n")


def test_hlo_text_with_a_lone_surrogate_is_a_load_error():
    # (`shlo2jax mutate --count 300 --releases --seed 11`, mutant 227: a UnicodeEncodeError)
    with pytest.raises(LoadError, match=r"not encodable as UTF-8 \(surrogates not allowed at "
                                        r"character 52\)"):
        shlo2jax.load("HloModule m\n\nENTRY main {\n  ROOT r = f32[] constant(\udce2)\n}\n")


def test_corrupt_hlo_proto_is_a_load_error(dump):
    data = dump_file(dump, "jit_mlp", "before_optimizations", "hlo.pb").read_bytes()
    with pytest.raises(LoadError, match=r"truncated or corrupt HLO module proto \(\d+ bytes"):
        shlo2jax.load(data[:len(data) // 2])
    with pytest.raises(LoadError, match="HLO module proto"):
        shlo2jax.load(b"\x0a\x03abc\x12\x01x")


def test_compare_runs_the_hlo_with_xla_itself(dump):
    """`compare`'s xla-direct backend compiles the converted module with XLA: it agrees with
    the translation on the before-optimization dump; an after-optimization dump (XLA aborts
    compiling its fusions and copies again without layouts) leaves that backend out."""
    for ext in ("txt", "hlo.pb"):
        result = shlo2jax.compare(dump_file(dump, "jit_loop", "before_optimizations", ext),
                                  backends=("cpu", "xla-direct"), inputs=[X, N])
        assert result.ok, result
    result = shlo2jax.compare(dump_file(dump, "jit_loop", "cpu_after_optimizations", "txt"),
                              backends=("cpu", "xla-direct"), inputs=[X, N])
    assert "post-optimization ops (mhlo.copy, mhlo.fusion" in result.table()


def test_command_line_reads_dump_folders_with_module(dump, tmp_path, capsys, monkeypatch):
    from shlo2jax.tools import cli
    monkeypatch.delenv("SHLO2JAX_DEBUG", raising=False)
    assert cli.main(["info", str(dump)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("shlo2jax: error: ") and err.count("\n") == 1
    assert (f"2 modules: {_module_prefix(dump, 'jit_mlp')}, {_module_prefix(dump, 'jit_loop')}"
            in err and "--module NAME" in err)
    assert cli.main(["info", str(dump), "--module", "jit_loop"]) == 0
    assert "@main(x: f32[4,3], n: i32[]) -> (f32[])" in capsys.readouterr().out
    inputs = tmp_path / "inputs.npz"
    np.savez(inputs, x=X, n=N)
    out = tmp_path / "out.npz"
    assert cli.main(["run", str(dump), "--module", "jit_loop", "--inputs", str(inputs),
                     "--output", str(out)]) == 0
    close(np.load(out)["output_0"], loop(X, N))
    capsys.readouterr()
    assert cli.main(["compare", str(dump), "--module", "jit_mlp", "--backends", "cpu,xla-direct"]) == 0
    assert "backends agree" in capsys.readouterr().out


def test_mutants_of_hlo_text_never_crash():
    """`shlo2jax mutate --hlo` mutates the corpus's HLO text too: each mutant loads (and
    runs), or is a library error, in the API and on the command line, and never kills its
    worker."""
    from shlo2jax.tools.mutate import default_sources, mutants, run_mutants
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    sources = [s for s in default_sources(root, hlo=True) if s.name.endswith("model.hlo")]
    assert len(sources) >= 14 + 13  # jax's 14, TensorFlow's compiler-IR text, PyTorch/XLA's 12
    sample = [s for s in sources if "transformer" not in s.name]
    report = run_mutants(mutants(sample, 8, seed=5), jobs=1, timeout=120)
    assert not report.failures, report.failures
    assert sum(report.outcomes.values()) == 8


def test_mutants_of_hlo_protos_never_crash():
    """The corpus's HLO protos (TensorFlow's `.hlo.pb` dump files) are mutation seeds too,
    mutated as bytes: each mutant loads (and runs) or is a library error, never a crash."""
    from shlo2jax.tools.mutate import default_sources, mutants, run_mutants
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    sources = [s for s in default_sources(root, hlo=True) if s.name.endswith("model.hlo.pb")]
    assert len(sources) >= 12 and all(isinstance(s.data, bytes) for s in sources)
    report = run_mutants(mutants(sources, 8, seed=7), jobs=1, timeout=120)
    assert not report.failures, report.failures
    assert sum(report.outcomes.values()) == 8


def test_constants_lift_and_locations_are_instruction_names():
    """HLO constants are baked weights (`lift_params`); probes and `compare --locate` name
    HLO instructions."""
    w = np.asarray(PARAMS[0][0])
    text = jax.jit(lambda x: jnp.tanh(x @ w)).lower(X).as_text(dialect="hlo")
    program = shlo2jax.load(text)
    params, apply = shlo2jax.lift_params(program)
    [(name, value)] = params.items()
    np.testing.assert_array_equal(np.asarray(value), w)
    close(apply(params, X), np.tanh(X @ w))
    close(jax.grad(lambda p: apply(p, X).sum())(params)[name],
          jax.grad(lambda v: jnp.tanh(X @ v).sum())(w))
    names = {line.split("=")[0].strip().lstrip("%").replace("ROOT ", "")
             for line in text.splitlines() if " dot(" in line or " tanh(" in line}
    assert len(names) == 2  # (each jax release numbers its instructions its own way)
    _, recorded = shlo2jax.probe(program["main"], X)
    assert names <= {str(k.location) for k in recorded}
    result = shlo2jax.compare(text, backends=("cpu", "f64"), inputs=[X], locate=True,
                              rtol=0, atol=0)
    assert result.located and result.located[0].location in names
