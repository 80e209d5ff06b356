"""The notebooks run top to bottom (executed with nbclient, as in CI)."""

import pathlib

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOKS = pathlib.Path(__file__).resolve().parents[1] / "notebooks"


def run_notebook(name, as_stored: bool = True):
    """The notebook executed now; with `as_stored` (it runs on what it ran on when stored), its
    stored outputs checked to be what it prints today where the library formats them
    (`_library_lines`)."""
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    stored = _library_lines(notebook)
    client = nbclient.NotebookClient(notebook, timeout=120, kernel_name="python3",
                                     resources={"metadata": {"path": str(NOTEBOOKS)}})
    client.execute()
    if as_stored:
        assert _library_lines(notebook) == stored, (
            f"{name}: the stored outputs are not today's (execute it in place: "
            "notebooks/README.md)")
    return notebook


def _library_lines(notebook) -> list:
    """The output lines the library formats (signatures, reprs), which do not vary by run."""
    lines = []
    for cell in notebook.cells:
        for out in cell.get("outputs", []) if cell.cell_type == "code" else ():
            text = out.get("text") or out.get("data", {}).get("text/plain", "")
            text = "".join(text) if isinstance(text, list) else text
            lines += [ln for ln in text.splitlines() if "@main(" in ln or "<shlo2jax." in ln]
    return lines


@pytest.mark.notebook
@pytest.mark.slow
def test_finetune_loss_goes_down():
    notebook = run_notebook("finetune.ipynb")
    # The notebook prints `loss A -> B` in its last cell; read the numbers back.
    text = "".join(out.get("text", "") for cell in notebook.cells if cell.cell_type == "code"
                   for out in cell.get("outputs", []) if out.get("output_type") == "stream")
    line = next(l for l in text.splitlines() if l.startswith("loss ") and "->" in l)
    initial, final = (float(v) for v in line[len("loss "):].split("->"))
    assert final < initial * 0.5, line


def _stream_text(notebook) -> str:
    return "".join(out.get("text", "") for cell in notebook.cells if cell.cell_type == "code"
                   for out in cell.get("outputs", []) if out.get("output_type") == "stream")


def _images(notebook) -> int:
    return sum("image/png" in out.get("data", {}) for cell in notebook.cells
               if cell.cell_type == "code" for out in cell.get("outputs", []))


@pytest.mark.notebook
@pytest.mark.slow
def test_finetune_baked_weights():
    # the corpus's Flax CNN with closed-over weights: lifted, fine-tuned, written back out
    notebook = run_notebook("finetune_baked_weights.ipynb")
    text = _stream_text(notebook)
    assert "LinenCNN/Conv_0/kernel" in text and "LinenCNN/Dense_0/kernel" in text
    assert "apply == program, bit for bit" in text
    line = next(l for l in text.splitlines() if l.startswith("loss ") and "->" in l)
    initial, final = (float(v) for v in line[len("loss "):].split("->"))
    assert final < initial * 0.1, line
    accuracy = next(l for l in text.splitlines() if l.startswith("held-out accuracy"))
    assert float(accuracy.split("->")[1]) >= 0.8, accuracy
    assert "the fine-tuned kernels are constants of the new artifact: 3" in text
    assert _images(notebook) == 1  # the loss curves


def test_committed_notebooks_carry_their_outputs():
    # notebooks/ are read on GitHub: committed executed, with their pictures
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        notebook = nbformat.read(path, as_version=4)
        code = [c for c in notebook.cells if c.cell_type == "code"]
        unexecuted = [i for i, c in enumerate(code) if c.get("execution_count") is None]
        assert not unexecuted, f"{path.name}: code cells {unexecuted} are not executed"
        assert _images(notebook) >= 1, f"{path.name} shows no picture"


@pytest.mark.notebook
@pytest.mark.slow
def test_compare_backends_notebook():
    # stored as run on ../shared's chess model; without it, the notebook runs the MLP
    chess = NOTEBOOKS.parents[1] / "shared" / "models" / "searchless_chess_9m.mlir.bc"
    notebook = run_notebook("compare_backends.ipynb", as_stored=chess.is_file())
    text = "".join(out.get("text", "") for cell in notebook.cells if cell.cell_type == "code"
                   for out in cell.get("outputs", []) if out.get("output_type") == "stream")
    assert "backends agree" in text  # the loose comparison of every available backend
    assert "cpu vs xla-direct" in text and "cpu vs f64" in text
    assert "float results compared" in text and "outputs vs float64" in text
