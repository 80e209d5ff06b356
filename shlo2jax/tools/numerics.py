"""How far apart two arrays are: bit patterns, ULP distances, non-finite agreement, the
conformance checks' comparisons (eq / almost_eq / close) and the error figures of a
backend comparison (max absolute / relative error, ULP distance, mismatched elements).
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import numpy as np

from shlo2jax import value_types as T


def bit_patterns(a: np.ndarray) -> np.ndarray:
    """Bit patterns as unsigned integers (sub-byte floats sit in the low bits of a byte)."""
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])


# ---------------------------------------------------------------- the conformance checks

_NO_SIGN_FLOATS = ("float8_e8m0fnu",)


def _type_name(a: np.ndarray) -> str:
    try:
        return str(T.tensor_type(a.shape, a.dtype))
    except KeyError:
        return f"{a.dtype}{list(a.shape)}"


def _as_f64(a: np.ndarray) -> np.ndarray:
    return a.astype(np.float64)


def _components(a: np.ndarray) -> list:
    """Complex values compare componentwise; everything else is one component."""
    if a.dtype.kind == "c":
        return [a.real.copy(), a.imag.copy()]
    return [a]


def _fmt_index(bad: np.ndarray) -> str:
    idx = np.argwhere(bad)
    return str(tuple(int(i) for i in idx[0])) if idx.size else "()"


def eq_mismatch(actual: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """Bitwise inequality, except that any NaN equals any NaN."""
    if not (T.is_float(actual.dtype) or T.is_complex(actual.dtype)):
        return actual != expected
    bad = np.zeros(actual.shape, bool)
    for a, e in zip(_components(actual), _components(expected)):
        both_nan = np.isnan(_as_f64(a)) & np.isnan(_as_f64(e))
        bad |= (bit_patterns(a) != bit_patterns(e)) & ~both_nan
    return bad


def nonfinite_mismatch(a: np.ndarray, e: np.ndarray):
    """(mask of elements where either side is non-finite, mask of those that differ):
    non-finite values must be bitwise equal, any NaN equals any NaN."""
    af, ef = _as_f64(a), _as_f64(e)
    nonfinite = ~np.isfinite(af) | ~np.isfinite(ef)
    both_nan = np.isnan(af) & np.isnan(ef)
    return nonfinite, nonfinite & ~both_nan & (bit_patterns(a) != bit_patterns(e))


def _ordered(a: np.ndarray):
    """(sign, magnitude) of each float's bit pattern: the ULP distance of two values is
    |mag_a - mag_b| with equal signs and mag_a + mag_b otherwise (so -0 and +0 are 0 apart)."""
    u = bit_patterns(a).astype(np.uint64)
    if a.dtype.name in _NO_SIGN_FLOATS:
        return np.zeros(a.shape, bool), u
    sign = np.uint64(1) << np.uint64(T.bit_width(a.dtype) - 1)
    return (u & sign) != 0, u & ~sign


def ulp_distance(a: np.ndarray, e: np.ndarray) -> np.ndarray:
    sa, ma = _ordered(a)
    se, me = _ordered(e)
    with np.errstate(over="ignore"):  # both branches are computed; the taken one is exact
        same = np.where(ma >= me, ma - me, me - ma)
        return np.where(sa == se, same, ma + me)


def _mismatch(bad, actual, expected, what: str, worst: str) -> Optional[str]:
    """None when no element is `bad`, else how many are, the worst error and the first one."""
    if not bad.any():
        return None
    idx = tuple(int(i) for i in np.argwhere(bad)[0])
    return (f"{int(bad.sum())} of {actual.size} element(s) {what}; {worst}; first at "
            f"{_fmt_index(bad)}: {actual[idx]} vs {expected[idx]}")


def check_values(kind: str, actual, expected, *, tolerance: float = 1e-4, min_ulp: int = 0,
                 max_ulp: int = 3) -> Optional[str]:
    """None when `actual` satisfies the check against `expected`, else what went wrong
    (with the largest error). `kind` is eq / almost_eq (within `tolerance`) / close (within
    [min_ulp, max_ulp] ULP), as the conformance checks (ops/check.py) define them."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    if actual.dtype != expected.dtype or actual.shape != expected.shape:
        return f"type mismatch: actual {_type_name(actual)}, expected {_type_name(expected)}"
    if actual.size == 0:
        return None
    numeric = T.is_float(actual.dtype) or T.is_complex(actual.dtype)
    if kind == "eq" or (kind in ("almost_eq", "close") and not numeric):
        bad = eq_mismatch(actual, expected)
        if not bad.any():
            return None
        first = _fmt_index(bad)
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        detail = f"{actual[idx]} vs {expected[idx]}"
        if numeric or T.is_integer(actual.dtype):
            with np.errstate(all="ignore"):
                diff = np.abs(actual.astype(np.complex128) - expected.astype(np.complex128))
            finite = diff[bad & np.isfinite(diff)]
            if finite.size:
                detail += f"; largest difference {float(finite.max()):.6g}"
        return (f"{int(bad.sum())} of {actual.size} element(s) differ (bitwise), first at "
                f"{first}: {detail}")
    if kind == "almost_eq":
        tol = float(tolerance)
        bad = np.zeros(actual.shape, bool)
        worst = 0.0
        for a, e in zip(_components(actual), _components(expected)):
            nonfinite, nf_bad = nonfinite_mismatch(a, e)
            with np.errstate(all="ignore"):
                diff = np.abs(_as_f64(a) - _as_f64(e))
            over = ~nonfinite & ~(diff <= tol)
            bad |= over | nf_bad
            if (~nonfinite).any():
                worst = max(worst, float(np.max(np.where(nonfinite, 0.0, diff))))
        return _mismatch(bad, actual, expected, f"off by more than {tol:g}",
                         f"largest difference {worst:.6g}")
    if kind == "close":
        lo, hi = int(min_ulp), int(max_ulp)
        bad = np.zeros(actual.shape, bool)
        worst = 0
        for a, e in zip(_components(actual), _components(expected)):
            nonfinite, nf_bad = nonfinite_mismatch(a, e)
            ulps = ulp_distance(a, e)
            outside = ~nonfinite & ((ulps < lo) | (ulps > hi))
            bad |= outside | nf_bad
            if (~nonfinite).any():
                worst = max(worst, int(np.max(np.where(nonfinite, 0, ulps))))
        return _mismatch(bad, actual, expected, f"outside [{lo}, {hi}] ULP",
                         f"largest distance {worst} ULP")
    return f"unknown check kind {kind!r}"


def reference_mismatch(actual, expected) -> Optional[str]:
    """How `actual` misses `expected` at the reference interpreter's tolerances, or None:
    integers exactly; floats within 3 ULP or 1e-4 absolute (libm and XLA differ in the last
    bits of transcendental functions)."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    if not (T.is_float(actual.dtype) or T.is_complex(actual.dtype)):
        return check_values("eq", actual, expected)
    ulp = check_values("close", actual, expected)
    if ulp is None:
        return None
    absolute = check_values("almost_eq", actual, expected, tolerance=1e-4)
    return None if absolute is None else f"{ulp}; {absolute}"


# ---------------------------------------------------------------- two backends' outputs

@dataclasses.dataclass
class Errors:
    """How far apart two arrays are."""
    max_abs: float
    max_rel: float
    max_ulp: Optional[int]       # None for integers and booleans
    mismatched: int              # elements outside the tolerances (or unequal integers)
    size: int
    first: Optional[tuple] = None  # index of the first mismatched element
    note: str = ""               # a type or shape mismatch

    @property
    def ok(self) -> bool:
        return self.mismatched == 0 and not self.note


def _narrower(a: np.ndarray, b: np.ndarray):
    """Both arrays in the narrower floating type (the f64 reference rounded to the other's)."""
    if a.dtype == b.dtype:
        return a, b
    if a.dtype.itemsize <= b.dtype.itemsize:
        return a, b.astype(a.dtype)
    return a.astype(b.dtype), b


def array_errors(a, b, rtol: float, atol: float, max_ulp: Optional[int] = None) -> Errors:
    a, b = np.asarray(a), np.asarray(b)
    with np.errstate(all="ignore"):  # inf - inf, 0 * inf, f64 beyond the f32 range: expected
        return _array_errors(a, b, rtol, atol, max_ulp)


def error_figures(a, b, rtol: float, atol: float, max_ulp: Optional[int] = None) -> tuple:
    """(max rel, max ULP, whether every element is within the tolerances): `array_errors`'
    figures without counting or finding the mismatched elements, in fewer passes over the
    two arrays where both are real floats of one shape, every element finite (a per-op
    error profile of a whole model: most of its values). Else from `array_errors`."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape == b.shape and a.size and T.is_float(a.dtype) and T.is_float(b.dtype):
        with np.errstate(all="ignore"):
            _, _, diff, scale, rel = _differences(a, b)
            if np.isfinite(diff).all():  # (|a-b| is finite only where both are)
                ulps = ulp_distance(*map(np.ascontiguousarray, _narrower(a, b)))
                within = diff <= atol + rtol * scale
                if max_ulp is not None:
                    within |= ulps <= max_ulp
                return float(rel.max()), int(ulps.max()), bool(within.all())
    e = array_errors(a, b, rtol, atol, max_ulp)
    return e.max_rel, e.max_ulp, e.ok


def _array_errors(a, b, rtol, atol, max_ulp) -> Errors:
    if a.shape != b.shape:
        return Errors(0.0, 0.0, None, a.size, a.size, None, f"shapes differ: {a.shape} vs {b.shape}")
    floating = (T.is_float(a.dtype) or T.is_complex(a.dtype)), (T.is_float(b.dtype) or T.is_complex(b.dtype))
    if a.dtype != b.dtype and not all(floating):
        return Errors(0.0, 0.0, None, a.size, a.size, None, f"dtypes differ: {a.dtype} vs {b.dtype}")
    if a.size == 0:
        return Errors(0.0, 0.0, 0 if all(floating) else None, 0, 0)
    if not all(floating):
        diff = np.abs(a.astype(np.float64) - b.astype(np.float64)) if a.dtype != np.bool_ \
            else (a != b).astype(np.float64)
        bad = a != b
        rel = diff / np.maximum(np.maximum(np.abs(a.astype(np.float64)), np.abs(b.astype(np.float64))), 1)
        return Errors(float(diff.max()), float(rel.max()), None, int(bad.sum()), a.size,
                      _first(bad))
    complex_ = T.is_complex(a.dtype) or T.is_complex(b.dtype)
    fa, fb, diff, scale, rel = _differences(a, b)
    finite = np.isfinite(fa) & np.isfinite(fb)
    na, nb = _narrower(a, b)
    parts = [(na.real, nb.real), (na.imag, nb.imag)] if complex_ else [(na, nb)]
    ulps = np.zeros(a.shape, np.uint64)
    nonfinite_bad = np.zeros(a.shape, bool)
    for pa, pb in parts:
        pa, pb = np.array(pa, order="C"), np.array(pb, order="C")
        ulps = np.maximum(ulps, ulp_distance(pa, pb))
        nonfinite_bad |= nonfinite_mismatch(pa, pb)[1]
    within = diff <= atol + rtol * scale
    if max_ulp is not None:
        within |= ulps <= max_ulp
    # (finite on one side only also catches an f64 reference that overflows the narrower type)
    bad = (finite & ~within) | nonfinite_bad | (np.isfinite(fa) != np.isfinite(fb))
    bad &= ~(np.isnan(fa) & np.isnan(fb))
    if finite.any():
        max_abs = float(diff[finite].max())
        max_rel = float(rel[finite].max())
        max_ulps = int(ulps[finite].max())
    else:
        max_abs = max_rel = 0.0
        max_ulps = 0
    return Errors(max_abs, max_rel, max_ulps, int(bad.sum()), a.size, _first(bad))


def _differences(a: np.ndarray, b: np.ndarray) -> tuple:
    """(a, b widened to f64 or complex128, |a-b|, max(|a|, |b|), the relative error of each
    element: |a-b| / max(|a|, |b|), 0 where equal)."""
    complex_ = T.is_complex(a.dtype) or T.is_complex(b.dtype)
    wide = np.complex128 if complex_ else np.float64
    fa, fb = a.astype(wide), b.astype(wide)
    diff = np.abs(fa - fb)
    scale = np.maximum(np.abs(fa), np.abs(fb))
    return fa, fb, diff, scale, np.where(diff == 0, 0.0, diff / scale)


def relative_errors(a, b) -> np.ndarray:
    """The relative error of each element of two floating-point arrays of one shape, where
    both are finite (flattened): what `array_errors`' max rel is the largest of."""
    a, b = np.asarray(a), np.asarray(b)
    with np.errstate(all="ignore"):
        fa, fb, _, _, rel = _differences(a, b)
        return rel[np.isfinite(fa) & np.isfinite(fb)]


def _first(bad: np.ndarray) -> Optional[tuple]:
    idx = np.argwhere(bad)
    return tuple(int(i) for i in idx[0]) if idx.size else None
