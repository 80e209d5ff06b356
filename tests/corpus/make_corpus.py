"""Regenerates the real-producer corpus (not collected by pytest).

    python tests/corpus/make_corpus.py --producer jax|hlo|hlo-tf|hlo-torch-xla|flax|equinox|keras|tensorflow|jax2tf|tf-graph|torch|torch_xla|pt2|all
                                       [--only NAME] [--python PATH]

Each producer's module, `tests/corpus/producers/<module>.py`, exposes
`build(corpus_root, only=None)` and runs in the generator environment that has the producer
installed (see tests/corpus/README.md): this script re-runs itself with that environment's
interpreter, found as `--python`, else `$SHLO2JAX_GEN_VENVS/<venv>/bin/python` (default
`/work/venvs`), else the current interpreter when it can import the producer. Producer modules
can `import entry` and `from producers import ...` (a finder provides both; tests/corpus
itself is kept off sys.path, where its producer folders would shadow packages).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import pathlib
import subprocess
import sys

CORPUS = pathlib.Path(__file__).resolve().parent
REPO = CORPUS.parents[1]

# producer -> (module under producers/, generator venv name, a package that venv must have)
PRODUCERS = {
    "jax": ("jax_models", "gen-jax", "jax"),
    "hlo": ("hlo_models", "gen-jax", "jax"),
    "hlo-tf": ("hlo_tf_models", "gen-tf", "tensorflow"),
    "hlo-torch-xla": ("hlo_torch_xla_models", "gen-torch-xla", "torch_xla"),
    "flax": ("flax_models", "gen-jax", "flax"),
    "equinox": ("equinox_models", "gen-jax", "equinox"),
    "keras": ("keras_models", "gen-jax", "keras"),
    "tensorflow": ("tensorflow_models", "gen-tf", "tensorflow"),
    "jax2tf": ("jax2tf_models", "gen-jax2tf", "tensorflow"),
    "tf-graph": ("tf_graph_models", "gen-tf", "tensorflow"),
    "torch": ("torch_models", "gen-torch", "torch"),
    "torch_xla": ("torch_xla_models", "gen-torch-xla", "torch_xla"),
    "pt2": ("pt2_models", "gen-pt2", "torchax"),
}


def _interpreter(producer: str, explicit: str | None) -> str:
    if explicit:
        return explicit
    _, venv, package = PRODUCERS[producer]
    venvs = pathlib.Path(os.environ.get("SHLO2JAX_GEN_VENVS", "/work/venvs"))
    candidate = venvs / venv / "bin" / "python"
    if candidate.exists():
        return str(candidate)
    if importlib.util.find_spec(package) is not None:
        return sys.executable
    raise SystemExit(f"no generator environment for {producer}: create {venvs / venv} as "
                     f"tests/corpus/README.md says, or pass --python")


class _RelativeSourceLoader(importlib.machinery.SourceFileLoader):
    """Compiles a producer module under its path relative to tests/corpus: the source locations
    jax writes into artifacts then name no checkout's absolute path, and a rebuild elsewhere
    writes the same bytes."""

    def source_to_code(self, data, path, *, _optimize=-1):
        return compile(data, os.path.relpath(path, CORPUS), "exec", dont_inherit=True,
                       optimize=_optimize)


class _ProducerFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname == "entry":
            file = CORPUS / "entry.py"
            return importlib.util.spec_from_file_location(
                fullname, file, loader=_RelativeSourceLoader(fullname, str(file)))
        if fullname != "producers" and not fullname.startswith("producers."):
            return None
        parts = fullname.split(".")
        file = CORPUS.joinpath(*parts[:-1], parts[-1] + ".py")
        is_package = fullname == "producers"
        if is_package:
            file = CORPUS / "producers" / "__init__.py"
            if not file.exists():
                return importlib.machinery.ModuleSpec(fullname, None, is_package=True)
        if not file.exists():
            return None
        return importlib.util.spec_from_file_location(
            fullname, file, loader=_RelativeSourceLoader(fullname, str(file)),
            submodule_search_locations=[str(CORPUS / "producers")] if is_package else None)


def _build_here(producer: str, only: str | None) -> None:
    sys.dont_write_bytecode = True
    # tests/corpus must not be on sys.path (nor the working directory, once it is
    # tests/corpus): its producer folders (jax/, keras/, torch/, ...) would shadow the
    # packages of those names where a venv lacks them. `entry` and `producers.*` are found by
    # this finder instead.
    sys.path[:] = [p for p in sys.path if p not in ("", ".") and
                   pathlib.Path(p).resolve() != CORPUS]
    sys.meta_path.insert(0, _ProducerFinder())
    os.chdir(CORPUS)
    module = importlib.import_module(f"producers.{PRODUCERS[producer][0]}")
    module.build(pathlib.Path("."), only=only)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--producer", required=True, choices=sorted(PRODUCERS) + ["all"])
    parser.add_argument("--only", help="build only the entry with this name")
    parser.add_argument("--python", help="the generator environment's interpreter")
    parser.add_argument("--in-process", action="store_true",
                        help="build with this interpreter (what the re-run uses)")
    args = parser.parse_args(argv)
    producers = sorted(PRODUCERS) if args.producer == "all" else [args.producer]
    if args.in_process:
        for producer in producers:
            _build_here(producer, args.only)
        return 0
    status = 0
    for producer in producers:
        python = _interpreter(producer, args.python)
        argv = ["--producer", producer, "--in-process"] + (["--only", args.only] if args.only else [])
        # Compiled under its repository-relative name (python makes a script's own path
        # absolute, and jax records the frames of this script in every artifact's locations).
        script = os.path.relpath(__file__, REPO)
        command = [python, "-c", f"import sys; sys.argv = {[script] + argv!r}; __file__ = {script!r}; "
                   f"exec(compile(open({script!r}).read(), {script!r}, 'exec'))"]
        env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONHASHSEED="0", CUDA_VISIBLE_DEVICES="",
                   PJRT_DEVICE="CPU")
        print(f"{producer}: {python}", file=sys.stderr)
        status |= subprocess.call(command, env=env, cwd=REPO)
    return status


if __name__ == "__main__":
    sys.exit(main())
