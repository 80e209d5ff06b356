"""Reverse mode through the VJP a `jax.export` artifact ships (`serialize(vjp_order >= 1)`).

The exported function's call becomes a `jax.custom_jvp` whose tangent map is the
translation's JVP forward and, transposed, the producer's own VJP (translated too):
`gradients.custom_linear` gives a linear map one way in forward mode and another in reverse
mode. Forward mode and vmap are the translation's.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from shlo2jax.gradients import custom_linear


class ProducerVjp:
    """Wraps `call` (the exported function's call) so that reverse mode runs `vjp` (the
    producer's VJP: takes (*primals, *output cotangents), returns the cotangents of the
    primals, float0 placeholders for integer ones). `exported`: the export's
    `sources.jax_export.ExportRecord` (its avals: `jax.ShapeDtypeStruct`s)."""

    def __init__(self, call, exported, vjp):
        self.call, self.exported, self.vjp = call, exported, vjp

    def __call__(self, *args) -> tuple:
        return tuple(self._with_vjp(*args))

    @functools.cached_property
    def _with_vjp(self):
        call_module = self.call
        with_vjp = jax.custom_jvp(call_module)
        in_avals, out_avals = self.exported.in_avals, self.exported.out_avals
        n_in = len(in_avals)
        diff_in = [i for i, a in enumerate(in_avals) if _differentiable(a.dtype)]
        diff_out = [j for j, a in enumerate(out_avals) if _differentiable(a.dtype)]
        vjp = self.vjp

        def forward(*args):
            primals, lin = args[:n_in], args[n_in:]
            tangents = [np.zeros(np.shape(p), jax.dtypes.float0) for p in primals]
            for i, t in zip(diff_in, lin):
                tangents[i] = t
            _, out_tangents = jax.jvp(call_module, tuple(primals), tuple(tangents))
            return [out_tangents[j] for j in diff_out]

        def transpose(*args):
            primals, cts = args[:n_in], args[n_in:]
            shapes = [a.shape for a in out_avals]
            if not all(isinstance(d, int) for shape in shapes for d in shape):  # polymorphic
                shapes = [o.shape for o in jax.eval_shape(call_module, *primals)]
            full = [np.zeros(shape, jax.dtypes.float0) for shape in shapes]
            for j, ct in zip(diff_out, cts):
                full[j] = ct
            in_cts = vjp(*primals, *full)
            in_cts = in_cts if isinstance(in_cts, tuple) else (in_cts,)
            return [in_cts[i] for i in diff_in]

        @with_vjp.defjvp
        def _jvp(primals, tangents):
            outs = with_vjp(*primals)
            lin = [jnp.zeros_like(primals[i]) if type(tangents[i]) is
                   jax.custom_derivatives.SymbolicZero else tangents[i] for i in diff_in]
            touts = custom_linear(forward, transpose, primals, lin) if diff_out else []
            out_tangents = [np.zeros(np.shape(o), jax.dtypes.float0) for o in outs]
            for j, t in zip(diff_out, touts):
                out_tangents[j] = t
            return outs, tuple(out_tangents)

        return with_vjp


def _differentiable(dtype) -> bool:
    return jnp.issubdtype(dtype, jnp.inexact)
