"""`Comparison.write_html` and `shlo2jax compare ... --html REPORT` (issue 43): one
self-contained page (inline SVG, nothing fetched) with per output the error table, each
disagreeing output's element errors, and after --locate each op's error along the program
with the first divergence marked and the diverging ops with their locations."""

import dataclasses
import html
import html.parser
import json
import pathlib
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET

import ml_dtypes
import numpy as np
import pytest

from shlo2jax.tools import cli, commands, exits
from shlo2jax.tools.compare import PairResult, array_errors, compare

ROOT = pathlib.Path(__file__).resolve().parents[3]
MLP = ROOT / "examples" / "mlp.mlir"
FIRST_ADD = "%3 = stablehlo.add %0, %2"   # the first layer's bias add
SVG = "{http://www.w3.org/2000/svg}"
VOID = {"meta", "br", "hr", "img", "input", "link", "col", "area", "base", "wbr"}


@pytest.fixture(scope="module")
def edited(tmp_path_factory) -> pathlib.Path:
    """The MLP with its first bias add a subtract."""
    path = tmp_path_factory.mktemp("html") / "mlp_edited.mlir"
    path.write_text(MLP.read_text().replace(FIRST_ADD, "%3 = stablehlo.subtract %0, %2"))
    return path


@pytest.fixture(scope="module")
def located(edited):
    return compare(str(MLP), against=edited, locate=True)


class _Checker(html.parser.HTMLParser):
    """Every element closed in order; the tags and attributes seen."""
    def __init__(self):
        super().__init__()
        self.open, self.tags, self.attrs, self.doctype = [], [], [], None

    def handle_decl(self, decl):
        self.doctype = decl

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs += attrs
        if tag not in VOID:
            self.open.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs += attrs

    def handle_endtag(self, tag):
        assert self.open and self.open[-1] == tag, (self.open[-3:], tag)
        self.open.pop()


def _document(text: str) -> _Checker:
    checker = _Checker()
    checker.feed(text)
    checker.close()
    assert checker.doctype == "DOCTYPE html" and not checker.open
    assert checker.tags.count("html") == checker.tags.count("body") == 1
    return checker


def _svgs(text: str) -> list:
    return [ET.fromstring(s) for s in re.findall(r"<svg\b.*?</svg>", text, re.S)]


def _self_contained(checker: _Checker, text: str) -> None:
    """Nothing the page names is fetched: no src or href, no url() or @import in its style,
    no script; the only URL is the SVG namespace's."""
    assert not [a for a in checker.attrs if a[0] in ("src", "href", "srcset", "data")]
    assert "script" not in checker.tags and "link" not in checker.tags
    assert "url(" not in text and "@import" not in text
    assert set(re.findall(r"https?://[^\"' <]+", text)) <= {"http://www.w3.org/2000/svg"}


def test_the_page_of_two_programs_that_part(located, tmp_path):
    path = tmp_path / "report.html"
    located.write_html(path)
    text = path.read_text(encoding="utf-8")
    checker = _document(text)
    _self_contained(checker, text)
    svgs = _svgs(text)
    # each output's table: a row per pair, the pair beyond the tolerances marked
    for p in located.pairs:
        assert f'id="output-{p.output}"' in text
        assert re.search(rf'<tr class="beyond"[^>]*><td>{p.output}</td><td>{p.a} vs {p.b}</td>'
                         rf'<td>{p.errors.max_abs:.3g}</td>', text)
    # the histogram of the disagreeing output: its bars count every element
    histogram = next(s for s in svgs if "by relative error" in s.get("aria-label"))
    bars = list(histogram.iter(f"{SVG}rect"))[1:]   # (the first: the background)
    counts = [int(r.find(f"{SVG}title").text.rsplit(": ", 1)[1].split()[0]) for r in bars]
    assert sum(counts) == located.pairs[0].errors.size
    # the plots along the program: a point per op, the first divergence at the culprit's
    first = located.located[0]
    assert first.culprit and first.name == "stablehlo.add"
    plots = [s for s in svgs if "log10 max" in s.get("aria-label")]
    assert len(plots) == 2  # (max rel, max ULP)
    for plot in plots:
        mark = next(e for e in plot.iter(f"{SVG}line") if e.get("class") == "divergence")
        assert mark.get("data-op-index") == str(first.op_index)
        point = next(e for e in plot.iter(f"{SVG}circle")
                     if e.get("data-op-index") == str(first.op_index))
        assert mark.get("x1") == point.get("cx")
        ops = [int(e.get("data-op-index")) for e in plot.iter(f"{SVG}circle")]
        assert ops == [op.op_index for op in located.profiles[("cpu", "cpu:against")]]
    # the culprit: where it is and its line
    assert html.escape(first.location) in text and html.escape(first.source_line) in text
    assert html.escape(first.describe()) in text


def test_the_profile_is_every_op_up_to_and_past_the_divergence(located):
    ops = located.profiles[("cpu", "cpu:against")]
    first = located.located[0]
    at = [op.op_index for op in ops].index(first.op_index)
    assert at > 0 and all(op.ok and op.max_rel == 0 for op in ops[:at])
    assert not ops[at].ok and ops[at].max_rel == first.errors.max_rel
    assert ops[at].max_ulp == first.errors.max_ulp
    # past it: the ops it reaches (the profile does not stop where diverging_ops does)
    assert len(ops) == 25 and sum(not op.ok for op in ops[at + 1:]) > 3
    data = json.loads(located.dumps())
    assert data["profiles"][0]["a"] == "cpu" and data["profiles"][0]["b"] == "cpu:against"
    assert data["profiles"][0]["ops"][at] == {
        "op_index": first.op_index, "name": first.name, "location": first.location,
        "max_rel": first.errors.max_rel, "max_ulp": first.errors.max_ulp, "ok": False,
        "node": ["main", str(first.op_index)]}  # (the 6th op of @main: Model Explorer's "5")


def test_names_and_locations_are_escaped(located, tmp_path):
    evil = "<b>&amp;</b>"
    divergence = dataclasses.replace(located.located[0], name=f"op{evil}",
                                     location=f"a{evil}.py:1:2", source_line=f"x = {evil}")
    ops = located.profiles[("cpu", "cpu:against")]
    profile = [op._replace(name=f"op{evil}", location=f"a{evil}.py:1:2") for op in ops]
    c = dataclasses.replace(located, function=f"f{evil}", against=f"g{evil}",
                            located=[divergence], profiles={("cpu", "cpu:against"): profile},
                            locate_notes=[f"note {evil}"])
    path = tmp_path / "evil.html"
    c.write_html(path)
    text = path.read_text(encoding="utf-8")
    _document(text)
    assert evil not in text and html.escape(evil) in text
    # the SVGs parse as XML, and their titles read back as the names themselves
    titles = [t.text for svg in _svgs(text) for t in svg.iter(f"{SVG}title")]
    assert any(f"op{evil} at a{evil}.py:1:2" in t for t in titles)


def test_the_cli_writes_the_page(edited, tmp_path, capsys):
    path = tmp_path / "cmp.html"
    code = cli.main(["compare", str(MLP), "--against", str(edited), "--locate",
                     "--html", str(path)])
    assert code == exits.DISAGREE
    assert f"wrote {path}" in capsys.readouterr().out
    text = path.read_text(encoding="utf-8")
    _self_contained(_document(text), text)
    assert "programs DISAGREE" in text and 'class="divergence"' in text


def test_agreement_has_no_plots(tmp_path):
    path = tmp_path / "ok.html"
    c = compare(str(MLP), backends=["cpu", "f64"], locate=True)
    assert c.ok and not c.profiles
    c.write_html(path)
    text = path.read_text(encoding="utf-8")
    _document(text)
    assert "<svg" not in text and "backends agree" in text


@pytest.mark.parametrize("where", ["{d}/no/such/folder/r.html", "{d}"])
def test_an_unwritable_report_is_refused_before_any_work(tmp_path, capsys, monkeypatch, where):
    def no_work(*args, **kwargs):
        raise AssertionError("compared before checking --html")
    monkeypatch.setattr(commands, "compare", no_work)
    monkeypatch.setattr(commands, "_load", no_work)
    code = cli.main(["compare", str(MLP), "--html", where.format(d=tmp_path)])
    err = capsys.readouterr().err
    assert code == exits.USAGE and err.startswith("shlo2jax: error: --html ")
    assert len(err.splitlines()) == 1


def _chromium():
    return next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")
                 if shutil.which(n)), None)


def test_a_browser_draws_the_page(located, tmp_path):
    browser = _chromium()
    if browser is None:
        pytest.skip("no chromium binary on PATH (apt-get install chromium): the page is not "
                    "rendered here")
    page, shot = tmp_path / "report.html", tmp_path / "report.png"
    located.write_html(page)
    run = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu",
                          "--hide-scrollbars", f"--screenshot={shot}", "--window-size=800,1600",
                          page.as_uri()], capture_output=True, timeout=120)
    assert shot.is_file(), run.stderr.decode(errors="replace")[-2000:]
    image = pytest.importorskip("PIL.Image", reason="no PIL: the screenshot is not read")
    pixels = np.asarray(image.open(shot).convert("RGB"))
    assert pixels.shape[:2] == (1600, 800)
    # drawn: many colours, the plots' red among them (points beyond the tolerance)
    assert len(np.unique(pixels.reshape(-1, 3), axis=0)) > 50
    red = (pixels[..., 0] > 180) & (pixels[..., 1] < 60) & (pixels[..., 2] < 60)
    assert red.sum() > 100


def test_a_bfloat16_output_has_its_histogram(located, tmp_path):
    x = np.linspace(1, 2, 6).astype(ml_dtypes.bfloat16)
    y = (x.astype(np.float32) * 1.01).astype(ml_dtypes.bfloat16)
    run = located.runs["cpu"]
    runs = {n: dataclasses.replace(run, name=n, outputs=[v]) for n, v in (("a", x), ("b", y))}
    c = dataclasses.replace(located, runs=runs, located=[], profiles={},
                            pairs=[PairResult("a", "b", 0, array_errors(x, y, 1e-4, 1e-6))])
    c.write_html(tmp_path / "bf16.html")
    (histogram,) = _svgs((tmp_path / "bf16.html").read_text(encoding="utf-8"))
    bars = list(histogram.iter(f"{SVG}rect"))[1:]
    assert sum(int(r.find(f"{SVG}title").text.rsplit(": ", 1)[1].split()[0])
               for r in bars) == 6
