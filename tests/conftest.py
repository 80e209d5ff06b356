import os
import pathlib
import zlib

import numpy as np
import pytest

os.environ.setdefault("JAX_PLATFORMS", "cpu")

SHARED = pathlib.Path(__file__).resolve().parents[1].parent / "shared"


@pytest.fixture
def shared_dir():
    """`../shared` beside the checkout: data that is not part of the project."""
    if not SHARED.is_dir():
        pytest.skip(f"{SHARED} is absent: the shared models/conformance data is not part of the repo")
    return SHARED


@pytest.fixture(autouse=True)
def _module_rng_per_test(request, monkeypatch):
    """A test module's `RNG` draws the same numbers in each test whatever ran before it: pytest-xdist
    gives each worker another order, and a module-wide generator another set of data per order."""
    rng = getattr(request.module, "RNG", None)
    if isinstance(rng, np.random.Generator):
        monkeypatch.setattr(request.module, "RNG", np.random.default_rng(zlib.crc32(request.node.nodeid.encode())))


# Marks of tests in files that do not import pytest (a decorator there would need the import).
MARKS = {
    "tests/tools/test_fuzz.py::test_fixed_seeds_agree_on_every_backend": ("slow",),
    "tests/tools/test_fuzz.py::test_xla_killing_the_process_is_told_apart_from_the_translation": ("slow",),
}


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects: `-m shared` must see the marker
def pytest_collection_modifyitems(config, items):
    """Adds the marks of MARKS, and marks `shared` every test whose behaviour depends on ../shared being beside the
    checkout: those that take the `shared_dir` fixture (directly or through another
    fixture: `fixturenames` is the closure) and the notebooks (they fall back to examples/
    without the shared models). .ci/run runs `-m shared` on a copy with no ../shared."""
    for item in items:
        for mark in MARKS.get(item.nodeid, ()):
            item.add_marker(mark)
        if "shared_dir" in getattr(item, "fixturenames", ()) or item.get_closest_marker("notebook"):
            item.add_marker(pytest.mark.shared)
