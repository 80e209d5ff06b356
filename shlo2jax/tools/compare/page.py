"""A comparison as HTML: the tables (a notebook's `_repr_html_`, the report's), and the report
page `Comparison.write_html` writes: one self-contained file (no script, no stylesheet or
image fetched: its plots are inline SVG) with per output the error table, and where the
diverging ops were located, each pair's error along the program, the distribution of each
disagreeing output's element errors and the ops where the differences start."""

from __future__ import annotations

import html
import math

import numpy as np

from shlo2jax import value_types as T
from shlo2jax.tools.numerics import relative_errors

_e = html.escape


# ---------------------------------------------------------------- the tables

def runs_table(runs: dict) -> str:
    rows = "".join(f"<tr><td>{_e(r.name)}</td><td>{_e(r.status)}</td><td>"
                   f"{f'{r.seconds:.3f} s' if r.status == 'ok' else _e(r.reason or '')}"
                   "</td></tr>" for r in runs.values())
    return "<table><tr><th>backend</th><th>status</th><th></th></tr>" + rows + "</table>"


def _pair_row(p) -> str:
    e = p.errors
    ulp = "-" if e.max_ulp is None else e.max_ulp
    verdict = e.note or (f"{e.mismatched}/{e.size}" if e.mismatched else "ok")
    return (f"<tr class=\"{'ok' if e.ok else 'beyond'}\" style=\"{'' if e.ok else 'color:#c00'}\">"
            f"<td>{p.output}</td><td>{_e(p.a)} vs {_e(p.b)}</td><td>{e.max_abs:.3g}</td>"
            f"<td>{e.max_rel:.3g}</td><td>{ulp}</td><td>{_e(verdict)}</td></tr>")


def pairs_table(pairs) -> str:
    """Each pair's error figures per output, those beyond the tolerances in red."""
    return ("<table><tr><th>output</th><th>pair</th><th>max abs</th><th>max rel</th>"
            "<th>max ulp</th><th>mismatched</th></tr>" + "".join(map(_pair_row, pairs))
            + "</table>")


def located_list(located, notes) -> str:
    items = "".join(f"<li>{_e(d.a)} vs {_e(d.b)}: op #{d.op_index} <code>{_e(d.name)}"
                    f"</code> at <code>{_e(d.location)}</code>: max rel "
                    f"{d.errors.max_rel:.3g}, {d.errors.mismatched}/{d.errors.size} "
                    f"beyond tolerance; {_e(d.operands_note())}</li>" for d in located)
    items += "".join(f"<li>{_e(n)}</li>" for n in notes)
    return f"<ul>{items}</ul>" if items else ""


# ---------------------------------------------------------------- the page

_STYLE = """body{font-family:sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:2px 8px;
text-align:right}th{background:#f3f3f3}tr.beyond{color:#c00;font-weight:bold}
code,pre{background:#f6f6f6}pre{padding:4px;white-space:pre-wrap}.verdict{font-size:1.2em}
svg{display:block;margin:.5em 0}"""


def page(c) -> str:
    """The report of the Comparison `c` as one HTML document."""
    title = f"shlo2jax compare @{c.function}"
    tolerances = ", ".join(f"{k}={v}" for k, v in c.tolerances.items() if v is not None)
    head = (f"<h1>{_e(title)}</h1><p>inputs {_e(c.inputs)}"
            + (f", against <code>{_e(c.against)}</code>" if c.against else "")
            + f"; tolerances {_e(tolerances)}</p>"
            + f"<p class=\"verdict\"><b>{_e(c.verdict)}</b></p>")
    body = [head, "<h2>Backends</h2>", runs_table(c.runs), _outputs(c)]
    if c.profiles:
        body.append(_profiles(c))
    if c.located or c.locate_notes:
        body.append(_culprits(c))
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{_e(title)}</title><style>{_STYLE}</style></head><body>"
            + "".join(body) + "</body></html>\n")


def _outputs(c) -> str:
    """Per output its pairs' error table and the histogram of the element errors of each
    pair beyond the tolerances."""
    parts = ["<h2>Outputs</h2>"]
    what = "gradient w.r.t. floating-point input" if c.gradients else "output"
    for index in sorted({p.output for p in c.pairs}):
        pairs = [p for p in c.pairs if p.output == index]
        sample = next((r.outputs[index] for r in c.runs.values()
                       if r.outputs is not None and index < len(r.outputs)), None)
        kind = "" if sample is None else f": {sample.dtype}{list(sample.shape)}"
        parts.append(f"<h3 id=\"output-{index}\">{what} {index}{_e(kind)}</h3>"
                     + pairs_table(pairs))
        parts += [_histogram(c, p) for p in pairs if not p.errors.ok]
    return "".join(parts)


def _profiles(c) -> str:
    parts = ["<h2>Error along the program</h2><p>Each op's error at its first execution "
             "(the largest over its results), by its position in the program; the dashed "
             "line is the tolerance, the red line the op where the difference starts.</p>"]
    for (a, b), ops in c.profiles.items():
        first = next((d for d in c.located if (d.a, d.b) == (a, b)), None)
        parts.append(f"<h3>{_e(a)} vs {_e(b)}</h3>")
        parts.append(_plot(ops, "max_rel", "log10 max relative error",
                           c.tolerances.get("rtol"), first))
        if any(op.max_ulp is not None for op in ops):
            parts.append(_plot(ops, "max_ulp", "log10 max ULP distance",
                               c.tolerances.get("max_ulp"), first))
    return "".join(parts)


def _culprits(c) -> str:
    parts = ["<h2>Diverging ops</h2>"]
    for d in c.located:
        operands = "".join(
            f"<tr><td>{i}</td><td>" + ("not recorded</td><td></td>" if e is None else
                                       f"{e.max_rel:.3g}</td><td>{'ok' if e.ok else 'differs'}"
                                       "</td>") + "</tr>" for i, e in enumerate(d.operands))
        what = "reader" if d.cotangent else "operand"
        parts.append(
            f"<div class=\"divergence\" id=\"op-{d.op_index}\"><h3>op #{d.op_index} "
            f"<code>{_e(d.name)}</code> at <code>{_e(d.location)}</code></h3>"
            f"<p>{_e(d.describe())}</p>"
            + (f"<pre>{_e(d.source_line)}</pre>" if d.source_line else "")
            + (f"<table><tr><th>{what}</th><th>max rel</th><th></th></tr>{operands}</table>"
               if operands else "") + "</div>")
    if c.locate_notes:
        parts.append(located_list([], c.locate_notes))
    return "".join(parts)


# ---------------------------------------------------------------- the plots

_W, _H, _L, _B, _T, _R = 720, 220, 56, 34, 12, 12   # size, then margins: left, bottom, top, right


def _log10(x) -> float:
    return math.log10(x) if x and x > 0 else -math.inf


def _svg(body: str, label: str, height: int = _H) -> str:
    return (f"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{_W}\" height=\"{height}\" "
            f"role=\"img\" aria-label=\"{_e(label)}\" font-family=\"sans-serif\" "
            f"font-size=\"11\"><title>{_e(label)}</title>"
            f"<rect x=\"0\" y=\"0\" width=\"{_W}\" height=\"{height}\" fill=\"white\"/>"
            f"{body}</svg>")


def _y_axis(low: int, high: int, to_y, zero_label: bool) -> str:
    """Decade gridlines and labels from 10^low to 10^high (the bottom row: exactly 0)."""
    marks = []
    step = max(1, (high - low) // 6)
    for k in range(low, high + 1, step):
        y = to_y(k)
        text = "0" if zero_label and k == low else f"1e{k}"
        marks.append(f"<line x1=\"{_L}\" x2=\"{_W - _R}\" y1=\"{y:.1f}\" y2=\"{y:.1f}\" "
                     f"stroke=\"#eee\"/><text x=\"{_L - 4}\" y=\"{y + 4:.1f}\" "
                     f"text-anchor=\"end\">{text}</text>")
    return "".join(marks)


def _plot(ops: list, field: str, label: str, tolerance, first) -> str:
    """log10 of each op's `field` by its position in `ops` (program order, a called
    function's ops where it is called); 0 at the bottom row; the tolerance a dashed line; the
    op `first` (a Divergence) marked with a red line."""
    points = [(x, op, getattr(op, field)) for x, op in enumerate(ops)
              if getattr(op, field) is not None]
    finite = [_log10(v) for _, _, v in points if v > 0]
    tol = [_log10(tolerance)] if tolerance else []
    high = math.ceil(max(finite + tol + [-8.0]))
    low = math.floor(min(finite + tol + [high - 1.0])) - 1
    def to_x(i):
        return _L + i / max(len(ops) - 1, 1) * (_W - _L - _R)
    def to_y(v):
        v = max(v, low)
        return _T + (high - v) / (high - low) * (_H - _T - _B)
    body = [_y_axis(low, high, to_y, True),
            f"<line x1=\"{_L}\" x2=\"{_L}\" y1=\"{_T}\" y2=\"{_H - _B}\" stroke=\"#888\"/>",
            f"<text x=\"{(_L + _W) / 2:.0f}\" y=\"{_H - 6}\" text-anchor=\"middle\">x: the "
            f"{len(ops)} ops in program order; y: {_e(label)}</text>"]
    if tol:
        y = to_y(tol[0])
        body.append(f"<line class=\"tolerance\" x1=\"{_L}\" x2=\"{_W - _R}\" y1=\"{y:.1f}\" "
                    f"y2=\"{y:.1f}\" stroke=\"#06c\" stroke-dasharray=\"5,4\"><title>tolerance "
                    f"{tolerance}</title></line>")
    at = next((x for x, op in enumerate(ops) if first is not None
               and op.op_index == first.op_index), None)
    if at is not None:
        body.append(f"<line class=\"divergence\" data-op-index=\"{first.op_index}\" "
                    f"x1=\"{to_x(at):.1f}\" x2=\"{to_x(at):.1f}\" y1=\"{_T}\" y2=\"{_H - _B}\" "
                    f"stroke=\"#c00\"><title>first divergence: op #{first.op_index} "
                    f"{_e(first.name)} at {_e(first.location)}</title></line>")
    path = " ".join(f"{to_x(x):.1f},{to_y(_log10(v)):.1f}" for x, _, v in points)
    body.append(f"<polyline points=\"{path}\" fill=\"none\" stroke=\"#999\"/>")
    body += [f"<circle class=\"op\" data-op-index=\"{op.op_index}\" cx=\"{to_x(x):.1f}\" "
             f"cy=\"{to_y(_log10(v)):.1f}\" r=\"3\" fill=\"{'#333' if op.ok else '#c00'}\">"
             f"<title>op #{op.op_index} {_e(op.name)} at {_e(op.location)}: {v:.3g}</title>"
             "</circle>" for x, op, v in points]
    return _svg("".join(body), label)


def _histogram(c, p) -> str:
    """How the relative errors of the elements of one output of one pair spread: a bar per
    decade from below rtol (the first bar: the elements equal), the dashed line at rtol."""
    ra, rb = c.runs.get(p.a), c.runs.get(p.b)
    if ra is None or rb is None or ra.outputs is None or rb.outputs is None:
        return ""
    x, y = np.asarray(ra.outputs[p.output]), np.asarray(rb.outputs[p.output])
    if x.shape != y.shape or not (T.is_float(x.dtype) and T.is_float(y.dtype)):
        return ""
    rel = relative_errors(x, y)
    logs = np.log10(rel[rel > 0])
    rtol = c.tolerances.get("rtol")
    tol = [math.floor(math.log10(rtol)) - 1] if rtol else []
    floors = ([math.floor(logs.min())] if logs.size else []) + tol
    low = min(floors) if floors else -8
    high = max(math.floor(logs.max()) + 1 if logs.size else low, low + 1)
    edges = np.arange(low, high + 1)
    counts = [int(rel.size - logs.size)] + [int(n) for n in np.histogram(logs, bins=edges)[0]]
    labels = ["0"] + [f"1e{e}" for e in edges[:-1]]
    top = max(max(counts), 1)
    width = (_W - _L - _R) / len(counts)
    bars = []
    for i, (n, text) in enumerate(zip(counts, labels)):
        h = n / top * (_H - _T - _B - 14)
        x = _L + i * width
        bars.append(f"<rect x=\"{x + 1:.1f}\" y=\"{_H - _B - h:.1f}\" width=\"{width - 2:.1f}\" "
                    f"height=\"{h:.1f}\" fill=\"{'#999' if i == 0 else '#c66'}\"><title>{text}"
                    f": {n} elements</title></rect><text x=\"{x + width / 2:.1f}\" y=\""
                    f"{_H - _B + 12}\" text-anchor=\"middle\">{text}</text>"
                    + (f"<text x=\"{x + width / 2:.1f}\" y=\"{_H - _B - h - 3:.1f}\" "
                       f"text-anchor=\"middle\">{n}</text>" if n else ""))
    if rtol and low <= math.log10(rtol) <= high:
        tx = _L + (1 + math.log10(rtol) - low) * width
        bars.append(f"<line class=\"tolerance\" x1=\"{tx:.1f}\" x2=\"{tx:.1f}\" y1=\"{_T}\" "
                    f"y2=\"{_H - _B}\" stroke=\"#06c\" stroke-dasharray=\"5,4\"><title>rtol "
                    f"{rtol}</title></line>")
    label = f"output {p.output}, {p.a} vs {p.b}: its elements by relative error (decades)"
    bars.append(f"<text x=\"{(_L + _W) / 2:.0f}\" y=\"{_H - 6}\" text-anchor=\"middle\">"
                f"{_e(label)}</text>")
    return _svg("".join(bars), label)
