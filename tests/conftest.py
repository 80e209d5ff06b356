import os
import pathlib

import pytest

os.environ.setdefault("JAX_PLATFORMS", "cpu")

SHARED = pathlib.Path(__file__).resolve().parents[1].parent / "shared"


@pytest.fixture
def shared_dir():
    """`../shared` beside the checkout: data that is not part of the project."""
    if not SHARED.is_dir():
        pytest.skip(f"{SHARED} is absent: the shared models/conformance data is not part of the repo")
    return SHARED
