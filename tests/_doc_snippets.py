"""The code blocks of the documentation (tests/test_doc_snippets.py): read from the Markdown with
the marker written before each, and, run as a script, the child process that executes one page's
```python blocks in order in one namespace, checking the values their `# -> ` comments state.

A marker is an HTML comment on the line before a fence: `<!-- snippet: skip (why) -->` (the
block cannot run here) or `<!-- snippet: slow (why) -->` (it runs only with the slow tests).
An expected value is a comment `# -> VALUE` on an expression statement (its last line, or the
comment lines right after it, continued on lines that start `#  `): a Python literal is compared
to the value (numbers to 1e-5), any other text to `str(value)` with `...` standing for anything
and runs of white space equal. A shell command's `# -> exit N` states its exit status, and any
other text there a part of its output."""

from __future__ import annotations

import ast
import dataclasses
import io
import json
import re
import sys
import tokenize
import traceback

import numpy as np

FENCE = re.compile(r"^(\s*)(```+)\s*([\w-]*)")
MARKER = re.compile(r"^\s*<!--\s*snippet:(.*?)-->\s*$")
MARKER_KINDS = ("skip", "slow")
KNOWN_MARKER = re.compile(r"^\s*(skip|slow)\s+\((.+)\)\s*$")
RUN_LANGUAGES = ("python", "bash", "sh", "console")
FAILED = "snippet failed at "


@dataclasses.dataclass(frozen=True)
class Block:
    """One fenced block: its page (relative to the root), the page line of its first code line,
    its language, its code, and its marker's raw text (None when it has none)."""
    page: str
    line: int
    language: str
    code: str
    marker: str | None = None

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def kind_and_reason(self) -> tuple[str, str] | None:
        """("skip" | "slow", why) for a well-formed marker; None without one."""
        if self.marker is None:
            return None
        known = KNOWN_MARKER.match(self.marker)
        if not known:
            raise ValueError(f"{self.where}: unknown snippet marker {self.marker.strip()!r}: "
                             f"write `<!-- snippet: skip (why) -->` or `<!-- snippet: slow (why) -->`")
        return known.group(1), known.group(2).strip()


def blocks(text: str, page: str) -> list[Block]:
    """The fenced blocks of a Markdown page, in order."""
    lines = text.splitlines()
    found, i = [], 0
    while i < len(lines):
        fence = FENCE.match(lines[i])
        if not fence:
            i += 1
            continue
        indent, ticks, language = fence.groups()
        end = i + 1
        while end < len(lines) and not lines[end].strip().startswith(ticks):
            end += 1
        marker = MARKER.match(lines[i - 1]) if i > 0 else None
        code = "\n".join(line[len(indent):] for line in lines[i + 1:end])
        found.append(Block(page, i + 2, language, code, marker.group(1) if marker else None))
        i = end + 1
    return found


def stray_markers(text: str) -> list[int]:
    """The page lines of markers not directly before a fence (they would mark nothing)."""
    lines = text.splitlines()
    return [i + 1 for i, line in enumerate(lines)
            if MARKER.match(line) and not (i + 1 < len(lines) and FENCE.match(lines[i + 1]))]


def matches(expected: str, text: str) -> bool:
    """Whether `text` is `expected` where `...` stands for anything and white space runs match."""
    squash = lambda s: " ".join(s.split())  # noqa: E731
    pattern = ".*".join(re.escape(part) for part in squash(expected).split("..."))
    return re.fullmatch(pattern, squash(text), re.DOTALL) is not None


def check_value(value, expected: str) -> str | None:
    """Why `value` is not what `expected` (the text after `# -> `) states; None when it is."""
    try:
        literal = ast.literal_eval(expected)
    except (ValueError, SyntaxError):
        return None if matches(expected, str(value)) else f"{value} is not {expected}"
    if isinstance(literal, (int, float, list, tuple)) and not isinstance(literal, bool) \
            and np.asarray(literal).dtype.kind in "iuf":
        actual = np.asarray(value)
        if actual.shape != np.shape(literal) or \
                not np.allclose(actual.astype(np.float64), literal, rtol=1e-5, atol=1e-6):
            return f"{actual.tolist()} is not {expected}"
        return None
    return None if value == literal else f"{value!r} is not {expected}"


def expectations(code: str) -> dict[int, str]:
    """Code line (1-based) -> the expected value its `# -> ` comment states, keyed by the line
    of the code the comment stands on or, for a comment-only line, the last code line above."""
    lines = code.splitlines()
    found, last_code = {}, 0
    comments = {tok.start[0]: tok.string for tok in
                tokenize.generate_tokens(io.StringIO(code).readline) if tok.type == tokenize.COMMENT}
    line_no = 1
    while line_no <= len(lines):
        comment = comments.get(line_no, "")
        alone = lines[line_no - 1].lstrip().startswith("#")
        if not alone and lines[line_no - 1].strip():
            last_code = line_no
        if comment.startswith("# -> "):
            text, key = comment[len("# -> "):], last_code
            while line_no + 1 <= len(lines) and lines[line_no].lstrip().startswith("#  "):
                line_no += 1
                text += " " + lines[line_no - 1].lstrip()[1:].strip()
            found[key] = text.strip()
        line_no += 1
    return found


def _is_print(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
        node.func.id == "print" and len(node.args) == 1 and not node.keywords


def run_block(block: Block, namespace: dict) -> None:
    """Executes `block` statement by statement in `namespace` (tracebacks name the page's lines),
    checking each stated value; an AssertionError names the statement that differs."""
    tree = ast.parse(block.code, block.page)
    ast.increment_lineno(tree, block.line - 1)
    stated = {line + block.line - 1: text for line, text in expectations(block.code).items()}
    for statement in tree.body:
        expected = [stated[n] for n in range(statement.lineno, statement.end_lineno + 1) if n in stated]
        if not expected:
            exec(compile(ast.Module([statement], []), block.page, "exec"), namespace)
            continue
        if not isinstance(statement, ast.Expr):
            raise AssertionError(f"{block.page}:{statement.lineno}: a `# -> ` comment on a "
                                 f"statement that is not an expression")
        node = statement.value.args[0] if _is_print(statement.value) else statement.value
        value = eval(compile(ast.Expression(node), block.page, "eval"), namespace)
        if _is_print(statement.value):
            print(value)
        problem = check_value(value, expected[0])
        if problem:
            raise AssertionError(f"{block.page}:{statement.lineno}: {problem}")


def main(argv: list[str]) -> int:
    """Runs the blocks (a JSON list of Block fields, in the file argv[0]) in one namespace."""
    with open(argv[0]) as f:
        page_blocks = [Block(**fields) for fields in json.load(f)]
    namespace = {"__name__": "__main__"}
    for block in page_blocks:
        try:
            run_block(block, namespace)
        except BaseException:  # noqa: BLE001 - SystemExit too: the block is what failed
            sys.stdout.flush()
            print(f"{FAILED}{block.where}", file=sys.stderr)
            traceback.print_exc()
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
