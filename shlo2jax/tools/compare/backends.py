"""The ways `compare` runs a function: a `Backend` each (see the package docstring)."""

from __future__ import annotations

from typing import Callable, Optional

import jax
import numpy as np

from shlo2jax import compat
from shlo2jax import value_types as T
from shlo2jax.errors import BackendUnavailable
from shlo2jax.loader import load
from shlo2jax.options import LoadOptions
from shlo2jax.probes import probe, probe_compiler_options
from shlo2jax.program import Program
from shlo2jax.tools import reference
from shlo2jax.transforms.upcast import upcast_module_text, widen

BUILTIN_BACKENDS = ("cpu", "gpu", "tpu", "interpreter", "xla-direct", "f64")
DEFAULT_BACKENDS = ("cpu", "interpreter", "xla-direct", "f64")


class Backend:
    """One way of running a function of a module.

    Subclasses implement `run_program(program, function, inputs) -> list[np.ndarray]`, which
    runs exactly the Program given; `effective_program(program)` says which program a
    backend runs for the one compared (itself by default; the f64 backend's widened copy; a
    perturbed source). Backends that run the translation also implement
    `probe(program, function, inputs) -> (outputs, ProbeRecords)`. `run_program` raises
    BackendUnavailable when the backend cannot run the module (it is then reported as
    skipped, with the reason).
    """

    name: str = "?"
    probe = None

    def effective_program(self, program):
        """None: this backend cannot run other programs (it overrides `run` only)."""
        return program if type(self).run_program is not Backend.run_program else None

    def run_program(self, program, function: str, inputs: list) -> list:
        raise NotImplementedError

    def run(self, program, function: str, inputs: list) -> list:
        return self.run_program(self.effective_program(program), function, inputs)

    def run_recorded(self, program, function: str, inputs: list) -> list:
        """`run_program` of a program whose outputs are every op's value (locate's
        instrumented module), which runs once: where the backend can, compiled as probes are
        (see `TranslatedBackend`)."""
        return self.run_program(program, function, inputs)


class CallableBackend(Backend):
    """Any function of the inputs returning the outputs (e.g. the original JAX function)."""

    def __init__(self, name: str, fn: Callable):
        self.name, self.fn = name, fn

    def effective_program(self, program):
        return None  # opaque: it cannot run an instrumented module either

    def run(self, program, function, inputs):
        return as_list(self.fn(*inputs))


class TranslatedBackend(Backend):
    """The translated program on the first JAX device of `platform`. With `source`, a
    different module is translated (same signature): e.g. a deliberately perturbed copy, or
    the program `compare(..., against=...)` compares with; a loaded Program runs as it is."""

    def __init__(self, platform: str = "cpu", name: Optional[str] = None, source=None,
                 options: Optional[LoadOptions] = None):
        self.platform = platform
        self.name = name or platform
        self.source = source
        self.options = options  # None: the compared program's
        self._programs: dict = {}

    def device(self):
        try:
            devices = jax.devices(self.platform)
        except RuntimeError as e:
            raise BackendUnavailable(f"no {self.platform} device: {str(e).splitlines()[0]}") from None
        return devices[0]

    def effective_program(self, program):
        return source_program(self, program)

    def inputs_for(self, inputs: list) -> list:
        return inputs

    def on_device(self, program, function, inputs, call):
        """`call(function, arguments)` of `program`'s function, the inputs (as this backend
        takes them) on its device: a run, a probed run, gradients (`grad=True`)."""
        device = self.device()
        fn = program[function]
        with compat.enable_x64():  # or device_put would narrow 64-bit inputs
            args = [jax.device_put(x, device) for x in self.inputs_for(inputs)]
            with jax.default_device(device):
                return call(fn, args)

    def run_program(self, program, function, inputs):
        return self.on_device(program, function, inputs,
                              lambda fn, args: [np.asarray(o) for o in as_list(fn(*args))])

    def run_recorded(self, program, function, inputs):
        # Compiled with probe_compiler_options (XLA fuses little of a program whose every
        # op's value is an output): hf_whisper's instrumented module's compile ~10 s -> ~2 s.
        def call(fn, args):
            compiled = jax.jit(fn.call).lower(*args).compile(probe_compiler_options())
            return [np.asarray(o) for o in compiled(*args)]
        return self.on_device(program, function, inputs, call)

    def probe(self, program, function, inputs, values="all"):
        return self.on_device(self.effective_program(program), function, inputs,
                              lambda fn, args: probe(fn, *args, values=values))


def source_program(backend, program):
    """The program a backend with a `source` (and `options`, `_programs`) runs instead of
    `program`: `program` itself where it has none, the source loaded once."""
    if backend.source is None:
        return program
    if isinstance(backend.source, Program):
        return backend.source
    if "source" not in backend._programs:
        backend._programs["source"] = load(backend.source, backend.options or program.options)
    return backend._programs["source"]


class Float64Backend(TranslatedBackend):
    """The translated program with every floating-point type widened to f64 on CPU."""

    def __init__(self, platform: str = "cpu"):
        super().__init__(platform, name="f64")

    def effective_program(self, program):
        key = id(program)
        if key not in self._programs:
            self._programs[key] = (program, load(upcast_module_text(program),
                                                 program.options,
                                                 source_name=program.source_name))
        return self._programs[key][1]

    def inputs_for(self, inputs):
        return [widen(x) for x in inputs]


class InterpreterBackend(Backend):
    name = "interpreter"

    def __init__(self, timeout: float = 600.0, server=None):
        self.timeout = timeout
        self.server = server  # a reference.InterpreterServer to reuse, or None: a child per run

    def run_program(self, program, function, inputs):
        fn = program[function]
        if not all(isinstance(t, T.TensorType) and t.is_static and t.quant is None
                   for t in fn.input_types + fn.output_types):
            raise BackendUnavailable("the reference interpreter backend runs functions of "
                                     "static, non-quantized tensors only")
        text = reference.interpreter_module_text(program, fn, list(fn.input_types), 0, 0)
        text = reference.legalize_all_chlo(text)  # the interpreter has no chlo op
        try:
            outs = reference.run_interpreter(text, reference.split_complex(list(inputs)),
                                             timeout=self.timeout, server=self.server)
        except reference.InterpreterUnsupported as e:
            raise BackendUnavailable(str(e)) from None
        return reference.join_complex(outs, fn.output_types)


# Ops only a module converted from an after-optimizations HLO dump holds (sources/hlo.py).
_AFTER_OPTIMIZATIONS = frozenset({"mhlo.fusion", "mhlo.copy", "mhlo.bitcast"})


class XlaDirectBackend(Backend):
    name = "xla-direct"

    def __init__(self, platform: str = "cpu"):
        self.platform = platform

    def run_program(self, program, function, inputs):
        if function != "main":
            raise BackendUnavailable(f"XLA compiles the module's @main; @{function} is not it")
        try:
            jax.devices(self.platform)
        except RuntimeError:
            raise BackendUnavailable(f"no {self.platform} device") from None
        laid_out = sorted(set(program.module.op_histogram()) & _AFTER_OPTIMIZATIONS)
        if laid_out:
            raise BackendUnavailable(
                f"the module holds XLA's post-optimization ops ({', '.join(laid_out)}: an "
                "after-optimizations HLO dump), which XLA aborts on when it compiles them "
                "again without their layouts; compare the before_optimizations dump")
        run = reference.xla_direct(program, self.platform)
        return [np.asarray(o) for o in run(*inputs)]


def as_list(outs) -> list:
    """A function's outputs as a list of numpy arrays (one output: a list of it)."""
    if isinstance(outs, (tuple, list)):
        return [np.asarray(o) for o in outs]
    return [np.asarray(outs)]

