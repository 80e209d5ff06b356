"""A translated function written out as StableHLO or a `jax.export` artifact: see
`shlo2jax.tools.export`."""

from shlo2jax.tools.export import export_translated, translated_stablehlo

__all__ = ["export_translated", "translated_stablehlo"]
