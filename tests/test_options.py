"""LoadOptions: one frozen object, built and validated by `load()`, owned by the Program, passed
on unchanged by every tool that loads the program again."""

import dataclasses
import pathlib
import re

import numpy as np
import pytest

import shlo2jax
from shlo2jax import LoadOptions

ROOT = pathlib.Path(__file__).resolve().parents[1]
MLP = ROOT / "examples" / "mlp.mlir"


def test_load_builds_one_frozen_object_the_program_owns():
    program = shlo2jax.load(MLP, gradients="lax", max_loop_trips={"loc": 3})
    assert isinstance(program.options, LoadOptions)
    assert program.options.gradients == "lax" and program.options.loop_bound("loc") == 3
    assert program.options.loop_bound("elsewhere") is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        program.options.strict = False  # type: ignore[misc]


def test_an_options_object_and_keywords_that_override_it():
    options = LoadOptions(gradients="lax", seed=3)
    program = shlo2jax.load(MLP, options, strict=False)
    assert program.options == dataclasses.replace(options, strict=False)
    assert shlo2jax.load(MLP, options).options is options


def test_a_mapping_of_loop_bounds_is_copied():
    trips = {"a": 1}
    options = LoadOptions(max_loop_trips=trips)
    trips["a"] = 99
    assert options.loop_bound("a") == 1
    assert hash(options) == hash(LoadOptions(max_loop_trips={"a": 1}))


@pytest.mark.parametrize("bad, error", [
    (dict(gradients="exact"), ValueError), (dict(lowering="fast"), ValueError),
    (dict(max_loop_trips=-1), ValueError), (dict(max_loop_trips={"x": 1.5}), ValueError),
    (dict(strict="yes"), TypeError), (dict(seed=1.0), TypeError), (dict(seed=True), TypeError),
    (dict(placeholder_data=1), TypeError), (dict(untrusted="yes"), TypeError),
])
def test_bad_options_are_refused_before_reading_the_source(bad, error):
    with pytest.raises(error):
        shlo2jax.load("this is not read", **bad)


def test_an_unknown_option_is_named():
    with pytest.raises(TypeError, match="unknown option.*bogus.*LoadOptions"):
        shlo2jax.load(MLP, bogus=1)
    with pytest.raises(TypeError, match="LoadOptions"):
        shlo2jax.load(MLP, {"strict": False})


def test_tools_reload_with_the_programs_options():
    from shlo2jax.tools.compare import Float64Backend, TranslatedBackend
    program = shlo2jax.load(MLP, gradients="lax", strict=False)
    widened = Float64Backend().effective_program(program)
    assert widened.options is program.options
    again = TranslatedBackend(source=str(MLP)).effective_program(program)
    assert again.options is program.options
    args = [np.ones(a.shape, a.dtype) for a in program.entry.in_avals]
    np.testing.assert_allclose(np.asarray(again(*args)), np.asarray(program(*args)))


def test_no_option_is_read_with_a_default_outside_load_options():
    # One place declares the options and their defaults: nothing passes them around as a dict
    # or reads one with a fallback.
    pattern = re.compile(r"load_options|\.get\(\"(strict|seed|gradients|lowering|producer_vjp|"
                         r"placeholder_data|max_loop_trips)\"")
    found = [f"{p.relative_to(ROOT)}:{i}" for folder in ("shlo2jax", "ops", "quant")
             for p in (ROOT / folder).rglob("*.py")
             for i, line in enumerate(p.read_text().splitlines(), 1) if pattern.search(line)]
    assert not found, found


def test_loop_bounds_cannot_be_changed_and_travel_to_workers():
    import pickle
    from shlo2jax.options import LoopBounds
    options = LoadOptions(max_loop_trips={"a": 1, "b": 2})
    trips = options.max_loop_trips
    assert isinstance(trips, LoopBounds) and trips == {"a": 1, "b": 2}
    with pytest.raises(TypeError):
        trips["a"] = 5  # type: ignore[index]
    with pytest.raises(AttributeError):
        trips._items = ()  # type: ignore[misc]
    assert not hasattr(trips, "update") and not hasattr(trips, "pop")
    assert options.loop_bound("a") == 1
    assert pickle.loads(pickle.dumps(options)) == options
    assert hash(options) == hash(LoadOptions(max_loop_trips=LoopBounds({"b": 2, "a": 1})))
    assert LoadOptions(max_loop_trips=trips).max_loop_trips is trips
