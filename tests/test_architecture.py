"""The module structure: one direction of dependency, core <- ops/quant <- features <- tools
(<- the package's API facade), no import cycle, `import shlo2jax` loading no tool.

Every import statement counts, those inside functions too: an import deferred to run time
is still a dependency. The module graph is read from the sources (their ASTs), so a new
module must be given a layer here.
"""

import ast
import pathlib
import subprocess
import sys
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
# The installed package -> its folder in the checkout (pyproject's package-dir).
PACKAGES = {"shlo2jax": ROOT / "shlo2jax", "shlo2jax.ops": ROOT / "ops",
            "shlo2jax.quant": ROOT / "quant"}

CORE = {
    "shlo2jax.errors", "shlo2jax.value_types", "shlo2jax.attributes", "shlo2jax.module",
    "shlo2jax.registry", "shlo2jax.translate", "shlo2jax.compat", "shlo2jax.options",
    # what the translation and the ops build on: jax's primitive machinery put to use
    "shlo2jax.gradients", "shlo2jax.primitives",
    # what the ops call into at run time: the host side of transfers, process grids and
    # their meshes (make_mesh) and process groups, decoded sharding annotations
    "shlo2jax.host_transfers", "shlo2jax.spmd.grid", "shlo2jax.spmd.mesh", "shlo2jax.spmd.groups",
    "shlo2jax.spmd.sharding_attributes",
    # the decoded program's MLIR module held without its large constants (held once)
    "shlo2jax.held_module",
    # the garbage collector paused over decoding and tracing, freed C heap handed back
    "shlo2jax.memory",
    # numpy files people did not write, their declared sizes checked before allocating
    "shlo2jax.npy",
}
FEATURES = {
    # SPMD beyond what the ops use: manual regions folded at decode, run_spmd (the package
    # itself names run_spmd)
    "shlo2jax.spmd", "shlo2jax.spmd.manual_regions", "shlo2jax.spmd.run",
    "shlo2jax.probes", "shlo2jax.program", "shlo2jax.function", "shlo2jax.assembly", "shlo2jax.loader",
    "shlo2jax.names", "shlo2jax.params",
    "shlo2jax.decoding", "shlo2jax.signatures",
}
# Folders of features: every module in them
FEATURE_PACKAGES = ("shlo2jax.sources", "shlo2jax.executables", "shlo2jax.conventions",
                    "shlo2jax.transforms")
# The package itself and the documented names of tools: `shlo2jax.testing`, `shlo2jax.export`
# The compat package's self-check translates a program as a user does: a tool over the library
SELF_CHECK = {"shlo2jax.compat.selfcheck", "shlo2jax.compat.__main__"}
API = {"shlo2jax", "shlo2jax.__main__", "shlo2jax.testing", "shlo2jax.export"}
LAYERS = ("core", "ops", "features", "tools", "api")


def layer(module: str) -> str:
    if module in CORE or module.startswith("shlo2jax.compat.") and module not in SELF_CHECK:
        return "core"
    if module.startswith(("shlo2jax.ops", "shlo2jax.quant")):
        return "ops"
    if module in FEATURES or module.startswith(FEATURE_PACKAGES):
        return "features"
    if module == "shlo2jax.tools" or module.startswith("shlo2jax.tools.") or module in SELF_CHECK:
        return "tools"
    if module in API:
        return "api"
    raise AssertionError(f"{module} has no layer: add it to tests/test_architecture.py")


def modules() -> dict:
    """Module name -> source file, for every module of the installed packages."""
    found = {}
    for package, folder in PACKAGES.items():
        for path in folder.rglob("*.py"):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            name = ".".join([package] + parts)
            if package == "shlo2jax" and parts and parts[0] in ("ops", "quant"):
                continue  # (a checkout has no shlo2jax/ops; the installed name is ops/)
            found[name] = path
    return found


def import_graph() -> dict:
    """Module -> the modules it imports (anywhere in it), among the project's own."""
    sources = modules()

    def resolve(name):  # the module an imported dotted name lives in
        while name and name not in sources:
            name = name.rpartition(".")[0]
        return name

    graph = {}
    for name, path in sources.items():
        is_package = path.name == "__init__.py"
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets.update(resolve(a.name) for a in node.names
                               if a.name.split(".")[0] == "shlo2jax")
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from the package of this module
                    package = name if is_package else name.rpartition(".")[0]
                    for _ in range(node.level - 1):
                        package = package.rpartition(".")[0]
                    base = f"{package}.{base}" if base else package
                if base.split(".")[0] != "shlo2jax":
                    continue
                for alias in node.names:  # `from pkg import submodule` imports the submodule
                    full = f"{base}.{alias.name}"
                    targets.add(full if full in sources else resolve(base))
        graph[name] = {t for t in targets if t and t != name}
    return graph


def find_cycle(graph: dict):
    """One import cycle as a list of modules (first == last), or None."""
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for target in sorted(graph[node]):
            if state.get(target) == "open":
                return stack[stack.index(target):] + [target]
            if target not in state:
                cycle = visit(target)
                if cycle:
                    return cycle
        stack.pop()
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def test_the_graph_sees_imports_inside_functions():
    graph = import_graph()
    # the loader imports the op families inside a function, at the first load
    assert "shlo2jax.ops" in graph["shlo2jax.loader"]
    # and the package's lazy attributes import the tools' documented names
    assert {"shlo2jax.tools.compare", "shlo2jax.testing", "shlo2jax.export"} <= graph["shlo2jax"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_no_import_cycle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_dependencies_point_down_the_layers():
    graph = import_graph()
    upward = [f"{a} ({layer(a)}) imports {b} ({layer(b)})"
              for a, targets in sorted(graph.items()) for b in sorted(targets)
              if LAYERS.index(layer(b)) > LAYERS.index(layer(a))]
    assert not upward, "\n".join(upward)


def _is_shared_helper(module: str) -> bool:
    return module.startswith("shlo2jax.ops.") and module.rpartition(".")[2].startswith("_")


def _ops_packages() -> list:
    """The ops package and its subpackages (ops/custom_calls/): they import their families."""
    return sorted(name for name, path in modules().items()
                  if name.startswith("shlo2jax.ops") and path.name == "__init__.py")


def test_op_families_import_only_the_shared_helpers_of_ops():
    # A family (ops/<name>.py, ops/custom_calls/<name>.py) may import the shared helper
    # modules of its package and the packages above it (ops/_<name>.py: _common, the
    # linear-algebra kernels several custom-call families compute; ops/custom_calls/_descriptors.py:
    # the descriptor reading of the legacy kernels), never another family: what two families
    # share lives once, in a module that registers nothing, so a family can be read, changed
    # or removed without touching the others.
    graph, packages = import_graph(), set(_ops_packages())
    crossing = [f"{a} imports {b}" for a, targets in sorted(graph.items())
                if a.startswith("shlo2jax.ops.") and a not in packages for b in sorted(targets)
                if b.startswith("shlo2jax.ops.")
                and not (_is_shared_helper(b) and a.startswith(b.rpartition(".")[0] + "."))]
    assert not crossing, "\n".join(crossing)


def test_shared_helpers_of_ops_import_no_family():
    graph = import_graph()
    upward = [f"{a} imports {b}" for a, targets in sorted(graph.items()) if _is_shared_helper(a)
              for b in sorted(targets) if b.startswith("shlo2jax.ops") and not _is_shared_helper(b)]
    assert not upward, "\n".join(upward)


def test_jax_internals_are_used_in_one_module():
    users = []
    for name, path in modules().items():
        if name == "shlo2jax.compat" or name.startswith("shlo2jax.compat."):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            users += [f"{name}: {n}" for n in names if n.startswith("jax._src")]
    assert not users, "\n".join(users)


@pytest.mark.parametrize("package", _ops_packages())
def test_every_op_family_is_imported_by_its_package(package):
    # importing the package registers its families (ops/<name>.py and the subpackages, like
    # ops/custom_calls/, each importing its own), and the package imports nothing else
    folder = modules()[package].parent
    families = {f"{package}.{p.stem}" for p in folder.glob("*.py")
                if not p.stem.startswith("_")}
    families |= {f"{package}.{p.parent.name}" for p in folder.glob("*/__init__.py")}
    assert import_graph()[package] == families


def _loaded_after(code: str) -> set:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code) + textwrap.dedent("""
        import sys
        print(" ".join(sorted(m for m in sys.modules if m.split(".")[0] == "shlo2jax")))
        """)], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return set(done.stdout.split())


def test_import_shlo2jax_loads_no_tool():
    loaded = _loaded_after("import shlo2jax")
    assert "shlo2jax.loader" in loaded
    tools = sorted(m for m in loaded if m == "shlo2jax.tools" or m.startswith("shlo2jax.tools."))
    assert not tools
    assert not loaded & {"shlo2jax.testing", "shlo2jax.export"}
    # the op families load with the first program
    assert not any(m == "shlo2jax.ops" or m.startswith("shlo2jax.ops.") for m in loaded)


def test_shlo2jax_compare_is_the_function():
    # `shlo2jax.compare(...)` is the backend comparison; its backends are in
    # shlo2jax.tools.compare, and `shlo2jax.testing` / `shlo2jax.export` name the tools' APIs.
    code = '''
        import shlo2jax
        from shlo2jax.tools.compare import TranslatedBackend, compare
        text = """func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
          %0 = stablehlo.negate %x : tensor<2xf32>
          func.return %0 : tensor<2xf32>
        }"""
        result = shlo2jax.compare(text, ["cpu", TranslatedBackend(name="again")])
        assert result.ok and [p.errors.ok for p in result.pairs] == [True]
        assert shlo2jax.compare is compare
        from shlo2jax.testing import assert_backends_agree
        from shlo2jax.export import export_translated
        '''
    loaded = _loaded_after(code)
    assert "shlo2jax.tools.compare" in loaded


def test_no_module_replaces_itself():
    # No callable module and no module that swaps itself in sys.modules: a module is what its
    # file defines.
    hacks = [name for name, path in modules().items()
             if "sys.modules[__name__]" in path.read_text()]
    assert not hacks, hacks


def test_no_jax_internals_module_under_its_old_name():
    # every jax internal and version difference is in the shlo2jax.compat package
    assert "shlo2jax._jax_internals" not in modules()


def test_program_stays_a_thin_facade():
    # Issue 27: program.py holds the Program and function.py the Function facade only; the
    # ways a function runs live in executables/, what its callers see in conventions/, one
    # module each. Growing past this means a piece of an executable or a source crept back in.
    for name in ("program.py", "function.py"):
        lines = (ROOT / "shlo2jax" / name).read_text().count("\n")
        assert lines < 250, f"shlo2jax/{name} has {lines} lines (under 250 keeps it a facade)"


# Issue 42: a Function is a calling convention plus an executable, each in its own layer under
# the program: neither knows the other, and neither knows the Function or the Program built on
# them (the program assembles them).
PROGRAM = {"shlo2jax.program", "shlo2jax.function", "shlo2jax.assembly", "shlo2jax.loader"}


def _in(package: str, module: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_conventions_and_executables_are_apart_below_the_program():
    graph = import_graph()
    wrong = []
    for name, targets in graph.items():
        for own, foreign in (("shlo2jax.conventions", "shlo2jax.executables"),
                             ("shlo2jax.executables", "shlo2jax.conventions")):
            if _in(own, name):
                wrong += [(name, t) for t in targets if _in(foreign, t) or t in PROGRAM]
    assert not wrong, wrong


def test_no_function_subclass_and_no_question_of_which_convention():
    # what differs between calling conventions is the conventions' own (one attribute set)
    subclasses, questions = [], []
    for name, path in modules().items():
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and any(
                    getattr(b, "id", getattr(b, "attr", None)) == "Function" for b in node.bases):
                subclasses.append((name, node.name))
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance" \
                    and "Convention" in ast.unparse(node.args[1]):
                questions.append((name, ast.unparse(node)))
    assert not subclasses and not questions, (subclasses, questions)


def test_one_decoding_call_and_one_program_construction():
    # Issue 42: one assembly path: a module is decoded (`decoding.decode`) in one place and a
    # Program is made in one place, both in shlo2jax.assembly
    calls = {"decoding.decode": [], "Program": []}
    for name, path in modules().items():
        tree = ast.parse(path.read_text(), str(path))
        imported = {(node.module, alias.name) for node in ast.walk(tree)
                    if isinstance(node, ast.ImportFrom) for alias in node.names}
        assert ("shlo2jax.decoding", "decode") not in imported, name  # (called by its module)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = ast.unparse(node.func)
            if func == "decoding.decode":
                calls[func].append(name)
            if func == "Program" and ("shlo2jax.program", "Program") in imported:
                calls[func].append(name)
    assert calls == {"decoding.decode": ["shlo2jax.assembly"],
                     "Program": ["shlo2jax.assembly"]}, calls
