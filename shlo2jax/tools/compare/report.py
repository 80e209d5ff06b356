"""What `compare` returns: the runs, the error figures of each pair per output, the diverging
ops located; shown as a table, JSON, or HTML in a notebook."""

from __future__ import annotations

import dataclasses
import functools
import html
import json
from typing import NamedTuple, Optional

import numpy as np

from shlo2jax.tools.compare import overlay, page
from shlo2jax.tools.numerics import Errors


@dataclasses.dataclass
class BackendRun:
    name: str
    status: str                   # ok / skipped / error
    seconds: float = 0.0
    reason: str = ""
    outputs: Optional[list] = None


@dataclasses.dataclass
class PairResult:
    a: str
    b: str
    output: int
    errors: Errors


class OpError(NamedTuple):
    """One op's error between two recordings at its first execution, the largest over its
    results (`Comparison.profiles`: the report's plot along the program)."""
    op_index: int
    name: str
    location: str
    max_rel: float
    max_ulp: Optional[int]       # None for integers and booleans
    ok: bool                     # within the tolerances
    # (graph id, node id): its node in Model Explorer (`overlay.node_ids`); None: not known
    node: Optional[tuple] = None


@dataclasses.dataclass
class Divergence:
    """An op whose results differ between two backends beyond the tolerances."""
    a: str
    b: str
    op_index: int
    name: str
    location: str
    result: int
    execution: int               # which execution of the op (ops in loops run many times)
    errors: Errors
    # per operand, how far apart its two values already were (None: not recorded); for a
    # cotangent, per result of each op that reads this op's result (what it is made from)
    operands: list = dataclasses.field(default_factory=list)
    other_name: str = ""         # the op it was matched with in b (two programs: may differ)
    other_location: str = ""     # (where it is not at the same place as this op)
    source_line: str = ""        # the line its location names, where that file is here
    cotangent: bool = False      # (compare(grad=True)) the values: its result's cotangents
    holds_ops: bool = False      # a call or control flow: the ops inside it make its results
    readers: list = dataclasses.field(default_factory=list)  # (cotangent) "op at location"

    @property
    def culprit(self) -> Optional[bool]:
        """True where every operand agrees (this op is the first to differ), False where one
        already differs (it carries a difference from upstream), None where not known. For a
        cotangent: whether the cotangents of the ops that read the result agree (then the
        derivatives of those ops are where the backward pass parts)."""
        if self.holds_ops:
            return None
        if any(e is not None and not e.ok for e in self.operands):
            return False
        return None if any(e is None for e in self.operands) else True

    def describe(self) -> str:
        """One line: the op, where, by how much, and how its operands compare."""
        e = self.errors
        ulp = "" if e.max_ulp is None else f", max ulp {e.max_ulp}"
        run = f" (execution {self.execution})" if self.execution else ""
        other = ""
        if self.other_location or self.other_name not in ("", self.name):
            where = f" at {self.other_location}" if self.other_location else ""
            other = f" (in {self.b}: {self.other_name}{where})"
        what = "the cotangent of its result: " if self.cotangent else ""
        return (f"{self.a} vs {self.b}: op #{self.op_index} {self.name} result {self.result}"
                f"{run} at {self.location}{other}: {what}max abs {e.max_abs:.3g}, max rel "
                f"{e.max_rel:.3g}{ulp}, {e.mismatched}/{e.size} beyond tolerance; "
                + self.operands_note())

    def _cotangent_note(self) -> str:
        readers = ", ".join(self.readers) or "none (an output)"
        if self.culprit:
            return (f"the cotangents of the ops that read it agree: the backward pass parts at "
                    f"the derivative of {readers}")
        if self.culprit is False:
            worst = max((e for e in self.operands if e is not None and not e.ok),
                        key=lambda e: e.max_rel)
            return (f"the cotangent of an op that reads it already differs (max rel "
                    f"{worst.max_rel:.3g}): the difference comes from nearer the outputs")
        return f"the cotangents of the ops that read it ({readers}) were not all recorded"

    def operands_note(self) -> str:
        if self.cotangent:
            return self._cotangent_note()
        if self.holds_ops:
            return "a call or control flow: the ops it runs make its results (see those)"
        if self.culprit:
            return ("its operands agree: it is the first op to differ" if self.operands else
                    "it has no operands: it is the first op to differ")
        if self.culprit is False:
            worst = max((e for e in self.operands if e is not None and not e.ok),
                        key=lambda e: e.max_rel)
            return (f"its operands already differ (max rel {worst.max_rel:.3g}): the "
                    "difference comes from upstream")
        return "its operands were not all recorded"


@dataclasses.dataclass
class Reduced:
    """What `compare(..., reduce=DIR)` wrote: a module (two, against another program) of
    `ops_after` ops cut from the `ops_before` of the function (callees inlined) that still
    disagrees between backends `a` and `b`, and its arguments (`paths`, the .npz last)."""
    a: str
    b: str
    ops_before: int
    ops_after: int
    paths: list
    cut: str                     # the op it was cut at: "name at location"
    checks: int                  # candidate modules built and compared
    seconds: float
    rerun: str                   # the command line that compares them again

    @property
    def line(self) -> str:
        written = ", ".join(self.paths[:-1]) + " and " + self.paths[-1]
        checked = f"{self.checks} candidate{'s' if self.checks != 1 else ''} checked"
        return (f"reduced: {self.ops_before} ops -> {self.ops_after} ops, written to {written} "
                f"({self.a} vs {self.b}, cut at {self.cut}; {checked} in {self.seconds:.1f} s)")


@dataclasses.dataclass
class Comparison:
    function: str
    inputs: str                   # "seeded (seed N)" or "given"
    tolerances: dict
    runs: dict
    pairs: list
    located: list = dataclasses.field(default_factory=list)
    locate_notes: list = dataclasses.field(default_factory=list)
    against: str = ""             # the other program's name, where two programs are compared
    gradients: bool = False       # the runs' outputs are the gradients of the seeded loss
    # (locate) (a, b) -> every matched op's OpError, in a's program order
    profiles: dict = dataclasses.field(default_factory=dict)
    reduced: Optional[Reduced] = None  # (reduce=DIR) what was written

    @property
    def compared(self) -> bool:
        """Whether at least two backends produced results, not all NaN (else nothing was
        compared)."""
        return sum(r.status == "ok" for r in self.runs.values()) >= 2 and \
            self.vacuous != "nan"

    @functools.cached_property
    def vacuous(self) -> Optional[str]:
        """"nan" where every backend's every output element is NaN, "constant" where every
        output of every backend is one repeated value (agreeing then says little: the inputs
        may not reach the outputs, or they may be out of the model's range); else None."""
        outputs = [o for r in self.runs.values() if r.status == "ok" and r.outputs
                   for o in r.outputs]
        if not outputs:
            return None
        def all_nan(o):
            return o.size > 0 and np.issubdtype(o.dtype, np.inexact) and np.isnan(o).all()
        if all(all_nan(o) for o in outputs):
            return "nan"
        def constant(o):
            flat = o.reshape(-1)
            return o.size > 1 and bool((flat == flat[0]).all())
        if all(constant(o) for o in outputs):
            return "constant"
        return None

    @property
    def ok(self) -> bool:
        """At least two backends ran, every one agrees with every other, and none failed with
        an error: agreement is never reported on fewer than two."""
        return self.compared and all(r.status != "error" for r in self.runs.values()) and \
            all(p.errors.ok for p in self.pairs)

    def disagreeing(self) -> list:
        return [p for p in self.pairs if not p.errors.ok]

    def _repr_html_(self) -> str:
        """In a notebook: the backends, the error figures of each pair per output (the pairs
        beyond the tolerances in red), the diverging ops located, and the verdict."""
        e_ = html.escape
        located = page.located_list(self.located, self.locate_notes)
        return (f"<div><b>@{e_(self.function)}</b>, inputs {e_(self.inputs)}"
                + (f", against {e_(self.against)}" if self.against else "")
                + page.runs_table(self.runs) + page.pairs_table(self.pairs)
                + (f"<p>first diverging ops:</p>{located}" if located else "")
                + f"<p><b>{e_(self.verdict)}</b></p></div>")

    def write_model_explorer(self, path) -> list:
        """The per-op errors of the first pair located through probes as Model Explorer node
        data (`overlay`) to `path`; returns that pair ([] where there is none: the file then
        holds no graph)."""
        return overlay.write_node_data(self, path)

    def write_html(self, path) -> None:
        """The report as one self-contained HTML page (inline SVG plots, nothing fetched):
        per output the error table and each disagreeing pair's distribution of element
        errors; where located, each pair's error along the program and the diverging ops."""
        with open(path, "w", encoding="utf-8") as f:
            f.write(page.page(self))

    def __repr__(self):  # (the outputs are many arrays: `table()` shows them as figures)
        return (f"<Comparison @{self.function}: {', '.join(self.runs)}; {self.verdict}"
                + (f"; {len(self.located)} diverging ops located" if self.located else "")
                + ">")

    @property
    def verdict(self) -> str:
        """The table's last line."""
        what = "programs" if self.against else "backends"
        if self.disagreeing():
            return f"{what} DISAGREE"
        if self.vacuous == "nan":
            return ("nothing compared: every output is NaN on every backend (give inputs the "
                    "model expects: --inputs)")
        if not self.compared:
            return "nothing compared: fewer than two backends produced results"
        if self.ok and self.vacuous == "constant":
            return (f"{what} agree, but every output is one repeated value on every backend "
                    "(do the inputs reach the outputs? --inputs gives others)")
        return f"{what} agree" if self.ok else f"{what} DISAGREE"  # a backend failed

    def table(self) -> str:
        lines = [f"@{self.function}  inputs: {self.inputs}  "
                 + (f"against: {self.against}  " if self.against else "") + "tolerances: "
                 + ", ".join(f"{k}={v}" for k, v in self.tolerances.items() if v is not None)]
        width = max(len(n) for n in self.runs) if self.runs else 8
        for run in self.runs.values():
            detail = f"{run.seconds:8.3f} s" if run.status == "ok" else f"  {run.reason}"
            lines.append(f"  {run.name:<{width}}  {run.status:<7}{detail}")
        outputs = sorted({p.output for p in self.pairs})
        for index in outputs:
            sample = next(r.outputs[index] for r in self.runs.values() if r.outputs is not None)
            what = "gradient w.r.t. floating-point input" if self.gradients else "output"
            lines.append(f"{what} {index}: {sample.dtype}{list(sample.shape)}")
            lines.append(f"  {'pair':<{2 * width + 4}}  {'max abs':>10}  {'max rel':>10}  "
                         f"{'max ulp':>10}  {'mismatched':>12}")
            for p in (p for p in self.pairs if p.output == index):
                e = p.errors
                ulp = "-" if e.max_ulp is None else str(e.max_ulp)
                verdict = e.note or (f"{e.mismatched}/{e.size}" if e.mismatched else "ok")
                lines.append(f"  {p.a + ' vs ' + p.b:<{2 * width + 4}}  {e.max_abs:10.3g}  "
                             f"{e.max_rel:10.3g}  {ulp:>10}  {verdict:>12}")
        if self.located or self.locate_notes:
            lines.append("first diverging ops:")
            for d in self.located:
                lines.append(f"  {d.describe()}")
                if d.source_line:
                    lines.append(f"      {d.source_line}")
            lines += [f"  {note}" for note in self.locate_notes]
        lines.append(self.verdict)
        return "\n".join(lines)

    def to_json(self) -> dict:
        def errors(e: Errors) -> dict:
            d = dataclasses.asdict(e)
            d["ok"] = e.ok
            return d
        return {
            "function": self.function, "inputs": self.inputs, "against": self.against,
            "gradients": self.gradients,
            "tolerances": self.tolerances,
            "ok": self.ok,
            "backends": {n: {"status": r.status, "seconds": r.seconds, "reason": r.reason}
                         for n, r in self.runs.items()},
            "pairs": [{"a": p.a, "b": p.b, "output": p.output, **errors(p.errors)}
                      for p in self.pairs],
            "located": [{**{k: v for k, v in dataclasses.asdict(d).items()
                            if k not in ("errors", "operands")}, **errors(d.errors),
                         "operands": [None if o is None else errors(o) for o in d.operands],
                         "culprit": d.culprit} for d in self.located],
            "locate_notes": list(self.locate_notes),
            "reduced": None if self.reduced is None else dataclasses.asdict(self.reduced),
            "profiles": [{"a": a, "b": b, "ops": [e._asdict() for e in ops]}
                         for (a, b), ops in self.profiles.items()],
        }

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2)

