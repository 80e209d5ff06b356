import os
import pathlib
import sys
import zlib

import numpy as np
import pytest

os.environ.setdefault("JAX_PLATFORMS", "cpu")

TESTS = pathlib.Path(__file__).resolve().parent
SHARED = TESTS.parent.parent / "shared"


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
    # The same for the `RNG` of a helper module under tests/ whose functions the test module
    # imports (tests/ops/custom_calls/_programs.py's `_random`): seeded from the node id too.
    helpers = {getattr(value, "__module__", None) for value in vars(request.module).values()
               if callable(value)} - {request.module.__name__, None}
    for name in sorted(helpers):
        helper = sys.modules.get(name)
        if isinstance(getattr(helper, "RNG", None), np.random.Generator) and \
                pathlib.Path(getattr(helper, "__file__", "/")).resolve().is_relative_to(TESTS):
            seed = zlib.crc32(f"{request.node.nodeid} {name}".encode())
            monkeypatch.setattr(helper, "RNG", np.random.default_rng(seed))


# Marks of tests in files that do not import pytest (a decorator there would need the import).
MARKS = {
    "tests/tools/test_fuzz.py::test_fixed_seeds_agree_on_every_backend": ("slow",),
    "tests/tools/test_fuzz.py::test_xla_killing_the_process_is_told_apart_from_the_translation": ("slow",),
}


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects: `-m shared` must see the marker
def pytest_collection_modifyitems(config, items):
    """Adds the marks of MARKS, marks `shared` every test whose behaviour depends on ../shared being beside the
    checkout: those that take the `shared_dir` fixture (directly or through another
    fixture: `fixturenames` is the closure) and the notebooks (they fall back to examples/
    without the shared models; .ci/run runs `-m shared` on a copy with no ../shared), and
    puts the tests marked `long` first."""
    for item in items:
        for mark in MARKS.get(item.nodeid, ()):
            item.add_marker(mark)
        if "shared_dir" in getattr(item, "fixturenames", ()) or item.get_closest_marker("notebook"):
            item.add_marker(pytest.mark.shared)
    # pytest-xdist hands out tests in collection order: a test of minutes collected last runs
    # alone on one worker while the other has nothing left (the full suite's last 8 minutes
    # in .ci/run, 2026-11-29); started first, the short ones fill in around it.
    items.sort(key=lambda item: item.get_closest_marker("long") is None)
