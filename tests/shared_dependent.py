"""Prints the pytest node ids of the tests whose behaviour depends on ../shared being beside
the checkout: every test that takes the `shared_dir` fixture (directly or through another
fixture) and the notebook tests (the notebooks fall back to examples/ without the shared
models). .ci/run runs them on a copy of the checkout with no ../shared beside it."""

import ast
import pathlib

TESTS = pathlib.Path(__file__).resolve().parent
ALWAYS = ["tests/test_notebooks.py"]


def _arguments(function) -> set:
    return {a.arg for a in function.args.args + function.args.kwonlyargs}


def shared_dependent() -> list:
    functions = []  # (node id prefix, function)
    for path in sorted(TESTS.rglob("*.py")):
        rel = path.relative_to(TESTS.parent).as_posix()
        if rel in ALWAYS:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                functions.append((rel, node))
            elif isinstance(node, ast.ClassDef):  # test classes: Class::method
                functions += [(f"{rel}::{node.name}", f) for f in node.body
                              if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))]
    needs = {"shared_dir"}
    while True:  # fixtures that take a fixture needing ../shared need it too
        more = {f.name for _, f in functions if not f.name.startswith("test_")
                and _arguments(f) & needs} - needs
        if not more:
            break
        needs |= more
    ids = [f"{rel}::{f.name}" for rel, f in functions
           if f.name.startswith("test_") and _arguments(f) & needs]
    return ALWAYS + sorted(set(ids))


if __name__ == "__main__":
    print("\n".join(shared_dependent()))
