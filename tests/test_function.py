"""shlo2jax/function.py: the Function facade's rich display (its calling convention and its
executable are tested in tests/conventions/ and tests/executables/)."""

import pathlib
from html.parser import HTMLParser

import shlo2jax

ROOT = pathlib.Path(__file__).resolve().parents[1]


class _Cells(HTMLParser):
    """The text of each table cell, and whether the tags close as they open."""

    def __init__(self):
        super().__init__()
        self.cells, self.open, self._in = [], [], False

    def handle_starttag(self, tag, attrs):
        self.open.append(tag)
        if tag == "td":
            self.cells.append("")
            self._in = True

    def handle_endtag(self, tag):
        assert self.open.pop() == tag
        self._in = self._in and tag != "td"

    def handle_data(self, data):
        if self._in:
            self.cells[-1] += data


def _cells(text: str) -> list:
    parser = _Cells()
    parser.feed(text)
    assert parser.open == []  # well formed: every tag closed
    return parser.cells


def test_a_function_shows_its_arguments_and_results_as_a_table():
    program = shlo2jax.load(ROOT / "examples" / "mlp.mlir")
    cells = _cells(program["main"]._repr_html_())
    rows = [tuple(cells[i:i + 3]) for i in range(0, len(cells), 3)]
    assert rows[0] == ("argument", "arg_0", "f32[8,16]")
    assert rows[-1] == ("result", "result", "f32[2,4]")
    assert len(rows) == len(program["main"].arg_names) + 1
    assert "lowering: translate (not asked for)" in program["main"]._repr_html_()
    assert program._repr_html_().count("<table>") == len(program.functions)


def test_names_are_escaped():
    text = ('func.func @main(%x: tensor<2xf32> loc("params[\'<w>\']")) -> tensor<2xf32> {\n'
            '  return %x : tensor<2xf32>\n}\n')
    fn = shlo2jax.load(text)["main"]
    assert fn.arg_names == ("params['<w>']",)
    shown = fn._repr_html_()
    assert "&lt;w&gt;" in shown and "<w>" not in shown
    assert _cells(shown)[1] == "params['<w>']"
