"""ops/custom_calls/catalog.py and the table of targets: every built-in target is described,
and the tests each description names exist."""

from __future__ import annotations

import pathlib
import re


# ---------------------------------------------------------------- the table of targets
# (docs/generated/custom_calls.md: tests/test_docs.py checks it is current)


ROOT = pathlib.Path(__file__).resolve().parents[3]


def test_table_tool_rewrites_a_readme(tmp_path):
    from shlo2jax.tools import custom_call_table
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n{custom_call_table.START}\nstale row\n{custom_call_table.END}\ntail\n")
    assert custom_call_table.main(["--readme", str(readme)]) == 0
    text = readme.read_text()
    assert "stale row" not in text and text.endswith(f"{custom_call_table.END}\ntail\n")
    assert "| LAPACK geev (eig), pre-FFI | `lapack_{s,d,c,z}geev` |" in text


def test_every_builtin_target_is_described():
    from shlo2jax import registry
    from shlo2jax.tools.custom_call_table import builtin_targets
    targets = set(builtin_targets())
    assert targets - set(registry.TARGET_INFO) == set()
    assert set(registry.TARGET_INFO) - targets == set(), "descriptions of targets nobody registers"


def test_catalog_names_existing_tests():
    import shlo2jax.ops  # noqa: F401
    from shlo2jax import registry
    missing = []
    for info in set(registry.TARGET_INFO.values()):
        assert info.test, info.kernel
        for ref in info.test:
            path, _, name = ref.partition("::")
            source = (ROOT / path).read_text()
            if not re.search(rf"^def {re.escape(name)}\(", source, re.M):
                missing.append(ref)
    assert not missing, missing
