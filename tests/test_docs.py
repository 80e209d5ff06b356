"""The documentation: its generated tables are current (docs/gen_tables.py --check), README.md
stays a front page whose links lead somewhere, the measured corpus table lists every entry, and
the site builds with `mkdocs build --strict` (skipped, with the reason, without the docs extra)."""

from __future__ import annotations

import importlib.util
import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def _gen_tables():
    spec = importlib.util.spec_from_file_location("gen_tables", DOCS / "gen_tables.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_tables_are_current():
    stale = _gen_tables().stale()
    assert stale == [], (f"stale generated documentation: {stale}; regenerate with "
                         f"`python docs/gen_tables.py`")


def test_check_names_the_stale_file(tmp_path, monkeypatch, capsys):
    gen = _gen_tables()
    # the two tables made from files only (the custom-call one imports the op registry)
    monkeypatch.setattr(gen, "TABLES", {"corpus.md": gen.corpus,
                                        "conformance.md": gen.conformance})
    monkeypatch.setattr(gen, "GENERATED", tmp_path / "docs" / "generated")
    monkeypatch.setattr(gen, "ROOT", tmp_path)
    assert gen.main([]) == 0
    assert gen.main(["--check"]) == 0
    stale = tmp_path / "docs" / "generated" / "conformance.md"
    stale.write_text(stale.read_text().replace("| `testdata` |", "| `testdata` (edited) |"))
    capsys.readouterr()
    assert gen.main(["--check"]) == 1
    err = capsys.readouterr().err
    assert "docs/generated/conformance.md" in err and "corpus.md" not in err
    stale.unlink()
    assert gen.main(["--check"]) == 1
    assert "docs/generated/conformance.md" in capsys.readouterr().err


def test_generated_tables_say_what_the_files_say():
    gen = _gen_tables()
    corpus = gen.corpus()
    entries = sorted(p.parent for p in (ROOT / "tests" / "corpus").glob("*/*/meta.json"))
    assert f"**{len(entries)} entries**" in corpus
    for folder in entries:
        assert f"| {folder.parent.name} | `{folder.name}` |" in corpus
    conformance = gen.conformance()
    assert "| `testdata` |" in conformance and "RUN-DISABLED" in conformance


def test_measured_corpus_table_lists_every_entry():
    """docs/guides/corpus.md keeps report.py's last measured table: one row per entry."""
    text = (DOCS / "guides" / "corpus.md").read_text()
    table = text.split("## Measured results", 1)[1]
    rows = set()
    for line in table.splitlines():
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) >= 2 and cells[0] not in ("producer", "") \
                and not set(cells[0]) <= set("-: "):
            rows.add(f"{cells[0]}/{cells[1]}")
    entries = {f"{p.parent.parent.name}/{p.parent.name}"
               for p in (ROOT / "tests" / "corpus").glob("*/*/meta.json")}
    assert rows == entries, (
        "docs/guides/corpus.md's measured table is stale: paste in the table of "
        "`python tests/corpus/report.py --markdown`; "
        f"missing {sorted(entries - rows)}, extra {sorted(rows - entries)}")


def test_readme_is_a_front_page():
    text = (ROOT / "README.md").read_text()
    assert len(text) < 12_000, f"README.md has {len(text)} characters: move detail into docs/"
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    local = [link for link in links if "://" not in link and not link.startswith("mailto:")]
    assert any(link.startswith("docs/") for link in local)
    missing = [link for link in local if not (ROOT / link).exists()]
    assert missing == [], f"README.md links to files that do not exist: {missing}"


def test_every_page_is_in_the_nav():
    """mkdocs --strict warns about pages left out of the nav; checked here without mkdocs."""
    nav = (ROOT / "mkdocs.yml").read_text()
    pages = [p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")
             if "generated" not in p.relative_to(DOCS).parts
             and "notebooks" not in p.relative_to(DOCS).parts]
    missing = [page for page in pages if page not in nav]
    assert missing == [], f"pages not in mkdocs.yml's nav: {missing}"


def test_site_builds_strict(tmp_path):
    for module in ("mkdocs", "material", "mkdocstrings_handlers.python", "mkdocs_jupyter"):
        pytest.importorskip(module, reason="the docs extra is not installed "
                                           "(pip install -e '.[docs]')")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert (tmp_path / "site" / "index.html").exists()
    assert (tmp_path / "site" / "notebooks" / "finetune" / "index.html").exists()
