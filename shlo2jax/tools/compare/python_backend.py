"""The `python=PATH` backend: the translated program under another Python's jax, in a child.

The child runs this shlo2jax's own source (its packages are found before anything that Python
has installed), so that only jax and jaxlib differ: a user upgrading jax compares the
program under the two and, with `locate`, finds the op whose results changed. The parent
writes the module's text (with its locations), the load options and the inputs to a
temporary folder; the child loads the text under the same name, runs the function as the
`cpu` backend does (or records every op's results, as `shlo2jax.probe`) and writes the
outputs and records back. Arrays travel as raw bytes in `.npz` files with their dtype's name
beside them (ml_dtypes' bfloat16 or float8 survive; nothing is pickled).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from typing import Optional

import numpy as np

from shlo2jax.errors import BackendUnavailable, OtherPythonError, UsageError
from shlo2jax.options import LoadOptions
from shlo2jax.probes import ProbeKey, ProbeRecords
from shlo2jax.tools.compare.backends import Backend, source_program
from shlo2jax.tools.exits import one_line
from shlo2jax.tools.reference import crash_reason, signal_name

PLATFORMS = ("cpu", "gpu", "tpu")

# The most of the child's last words a message quotes (a program that is not Python may echo
# the whole command line).
_REASON_CHARS = 200

# The child's exit status when jax (or another of shlo2jax's dependencies) is not there.
_MISSING = 3

# Run by the other Python: argv[1] the folders of this shlo2jax's packages (found first, so
# that the child runs the same source whatever that Python has installed), argv[2] the folder.
_BOOT = """
import importlib.util, json, os, sys
packages = json.loads(sys.argv[1])
class SameSource:
    @staticmethod
    def find_spec(name, path=None, target=None):
        where = packages.get(name)
        return where and importlib.util.spec_from_file_location(
            name, os.path.join(where, "__init__.py"), submodule_search_locations=[where])
sys.meta_path.insert(0, SameSource)
try:
    import jax, numpy
    from shlo2jax.tools.compare import python_backend
except ImportError as e:
    print(f"cannot import {e.name}", file=sys.stderr)
    sys.exit(%d)
sys.exit(python_backend.child_main(sys.argv[2]))
""" % _MISSING


def parse_spec(spec: str) -> tuple:
    """(python, platform) of a `python=PATH` or `python=PATH:PLATFORM` backend spec."""
    path = spec[len("python="):]
    head, _, tail = path.rpartition(":")
    if head and tail in PLATFORMS:
        return head, tail
    return path, "cpu"


def _interpreter(python: str) -> str:
    """The executable `python` names (a path, or a name on PATH); UsageError where none."""
    found = shutil.which(python) if python else None
    if found is None:
        raise UsageError(f"python={python}: no such executable (give the path of another "
                         "Python with jax installed, e.g. python=/path/to/venv/bin/python)")
    return found


def _package_folders() -> dict:
    import shlo2jax.ops
    import shlo2jax.quant
    return {name: list(module.__path__)[0] for name, module in
            (("shlo2jax", sys.modules["shlo2jax"]), ("shlo2jax.ops", shlo2jax.ops),
             ("shlo2jax.quant", shlo2jax.quant))}


class PythonBackend(Backend):
    """The translated program on the first `platform` device of another Python's jax (see
    the module docstring), within `timeout` seconds per run. `source`: another module
    instead (same signature), as TranslatedBackend's."""

    def __init__(self, python: str, platform: str = "cpu", name: Optional[str] = None,
                 timeout: float = 600.0, source=None, options: Optional[LoadOptions] = None):
        if platform not in PLATFORMS:
            raise UsageError(f"python={python}: unknown platform {platform!r}; choose from "
                             f"{', '.join(PLATFORMS)}")
        self.python = _interpreter(python)
        self.platform, self.timeout = platform, timeout
        self.name = name or f"python={python}" + ("" if platform == "cpu" else f":{platform}")
        self.source, self.options = source, options
        self.jax_version = ""  # the child's, once it has run
        self._programs: dict = {}

    def effective_program(self, program):
        return source_program(self, program)

    def run_program(self, program, function, inputs):
        return self._ask(program, function, inputs, None)[0]

    def probe(self, program, function, inputs, values="all"):
        return self._ask(self.effective_program(program), function, inputs, values)

    def _ask(self, program, function: str, inputs: list, values) -> tuple:
        """(outputs, ProbeRecords or None) of the child's run of `program`; `values`: None for
        a plain run, else what to record (as `shlo2jax.probe` takes it)."""
        with tempfile.TemporaryDirectory(prefix="shlo2jax-python-") as folder:
            text = program.mlir_module.operation.get_asm(large_elements_limit=None,
                                                         enable_debug_info=True)
            with open(os.path.join(folder, "module.mlir"), "w") as f:
                f.write(text)
            request = dict(source_name=program.source_name, function=function,
                           platform=self.platform, values=values,
                           options=_options_json(program.options),
                           inputs=save_arrays(os.path.join(folder, "inputs.npz"), inputs))
            with open(os.path.join(folder, "request.json"), "w") as f:
                json.dump(request, f)
            answer = self._child(folder)
            outputs = load_arrays(os.path.join(folder, "outputs.npz"), answer["outputs"])
            if values is None:
                return outputs, None
            records = ProbeRecords()
            flat = iter(load_arrays(os.path.join(folder, "records.npz"), answer["values"]))
            for key, count in zip(answer["keys"], answer["counts"]):
                records[ProbeKey(*key)] = [next(flat) for _ in range(count)]
            records.skipped = {ProbeKey(*key) for key in answer["skipped"]}
            return outputs, records

    def _child(self, folder: str) -> dict:
        """The child's answer (answer.json); its failure as one line."""
        env = dict(os.environ)
        if self.platform == "cpu":  # (no accelerator is set up for a CPU run)
            env["JAX_PLATFORMS"] = "cpu"
        command = [self.python, "-c", _BOOT, json.dumps(_package_folders()), folder]
        try:
            proc = subprocess.run(command, capture_output=True, text=True, errors="replace",
                                  env=env, timeout=self.timeout)
        except subprocess.TimeoutExpired:
            raise OtherPythonError(f"{self.python} ran past {self.timeout:g} s") from None
        except OSError as e:
            raise BackendUnavailable(f"{self.python} cannot be run: {e.strerror}") from None
        if proc.returncode == _MISSING:
            raise BackendUnavailable(
                f"{self.python}: {crash_reason(proc.stderr, 1)}: the other Python runs this "
                "shlo2jax's source and needs jax, jaxlib and numpy installed in it")
        answer_path = os.path.join(folder, "answer.json")
        reason = crash_reason(proc.stderr, 1)[:_REASON_CHARS] or "no message"
        if proc.returncode < 0:
            raise OtherPythonError(f"{self.python} crashed ({signal_name(proc.returncode)}): "
                                   f"{reason}")
        if proc.returncode != 0 or not os.path.exists(answer_path):
            raise OtherPythonError(f"{self.python} gave no answer (exit status "
                                   f"{proc.returncode}: {reason}): is it a Python with jax?")
        with open(answer_path) as f:
            answer = json.load(f)
        self.jax_version = answer["jax"]
        if "error" in answer:
            raise OtherPythonError(f"under jax {answer['jax']}: {answer['error']}")
        return answer


def _options_json(options: LoadOptions) -> dict:
    return {f.name: dict(value) if isinstance(value, Mapping) else value
            for f in dataclasses.fields(options) for value in [getattr(options, f.name)]}


def save_arrays(path: str, arrays: list) -> list:
    """`arrays` as raw bytes in an .npz (npz keeps ml_dtypes' types as opaque void); returns
    each one's [dtype name, shape] for `load_arrays`."""
    arrays = [np.asarray(a) for a in arrays]
    np.savez(path, *[np.frombuffer(np.ascontiguousarray(a).tobytes(), np.uint8)
                     for a in arrays])
    return [[a.dtype.name, list(a.shape)] for a in arrays]


def load_arrays(path: str, meta: list) -> list:
    import ml_dtypes  # (jax's dependency: the names of bfloat16, float8_*, int4)
    with np.load(path, allow_pickle=False) as saved:
        return [saved[f"arr_{i}"].view(getattr(ml_dtypes, name, name)).reshape(shape)
                for i, (name, shape) in enumerate(meta)]


def child_main(folder: str) -> int:
    """The child's side: answer.json (and outputs.npz, records.npz) for request.json."""
    import jax
    answer: dict = {"jax": jax.__version__}
    try:
        answer.update(_answer(folder))
    except Exception as e:  # (the parent reports it in one line)
        answer["error"] = f"{type(e).__name__}: {one_line(str(e))}"
    with open(os.path.join(folder, "answer.json"), "w") as f:
        json.dump(answer, f)
    return 0


def _answer(folder: str) -> dict:
    from shlo2jax.loader import load
    from shlo2jax.tools.compare.backends import TranslatedBackend, as_list
    with open(os.path.join(folder, "request.json")) as f:
        request = json.load(f)
    with open(os.path.join(folder, "module.mlir")) as f:
        text = f.read()
    program = load(text, LoadOptions(**request["options"]),
                   source_name=request["source_name"])
    inputs = load_arrays(os.path.join(folder, "inputs.npz"), request["inputs"])
    backend = TranslatedBackend(request["platform"])
    function, values = request["function"], request["values"]
    answer: dict = {}
    if values is None:
        outputs = backend.run_program(program, function, inputs)
    else:
        outputs, records = backend.probe(program, function, inputs, values=values)
        outputs = as_list(outputs)
        answer["keys"] = [list(key) for key in records]
        answer["counts"] = [len(v) for v in records.values()]
        answer["skipped"] = [list(key) for key in records.skipped]
        answer["values"] = save_arrays(os.path.join(folder, "records.npz"),
                                       [v for vs in records.values() for v in vs])
    answer["outputs"] = save_arrays(os.path.join(folder, "outputs.npz"), outputs)
    return answer
