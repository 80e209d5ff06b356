"""The registry covers the spec: every op of jaxlib's `stablehlo` and `chlo` dialects has a
rule, except those listed here with the reason; each rule's name is written where it is
registered."""

import pathlib
import re

import pytest
from jaxlib.mlir.dialects import chlo, stablehlo

import shlo2jax.ops  # noqa: F401  (registers the built-in rules)
from shlo2jax import registry

ROOT = pathlib.Path(__file__).resolve().parents[1]

# Ops without a rule of their own, and why.
NOT_RULES = {
    "stablehlo.custom_call": "resolved at load time to its call target's rule "
                             "(register_custom_call)",
    "stablehlo.return": "a region terminator: the decoder reads it as the region's outputs",
    "chlo._asin_acos_kernel": "internal to chlo's own decompositions: the loader rewrites it "
                              "with jaxlib's chlo-legalize-to-stablehlo pass",
    "stablehlo.async_start": "not supported yet: `!stablehlo.future` values have no "
                             "translation (reported at load time)",
    "stablehlo.async_done": "not supported yet: `!stablehlo.future` values have no "
                            "translation (reported at load time)",
}


def dialect_ops() -> set:
    names = set()
    for dialect in (stablehlo, chlo):
        for attribute in vars(dialect).values():
            name = getattr(attribute, "OPERATION_NAME", None)
            if isinstance(name, str):
                names.add(name)
    return names


def test_jaxlib_lists_the_dialects_ops():
    names = dialect_ops()
    assert {"stablehlo.add", "stablehlo.while", "chlo.erf"} <= names and len(names) > 150


def test_every_dialect_op_has_a_rule():
    missing = sorted(n for n in dialect_ops() if n not in registry.OP_RULES and n not in NOT_RULES)
    assert not missing, f"ops of jaxlib's dialects with no rule: {missing}"


@pytest.mark.parametrize("name", sorted(NOT_RULES))
def test_the_exceptions_are_still_exceptions(name):
    # The list only shrinks: an op that gained a rule leaves it.
    assert name in dialect_ops() and name not in registry.OP_RULES


def test_every_registered_name_is_written_where_it_is_registered():
    sources = "".join(p.read_text() for p in (ROOT / "ops").rglob("*.py"))
    literals = set(re.findall(r'"([^"\s]+)"', sources))
    unwritten = sorted(n for n in list(registry.OP_RULES) + list(registry.CUSTOM_CALL_RULES)
                       if n not in literals and registry.OP_RULES.get(
                           n, registry.CUSTOM_CALL_RULES.get(n)).handler.__module__
                       .startswith("shlo2jax.ops"))
    assert not unwritten, unwritten
