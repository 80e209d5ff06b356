"""The tools around the translation: the command line (`cli`), the conformance runner
(`conformance`), cross-backend comparison (`compare`, `testing`), the reference interpreter
and XLA-direct runners (`reference`), error measures (`numerics`), seeded inputs (`inputs`),
export of a translation (`export`) and the README's table of custom-call targets
(`custom_call_table`).

The translator never imports them; `import shlo2jax` loads none of them (each loads on
first use).
"""
